//! The engine's read overhead: `uptime()` against a bare read of the same counter.
//!
//! The counter is a `SimCounter` (one atomic load), so the difference is the
//! engine's own work: the state and hands loads, the promise check and the
//! 128-bit product. Every read is timed by the same plain loop, so that the
//! figures compare; `overhead` times both loops in one sample and reports the
//! difference, the figure to quote.
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
    group.bench_function("uptime_coarse", |b| {
        b.iter_custom(|n| timed(n, || tk.uptime_coarse()))
    });
    group.bench_function("realtime", |b| {
        b.iter_custom(|n| timed(n, || tk.realtime()))
    });
    group.bench_function("overhead", |b| {
        b.iter_custom(|n| {
            let bare = timed(n, || counter.read());
            let engine = timed(n, || tk.uptime());
            // Criterion needs a positive time; a tie reads as 1 ns in total.
            engine.saturating_sub(bare).max(Duration::from_nanos(1))
        })
    });
    group.finish();
}

criterion_group!(benches, read_overhead);
criterion_main!(benches);
