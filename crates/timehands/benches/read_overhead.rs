//! The engine's read overhead: `uptime()` against a bare read of the same counter.
//!
//! The counter is a `SimCounter` (one atomic load), so the difference is the
//! engine's own work: the state and hands loads, the promise check and the
//! 128-bit product. `overhead` measures that difference directly, both loops in
//! the same sample, and is the figure to quote.
//!
//! `cargo bench -p timehands --bench read_overhead`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use timehands::{Counter, SimCounter, Timekeeper};

fn read_overhead(c: &mut Criterion) {
    let counter = SimCounter::new(1_000_000_000);
    let tk = Timekeeper::new(counter.clone()).expect("a 1 GHz counter is valid");
    let mut group = c.benchmark_group("read");
    group.bench_function("counter", |b| b.iter(|| black_box(counter.read())));
    group.bench_function("uptime", |b| b.iter(|| black_box(tk.uptime())));
    group.bench_function("uptime_coarse", |b| {
        b.iter(|| black_box(tk.uptime_coarse()))
    });
    group.bench_function("realtime", |b| b.iter(|| black_box(tk.realtime())));
    group.bench_function("overhead", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(counter.read());
            }
            let bare = start.elapsed();
            let start = Instant::now();
            for _ in 0..iters {
                black_box(tk.uptime());
            }
            start
                .elapsed()
                .saturating_sub(bare)
                .max(Duration::from_nanos(1))
        })
    });
    group.finish();
}

criterion_group!(benches, read_overhead);
criterion_main!(benches);
