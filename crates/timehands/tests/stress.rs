//! Invariants 3 and 6 on real threads and a real clock: readers on every CPU,
//! two writers winding up as fast as they can with random ±500 ppm frequency
//! changes and slews, and the writer threads preempted at random inside their
//! counter reads (a sleep after taking the value) so that candidates are
//! cancelled for real.
//!
//! Each reader checks its own reads (per-thread monotonicity) and, through one
//! shared atomic maximum, every other reader's (happens-before monotonicity: a
//! value another thread published before our load is never ahead of our read),
//! for the exact reads and the nanosecond ones alike.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use rand::Rng;
use timehands::{BinTime, Counter, Timekeeper};

/// The kernel's monotonic clock in nanoseconds since the test began: a real,
/// ordered counter at 1 GHz. In writer threads it sometimes sleeps after taking
/// the value, as a preempted writer would.
struct KernelCounter {
    start: Instant,
    writers: [OnceLock<ThreadId>; 2],
}

impl Counter for KernelCounter {
    fn read(&self) -> u64 {
        let value = self.start.elapsed().as_nanos() as u64;
        let me = thread::current().id();
        if self.writers.iter().any(|w| w.get() == Some(&me)) {
            let mut rng = rand::rng();
            if rng.random_ratio(1, 20) {
                thread::sleep(Duration::from_micros(rng.random_range(0..300)));
            }
        }
        value
    }

    fn frequency(&self) -> u64 {
        1_000_000_000
    }
}

/// Uptime packed for an atomic: 24 bits of seconds, 40 of fraction (about 1 ps),
/// truncated, so the packing keeps order.
fn pack(t: BinTime) -> u64 {
    assert!((0..1 << 24).contains(&t.sec()));
    (t.sec() as u64) << 40 | t.frac() >> 24
}

#[test]
#[cfg_attr(miri, ignore = "real threads and a real clock for a long time")]
fn readers_on_every_cpu_never_see_time_go_backwards() {
    let stats = stress(false);
    assert!(
        stats.cancelled > 0,
        "no preempted writer was caught: {stats:?}"
    );
}

/// The same on a timekeeper that follows a reference: readers past the
/// promise stand there, and the writers also wind up following a reference
/// up to 200 µs behind the counter, so that late windups take gaps out.
#[test]
#[cfg_attr(miri, ignore = "real threads and a real clock for a long time")]
fn readers_of_a_timekeeper_that_follows_a_reference_never_see_time_go_backwards() {
    stress(true);
}

/// Readers on every CPU against two writers (see the module docs), on a
/// timekeeper that `follows_reference` or not; returns what the writers did.
fn stress(follows_reference: bool) -> timehands::Stats {
    let start = Instant::now();
    let tk = Arc::new(
        Timekeeper::builder(KernelCounter {
            start,
            writers: [OnceLock::new(), OnceLock::new()],
        })
        // A short interval, so that readers cross promises and switch points
        // thousands of times.
        .windup_interval(Duration::from_micros(50))
        .follows_reference(follows_reference)
        .build()
        .unwrap(),
    );
    let latest = Arc::new(AtomicU64::new(0));
    // The same for the nanosecond reads, which the exact ones also publish
    // (rounded down): the two kinds of read agree across threads.
    let latest_nanos = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpus = thread::available_parallelism().map_or(2, |n| n.get());

    let writers: Vec<_> = (0..2)
        .map(|i| {
            let (tk, stop) = (tk.clone(), stop.clone());
            thread::spawn(move || {
                tk.counter().writers[i].set(thread::current().id()).unwrap();
                let mut rng = rand::rng();
                while !stop.load(Ordering::Relaxed) {
                    match rng.random_range(0..20) {
                        0 => tk
                            .set_frequency_adjustment(rng.random_range(-500_000..=500_000))
                            .unwrap(),
                        1 => {
                            tk.adjtime(rng.random_range(-100_000..=100_000));
                        }
                        2 | 3 if follows_reference => {
                            let lag = rng.random_range(0..200_000);
                            tk.windup_following(|| {
                                let ns = start.elapsed().as_nanos() as i128 - lag;
                                BinTime::from_nanos(ns)
                            });
                        }
                        _ => {
                            tk.windup();
                        }
                    }
                }
            })
        })
        .collect();

    let readers: Vec<_> = (0..cpus)
        .map(|_| {
            let (tk, latest, latest_nanos) = (tk.clone(), latest.clone(), latest_nanos.clone());
            thread::spawn(move || {
                let mut last = BinTime::ZERO;
                let mut last_nanos = 0;
                for _ in 0..1_000_000 {
                    let seen = latest.load(Ordering::Acquire);
                    let now = tk.uptime();
                    assert!(now >= last, "one thread saw {last} then {now}");
                    assert!(
                        pack(now) >= seen,
                        "read {now} after another thread had published a later time"
                    );
                    latest.fetch_max(pack(now), Ordering::AcqRel);
                    latest_nanos.fetch_max(now.as_nanos() as u64, Ordering::AcqRel);

                    let seen = latest_nanos.load(Ordering::Acquire);
                    let nanos = tk.uptime_nanos();
                    assert!(
                        nanos >= last_nanos,
                        "one thread saw {last_nanos} then {nanos} ns"
                    );
                    assert!(
                        nanos >= seen,
                        "read {nanos} ns after another thread had published {seen} ns"
                    );
                    latest_nanos.fetch_max(nanos, Ordering::AcqRel);
                    last_nanos = nanos;

                    let coarse = tk.uptime_coarse();
                    assert!(coarse <= tk.uptime(), "coarse {coarse} ahead of precise");
                    last = now;
                }
            })
        })
        .collect();
    for reader in readers {
        reader.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let stats = tk.stats();
    assert!(
        stats.rate_changes > 0,
        "no rate change was published: {stats:?}"
    );
    stats
}
