//! The engine's read overhead: `uptime()` and `uptime_nanos()` against a bare
//! read of the same counter.
//!
//! The counter is a `SimCounter` (one atomic load), so the difference is the
//! engine's own work: for `uptime()` the state and hands loads, the promise
//! check and the 128-bit product; for `uptime_nanos()` the state, the first
//! segment and one multiply-add. Every read is timed by the same plain loop,
//! so that the figures compare; `overhead` and `overhead_nanos` time both
//! loops in one sample and report the difference, the figures to quote.
//!
//! `cargo bench -p timehands --bench read_overhead`
// criterion_group! defines a public function that cannot carry a doc comment.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use timehands::{Counter, SimCounter, Timekeeper};

/// How long `iters` calls of `read` take, in one plain loop.
fn timed<T>(iters: u64, read: impl Fn() -> T) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(read());
    }
    start.elapsed()
}

fn read_overhead(c: &mut Criterion) {
    let counter = SimCounter::new(1_000_000_000);
    let tk = Timekeeper::new(counter.clone()).expect("a 1 GHz counter is valid");
    let mut group = c.benchmark_group("read");
    group.bench_function("counter", |b| {
        b.iter_custom(|n| timed(n, || counter.read()))
    });
    group.bench_function("uptime", |b| b.iter_custom(|n| timed(n, || tk.uptime())));
    group.bench_function("uptime_nanos", |b| {
        b.iter_custom(|n| timed(n, || tk.uptime_nanos()))
    });
    group.bench_function("uptime_coarse", |b| {
        b.iter_custom(|n| timed(n, || tk.uptime_coarse()))
    });
    group.bench_function("realtime", |b| {
        b.iter_custom(|n| timed(n, || tk.realtime()))
    });
    for (name, read) in [
        (
            "overhead",
            (|tk| tk.uptime().frac()) as fn(&Timekeeper<SimCounter>) -> u64,
        ),
        ("overhead_nanos", |tk| tk.uptime_nanos()),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|n| {
                let bare = timed(n, || counter.read());
                let engine = timed(n, || read(&tk));
                // Criterion needs a positive time; a tie reads as 1 ns in total.
                engine.saturating_sub(bare).max(Duration::from_nanos(1))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, read_overhead);
criterion_main!(benches);
