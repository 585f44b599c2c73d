//! A log line's timestamp: timehands' `tracing` timers against
//! tracing-subscriber's own (`SystemTime`, RFC 3339 in microseconds from
//! `std::time::SystemTime`, and `Uptime`, since the timer's creation from
//! `std::time::Instant`). `timestamp` times the timer alone, formatting into a
//! `String`; `line` a whole `tracing::info!` line through
//! `tracing_subscriber::fmt()` written to `io::sink`.
//!
//! `cargo bench -p timehands --features tracing --bench tracing_time`
// criterion_group! defines a public function that cannot carry a doc comment.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use timehands::tracing_time::{Rfc3339, Uptime};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{self, FormatTime};

/// Times `timer` as `timestamp/NAME`, alone, and `line/NAME`, in a whole log line.
fn bench_timer<T>(c: &mut Criterion, name: &str, timer: T)
where
    T: FormatTime + Clone + Send + Sync + 'static,
{
    let mut text = String::with_capacity(64);
    c.bench_function(&format!("timestamp/{name}"), |b| {
        b.iter(|| {
            text.clear();
            black_box(&timer)
                .format_time(&mut Writer::new(&mut text))
                .expect("a String takes any text");
            black_box(text.len())
        })
    });
    let subscriber = tracing_subscriber::fmt()
        .with_timer(timer)
        .with_ansi(false)
        .with_writer(std::io::sink)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        c.bench_function(&format!("line/{name}"), |b| {
            b.iter(|| tracing::info!(answer = 42, "a log line"))
        })
    });
}

fn tracing_time(c: &mut Criterion) {
    bench_timer(c, "timehands Uptime", Uptime);
    bench_timer(c, "timehands Rfc3339", Rfc3339);
    bench_timer(c, "tracing-subscriber SystemTime", time::SystemTime);
    bench_timer(c, "tracing-subscriber Uptime", time::Uptime::default());
}

criterion_group!(benches, tracing_time);
criterion_main!(benches);
