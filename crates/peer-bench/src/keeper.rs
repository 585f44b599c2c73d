//! One keeper for the machine against a clock kept in every process: a
//! keeper (this binary, told by [`KEEPER_ENV`] to be one, running
//! `timehands::keeper::Keeper` as `timehands keeper` does) publishes its
//! page in a private directory, and readers (this binary again, told by
//! [`READER_ENV`]) read `timehands::now()` once a millisecond, each a
//! process, 1, 10 and 100 at once, with the page (`TIMEHANDS_PAGE` names
//! it) and without it (it names no file: each keeps its own clock). Each
//! reader prints its process's CPU over a window and what one `now()`
//! costs it; the keeper's CPU and wakeups over the same window come from
//! its `/proc` entry. Then the first `now()` of a fresh process and its
//! first 50 ms of reads, with the page, as the first-call and fresh
//! sections measure them without it.
//!
//! Linux on x86_64 only (the page's readers read the TSC; the figures are
//! `/proc`'s); elsewhere the section says so.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

// The keeper and the readers it is measured with: Linux on x86_64.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod machine;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub use machine::{keeper_child, run};

/// Be a keeper of the page at this path.
pub const KEEPER_ENV: &str = "PEER_BENCH_KEEPER";
/// Be a reader, for this many ms of window.
pub const READER_ENV: &str = "PEER_BENCH_KEEPER_READER";

/// One count of readers, with and without the page.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub processes: usize,
    /// The readers' CPU, all of them, ms a second, each keeping its own clock.
    pub own_cpu_ms: f64,
    /// The same with the page.
    pub page_cpu_ms: f64,
    /// The keeper's CPU, ms a second, while they read the page.
    pub keeper_cpu_ms: f64,
    /// The keeper's wakeups a second.
    pub keeper_wakeups: f64,
    /// Readers that read the page from their first read to their last.
    pub on_page: usize,
    /// The median `now()` of the readers, ns, each way.
    pub own_now_ns: f64,
    pub page_now_ns: f64,
}

/// What the section measured.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub rows: Vec<Row>,
    /// The first `now()` of a fresh process that reads the page, median ns.
    pub first_now_ns: Option<u64>,
    /// A fresh process's first 50 ms with the page.
    pub fresh: Option<crate::fresh::Outcome>,
}

/// Elsewhere than Linux on x86_64 the section says so.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub fn run(_quick: bool, _fresh_processes: u64) -> Option<Outcome> {
    eprintln!("keeper: the page is Linux's, read with the TSC: skipped");
    None
}

/// Elsewhere than Linux on x86_64 there is no keeper to be.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub fn keeper_child(_: &str) -> ! {
    eprintln!("keeper: the page is Linux's, read with the TSC");
    std::process::exit(2)
}

/// The reader child: what one `now()` costs it (the median of rounds), then
/// reads once a millisecond over `window_ms` and prints its CPU over it,
/// and whether its time came from the page.
pub fn reader_child(window_ms: &str) -> ! {
    let window = Duration::from_millis(window_ms.parse().unwrap_or(1000));
    let mut rounds: Vec<f64> = (0..21)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..10_000 {
                black_box(timehands::now());
            }
            start.elapsed().as_nanos() as f64 / 10_000.0
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    let before = process_cpu_ns();
    let start = Instant::now();
    while start.elapsed() < window {
        black_box(timehands::now());
        std::thread::sleep(Duration::from_millis(1));
    }
    let cpu_ms = (process_cpu_ns() - before) as f64 / 1e6 / start.elapsed().as_secs_f64();
    let from = timehands::info().keeper;
    let on_page = from.starts_with("the keeper's page");
    if !on_page {
        eprintln!("keeper: a reader's time came from {from}");
    }
    println!(
        "cpu_ms={cpu_ms:.4} now_ns={:.2} on_page={}",
        rounds[rounds.len() / 2],
        u8::from(on_page)
    );
    std::process::exit(0)
}

/// The CPU of all this process's threads so far, ns.
fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| {
            std::fs::read_to_string(task.path().join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The section's table.
pub fn print(outcome: &Outcome) {
    println!("one keeper for the machine: readers of now() once a millisecond, a process each");
    println!(
        "  {:>9} | {:>13} {:>13} | {:>12} {:>15} | {:>8} | {:>9} {:>9}",
        "processes",
        "own CPU ms/s",
        "page CPU ms/s",
        "keeper ms/s",
        "keeper wakeups",
        "on page",
        "own now",
        "page now"
    );
    for row in &outcome.rows {
        println!(
            "  {:>9} | {:>13.3} {:>13.3} | {:>12.3} {:>15.1} | {:>8} | {:>7.2}ns {:>7.2}ns",
            row.processes,
            row.own_cpu_ms,
            row.page_cpu_ms,
            row.keeper_cpu_ms,
            row.keeper_wakeups,
            format!("{}/{}", row.on_page, row.processes),
            row.own_now_ns,
            row.page_now_ns
        );
    }
    if let Some(ns) = outcome.first_now_ns {
        println!(
            "  first now() of a fresh process that reads the page: {:.1} µs (median)",
            ns as f64 / 1e3
        );
    }
    if let Some(fresh) = &outcome.fresh {
        println!(
            "  {} fresh processes on the page, {} reads of their first 50 ms: {} more than 100 ns outside CLOCK_MONOTONIC's bracket (the farthest {} ns)",
            fresh.processes, fresh.reads, fresh.reads_off, fresh.worst_ns
        );
    }
}
