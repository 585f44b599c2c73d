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
//! A retirement (`Timekeeper::retire`) is a candidate too, and never gives up.

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
    Done,
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
/// advances of 20 µs, checking that it never decreases from `last` and that
/// the nanosecond read agrees; returns the last value. The first read, at the count the previous run ended on, is the
/// one that sees a backward step from a publish in between.
fn read_ahead(tk: &Timekeeper<StallingCounter>, mut last: BinTime, steps: usize) -> BinTime {
    for step in 0..=steps {
        if step > 0 {
            tk.counter().time.advance(INTERVAL / 50);
        }
        let now = tk.uptime();
        assert!(now >= last, "time went backwards: {last} then {now}");
        // At the same count, the nanosecond read is the exact one rounded
        // down, whichever hands (or long way) it used.
        let nanos = tk.uptime_nanos();
        assert_eq!(nanos as i128, now.as_nanos(), "at {now}");
        last = now;
    }
    last
}

/// A timekeeper on a `StallingCounter` wound up once, with a 500 ppm slower
/// rate waiting; `op` runs on a writer thread that stalls after each of its
/// reads in `stall_after`, and while it is stalled a reader thread runs two
/// intervals ahead. Returns the timekeeper, what `op` returned, and the
/// reader's last time; panics if time went backwards, if the reader waited for
/// the writer, or if the writer did not make the reads expected of it.
fn stalled<R: Send + 'static>(
    hands: usize,
    stall_after: &[usize],
    op: fn(&Timekeeper<StallingCounter>) -> R,
) -> (Arc<Timekeeper<StallingCounter>>, R, BinTime, Reader) {
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
            let outcome = op(&tk);
            events_tx.send(Event::Done).unwrap();
            outcome
        })
    };
    let reader = Reader::spawn(tk.clone());
    let mut stalls = Vec::new();
    while let Event::Stalled(n) = events
        .recv_timeout(WATCHDOG)
        .expect("the writer neither stalled nor finished")
    {
        stalls.push(n);
        // 100 steps of 20 µs: two intervals, far past any switch point the
        // stalled writer has chosen or will choose from its count.
        reader.run(100);
        resume.send(()).unwrap();
    }
    assert_eq!(
        stalls, stall_after,
        "the writer made the reads expected of it"
    );
    let outcome = writer.join().unwrap();
    let last = reader.run(100);
    (tk, outcome, last, reader)
}

/// A thread that reads ahead (see `read_ahead`) when asked, so that a reader
/// that waited for the writer shows as a watchdog failure rather than a hung
/// test.
struct Reader {
    work: Sender<usize>,
    done: Receiver<BinTime>,
}

impl Reader {
    fn spawn(tk: Arc<Timekeeper<StallingCounter>>) -> Reader {
        let (work, work_rx) = channel::<usize>();
        let (done_tx, done) = channel();
        thread::spawn(move || {
            let mut last = tk.uptime();
            while let Ok(steps) = work_rx.recv() {
                last = read_ahead(&tk, last, steps);
                done_tx.send(last).unwrap();
            }
        });
        Reader { work, done }
    }

    /// Reads `steps` steps ahead; the last time read.
    fn run(&self, steps: usize) -> BinTime {
        self.work.send(steps).unwrap();
        self.done
            .recv_timeout(WATCHDOG)
            .expect("the reader waited for the stalled writer (or panicked)")
    }
}

/// Runs one windup that lowers the rate by 500 ppm with the writer stalled after
/// each read in `stall_after`; returns the timekeeper's stats.
fn stalled_windup(hands: usize, stall_after: &[usize]) -> timehands::Stats {
    let (tk, outcome, _, reader) = stalled(hands, stall_after, Timekeeper::windup);
    assert_eq!(outcome, Windup::Published);
    // Later windups (from this thread: no stalls) bring the lower rate in, and
    // time still never goes backwards.
    for _ in 0..3 {
        tk.windup();
        reader.run(100);
    }
    let nominal = ((1u128 << 64) + HZ as u128 / 2) / HZ as u128;
    let slow = (nominal - nominal * 500_000 / 1_000_000_000) as u64;
    let before = tk.uptime();
    tk.counter().time.advance(INTERVAL);
    assert_eq!(tk.uptime() - before, BinTime::from_counts(INTERVAL, slow));
    tk.stats()
}

/// Retires the timekeeper with the writer stalled after each read in
/// `stall_after`: the time it returns is never earlier than any read, before
/// or after, and a successor started there continues without a backward step.
fn stalled_retire(hands: usize, stall_after: &[usize]) {
    let (tk, retired_at, last, reader) = stalled(hands, stall_after, Timekeeper::retire);
    assert!(last <= retired_at, "read {last}, retired at {retired_at}");
    // Time on the retired timekeeper stands still at the retire point.
    assert_eq!(reader.run(100), retired_at);
    assert_eq!(tk.windup(), Windup::Retired);
    assert_eq!(tk.retire(), retired_at);
    let successor = Timekeeper::builder(SimCounter::new(1_000_000))
        .start_at(retired_at)
        .build()
        .unwrap();
    assert_eq!(successor.uptime(), retired_at);
    successor.counter().advance(1);
    assert!(successor.uptime() > retired_at);
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

#[test]
fn retire_stalled_after_its_sample() {
    for hands in [1, 2, 8] {
        // The check finds the retire point passed; the second attempt commits.
        stalled_retire(hands, &[1]);
    }
}

#[test]
fn retire_stalled_after_its_check() {
    for hands in [1, 2, 8] {
        // A reader passed the retire point, found it pending and cancelled it.
        stalled_retire(hands, &[2]);
    }
}

#[test]
fn retire_stalled_after_every_read_of_three_attempts() {
    for hands in [1, 2, 8] {
        stalled_retire(hands, &[1, 2, 3, 4, 5, 6]);
    }
}
