//! The reader/writer protocol under the loom model checker, which runs every
//! interleaving of the threads' atomic accesses (within a preemption bound)
//! under the C++ memory model: the ring's seqlocks, the pending flag, the
//! readers' cancel, and the `SeqCst` fences that tie the two counter reads
//! together.
//!
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p timehands --test loom --release`
#![cfg(loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use timehands::{BinTime, SimCounter, Timekeeper};

/// Uptime packed for an atomic, keeping order (2^-32 s resolution).
fn pack(t: BinTime) -> u64 {
    (t.sec() as u64) << 32 | t.frac() >> 32
}

/// A 1 kHz counter with a 4-count interval (the switch point one count after a
/// windup's sample), wound up at count 8 and standing at 12, with a 500 ppm
/// slower rate waiting for the next windup.
fn setup(hands: usize, follows_reference: bool) -> (SimCounter, Arc<Timekeeper<SimCounter>>) {
    let counter = SimCounter::new(1000);
    let tk = Timekeeper::builder(counter.clone())
        .hands(hands)
        .windup_interval(Duration::from_millis(4))
        .follows_reference(follows_reference)
        .build()
        .unwrap();
    counter.advance(8);
    tk.windup();
    counter.advance(4);
    tk.set_frequency_adjustment(-500_000).unwrap();
    (counter, Arc::new(tk))
}

/// A read of the clock as a `u64` that keeps its order: the exact uptime
/// packed, or the nanosecond read.
type Read = fn(&Timekeeper<SimCounter>) -> u64;

/// The exact uptime, packed.
fn exact(tk: &Timekeeper<SimCounter>) -> u64 {
    pack(tk.uptime())
}

/// The nanosecond read (its own segments, and the exact line's long way).
fn nanos(tk: &Timekeeper<SimCounter>) -> u64 {
    tk.uptime_nanos()
}

/// How the writer winds up in a model.
#[derive(Clone, Copy)]
enum Writer {
    /// `windup`: the rate change.
    Windup,
    /// `windup_following` a reference that saw none of the counts since the
    /// start: on a timekeeper that follows it, a gap taken out.
    Following,
}

/// A writer lowers the rate while one reader moves time past every switch
/// point it could choose and reads twice with `read`, handing its first value
/// to a second reader (if `second_reader`) through an atomic. Nobody may see
/// time go backwards.
fn rate_change_against_readers(hands: usize, second_reader: bool, read: Read) {
    readers_against(hands, false, Writer::Windup, second_reader, read);
}

/// [`rate_change_against_readers`] on a timekeeper that `follows_reference`
/// or not, with the writer winding up as `how` says.
fn readers_against(
    hands: usize,
    follows_reference: bool,
    how: Writer,
    second_reader: bool,
    read: Read,
) {
    loom::model(move || {
        let (counter, tk) = setup(hands, follows_reference);
        let handed = Arc::new(AtomicU64::new(0));

        let writer = {
            let tk = tk.clone();
            thread::spawn(move || match how {
                Writer::Windup => {
                    tk.windup();
                }
                Writer::Following => {
                    tk.windup_following(|| BinTime::ZERO);
                }
            })
        };
        let first = {
            let (tk, counter, handed) = (tk.clone(), counter.clone(), handed.clone());
            thread::spawn(move || {
                counter.advance(5);
                let a = read(&tk);
                handed.store(a, Ordering::Release);
                counter.advance(2);
                let b = read(&tk);
                assert!(b >= a, "one reader saw {a} then {b}");
                b
            })
        };
        let mine = second_reader.then(|| {
            let seen = handed.load(Ordering::Acquire);
            let mine = read(&tk);
            assert!(
                mine >= seen,
                "read {mine} after another reader handed over {seen}"
            );
            mine
        });

        writer.join().unwrap();
        let last_of_first = first.join().unwrap();
        let after = read(&tk);
        assert!(after >= last_of_first && mine.is_none_or(|mine| after >= mine));
    });
}

#[test]
fn rate_change_with_a_ring() {
    rate_change_against_readers(2, true, exact);
}

/// The same, read in nanoseconds: the segments a writer publishes with its
/// hands are read under the same slot seqlock, and agree with the exact line.
#[test]
fn rate_change_with_a_ring_read_in_nanoseconds() {
    rate_change_against_readers(2, true, nanos);
}

/// With one hands readers retry while the writer rewrites it, and every retry
/// multiplies the interleavings: one reader keeps the model small enough.
#[test]
fn rate_change_in_place() {
    rate_change_against_readers(1, false, exact);
}

/// The same, read in nanoseconds.
#[test]
fn rate_change_in_place_read_in_nanoseconds() {
    rate_change_against_readers(1, false, nanos);
}

/// Readers past the promise of a timekeeper that follows a reference stand
/// there, ask nothing and cancel nothing; the rate change is published with
/// a plain store.
#[test]
fn rate_change_with_reads_standing_at_the_promise() {
    readers_against(2, true, Writer::Windup, true, exact);
}

/// A windup that takes a gap out (the reference saw none of it) while
/// readers stand at the promise: the new hands starts no earlier than they
/// stood, in exact and nanosecond reads.
#[test]
fn a_gap_taken_out_against_standing_readers() {
    readers_against(2, true, Writer::Following, true, exact);
    readers_against(2, true, Writer::Following, false, nanos);
}

/// Two windups and a realtime step at once: one writer at a time, and readers
/// keep a consistent hands (a torn one would break the continuity below).
#[test]
fn concurrent_writers_and_a_realtime_step() {
    loom::model(|| {
        let (counter, tk) = setup(2, false);
        let before = tk.uptime();
        let writers: Vec<_> = (0..2)
            .map(|i| {
                let tk = tk.clone();
                thread::spawn(move || {
                    if i == 0 {
                        tk.windup();
                    } else {
                        tk.set_realtime(BinTime::new(1_000_000, 0));
                    }
                })
            })
            .collect();
        let during = tk.uptime();
        assert_eq!(
            during, before,
            "the counter did not move, so neither may uptime"
        );
        for writer in writers {
            writer.join().unwrap();
        }
        assert_eq!(tk.uptime(), before);
        assert_eq!(tk.realtime(), BinTime::new(1_000_000, 0));
        counter.advance(1);
        assert!(tk.uptime() > before);
    });
}

/// A retirement against a reader that moves time past every retire point the
/// writer could choose and hands its time to a second reader: no read of the
/// retired timekeeper is ever later than the time it was retired at (where a
/// successor starts), and no reader sees time go backwards.
#[test]
fn retire_against_readers() {
    loom::model(|| {
        let (counter, tk) = setup(2, false);
        let handed = Arc::new(AtomicU64::new(0));

        let writer = {
            let tk = tk.clone();
            thread::spawn(move || tk.retire())
        };
        let first = {
            let (tk, counter, handed) = (tk.clone(), counter.clone(), handed.clone());
            thread::spawn(move || {
                counter.advance(6);
                let a = tk.uptime();
                handed.store(pack(a), Ordering::Release);
                a
            })
        };
        let seen = handed.load(Ordering::Acquire);
        let mine = tk.uptime();
        assert!(
            pack(mine) >= seen,
            "read {mine} after another reader handed over a later time"
        );

        let retired_at = writer.join().unwrap();
        let a = first.join().unwrap();
        assert!(
            a <= retired_at && mine <= retired_at,
            "read {a} and {mine} of a timekeeper retired at {retired_at}"
        );
        counter.advance(100);
        assert_eq!(tk.uptime(), retired_at);
    });
}

/// A pulse captured at the counter's value is stamped while a windup
/// publishes a rate change on a hands based after it: the stamp is the time
/// a read at the capture gave, on whichever hands it finds. In place (a
/// ring of one) the capture's hands may be gone: an error, never a wrong time.
#[test]
fn capture_against_a_windup() {
    for hands in [1, 2] {
        loom::model(move || {
            let (counter, tk) = setup(hands, false);
            let edge = counter.value();
            let expected = tk.uptime();
            let writer = {
                let (counter, tk) = (counter.clone(), tk.clone());
                thread::spawn(move || {
                    counter.advance(4);
                    tk.windup();
                })
            };
            match tk.time_of(edge) {
                Ok(stamp) => assert_eq!(stamp.uptime, expected),
                Err(error) => assert_eq!(hands, 1, "{error}"),
            }
            writer.join().unwrap();
        });
    }
}
