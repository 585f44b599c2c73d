//! Invariant 3 under the worst schedule a user-space writer can get: preempted
//! right after one of its counter reads, for as long as it takes readers to run
//! far past the switch point of the lower rate it is about to publish.
//!
//! The counter here belongs to the test. It stalls the writer thread after its
//! n-th read (having taken the value, so the writer resumes with a stale count,
//! exactly as if it had been preempted after the instruction), while a reader
//! thread advances time and reads. The reader must never see time go backwards,
//! and must never wait for the stalled writer: if it did, the test would stop at
//! the reader's watchdog instead of finishing.
//!
//! A writer makes these reads: its sample (1), then its check after marking the
//! candidate pending (2); a candidate that loses makes the next attempt read 3 and
//! 4, and so on. After three lost attempts the writer publishes the old rate.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, ThreadId};
use std::time::Duration;

use timehands::{BinTime, Counter, SimCounter, Timekeeper, Windup};

const HZ: u64 = 1_000_000_000;
const INTERVAL: u64 = 1_000_000; // 1 ms in counts
const WATCHDOG: Duration = Duration::from_secs(120);

enum Event {
    Stalled(usize),
    Done(Windup),
}

struct StallingCounter {
    time: SimCounter,
    writer: OnceLock<ThreadId>,
    stall_after: Vec<usize>,
    reads: Mutex<usize>,
    events: Mutex<Sender<Event>>,
    resume: Mutex<Receiver<()>>,
}

impl Counter for StallingCounter {
    fn read(&self) -> u64 {
        let value = self.time.read();
        if self.writer.get() == Some(&thread::current().id()) {
            let n = {
                let mut reads = self.reads.lock().unwrap();
                *reads += 1;
                *reads
            };
            if self.stall_after.contains(&n) {
                self.events.lock().unwrap().send(Event::Stalled(n)).unwrap();
                self.resume.lock().unwrap().recv().unwrap();
            }
        }
        value
    }

    fn frequency(&self) -> u64 {
        HZ
    }
}

/// Reads uptime at the counter's current value and then after each of `steps`
/// advances of 20 µs, checking that it never decreases from `last`; returns the
/// last value. The first read, at the count the previous run ended on, is the
/// one that sees a backward step from a publish in between.
fn read_ahead(tk: &Timekeeper<StallingCounter>, mut last: BinTime, steps: usize) -> BinTime {
    for step in 0..=steps {
        if step > 0 {
            tk.counter().time.advance(INTERVAL / 50);
        }
        let now = tk.uptime();
        assert!(now >= last, "time went backwards: {last} then {now}");
        last = now;
    }
    last
}

/// Runs one windup that lowers the rate by 500 ppm with the writer stalled after
/// each read in `stall_after`; returns the timekeeper's stats.
fn stalled_windup(hands: usize, stall_after: &[usize]) -> timehands::Stats {
    let (events_tx, events) = channel();
    let (resume, resume_rx) = channel();
    let tk = Arc::new(
        Timekeeper::builder(StallingCounter {
            time: SimCounter::new(HZ),
            writer: OnceLock::new(),
            stall_after: stall_after.to_vec(),
            reads: Mutex::new(0),
            events: Mutex::new(events_tx.clone()),
            resume: Mutex::new(resume_rx),
        })
        .hands(hands)
        .windup_interval(Duration::from_nanos(INTERVAL))
        .build()
        .unwrap(),
    );
    tk.counter().time.advance(10 * INTERVAL);
    tk.windup();
    tk.counter().time.advance(INTERVAL);
    tk.set_frequency_adjustment(-500_000).unwrap();

    let writer = {
        let tk = tk.clone();
        thread::spawn(move || {
            tk.counter().writer.set(thread::current().id()).unwrap();
            events_tx.send(Event::Done(tk.windup())).unwrap();
        })
    };
    // The reader runs on its own thread so that a reader that waited for the
    // writer shows as a watchdog failure rather than a hung test.
    let (work, work_rx) = channel::<usize>();
    let (done_tx, done) = channel();
    let reader = {
        let tk = tk.clone();
        thread::spawn(move || {
            let mut last = tk.uptime();
            while let Ok(steps) = work_rx.recv() {
                last = read_ahead(&tk, last, steps);
                done_tx.send(last).unwrap();
            }
        })
    };
    let run_reader = |steps| {
        work.send(steps).unwrap();
        done.recv_timeout(WATCHDOG)
            .expect("the reader waited for the stalled writer (or panicked)")
    };
    let mut stalls = Vec::new();
    loop {
        match events
            .recv_timeout(WATCHDOG)
            .expect("the writer neither stalled nor finished")
        {
            Event::Stalled(n) => {
                stalls.push(n);
                // 100 steps of 20 µs: two intervals, far past any switch point
                // the stalled writer has chosen or will choose from its count.
                run_reader(100);
                resume.send(()).unwrap();
            }
            Event::Done(outcome) => {
                assert_eq!(outcome, Windup::Published);
                break;
            }
        }
    }
    assert_eq!(
        stalls, stall_after,
        "the writer made the reads expected of it"
    );
    run_reader(100);
    writer.join().unwrap();

    // Later windups (from this thread: no stalls) bring the lower rate in, and
    // time still never goes backwards.
    for _ in 0..3 {
        tk.windup();
        run_reader(100);
    }
    drop(work);
    reader.join().unwrap();
    let nominal = ((1u128 << 64) + HZ as u128 / 2) / HZ as u128;
    let slow = (nominal - nominal * 500_000 / 1_000_000_000) as u64;
    let before = tk.uptime();
    tk.counter().time.advance(INTERVAL);
    assert_eq!(tk.uptime() - before, BinTime::from_counts(INTERVAL, slow));
    tk.stats()
}

#[test]
fn writer_stalled_after_its_sample() {
    for hands in [1, 2, 8] {
        let stats = stalled_windup(hands, &[1]);
        // The writer's own check found the switch point passed and started again.
        assert_eq!(stats.cancelled, 1, "{stats:?}");
    }
}

#[test]
fn writer_stalled_after_its_final_check() {
    for hands in [1, 2, 8] {
        let stats = stalled_windup(hands, &[2]);
        // A reader passed the switch point, found the candidate pending, and
        // cancelled it; the writer's publishing CAS failed.
        assert_eq!(stats.cancelled, 1, "{stats:?}");
    }
}

#[test]
fn writer_stalled_after_every_read_of_two_attempts() {
    for hands in [1, 2, 8] {
        let stats = stalled_windup(hands, &[1, 2, 3, 4]);
        assert_eq!(stats.cancelled, 2, "{stats:?}");
    }
}

#[test]
fn writer_stalled_until_it_gives_up_the_rate_change() {
    for hands in [1, 2, 8] {
        // Three attempts lost (reads 1 to 6); the seventh read samples for a
        // windup that keeps the old rate, and the stall after it is harmless.
        let stats = stalled_windup(hands, &[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(stats.cancelled, 3, "{stats:?}");
    }
}
