//! The coarse clock while the scheduler is at its worst for the thread that
//! keeps it: SCHED_FIFO readers spinning on every CPU (where the process
//! may take SCHED_FIFO), and a normal reader beside eight busy threads.
//! Every coarse read, bracketed by CLOCK_MONOTONIC, lags no more than
//! `getres(MonotonicCoarse)` states (unless the machine holds the kernel's
//! own coarse clock up further), and is never ahead of `now()` read after
//! it; the worst lag is printed beside CLOCK_MONOTONIC_COARSE's in
//! the same threads. (The coarse time fell 955 ms behind under the FIFO
//! spinners when a normal-priority thread kept it, and 12 ms behind, over
//! a stated 5, beside eight busy threads.)
//!
//! A test binary of its own: spinners on every CPU would starve the other
//! tests of a binary for seconds (cargo runs test binaries one at a time).
#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use timehands::sys::{self, KernelClock, Policy};
use timehands::{ClockId, getres, now, now_coarse};

/// The worst lags a reader saw: ours, and the kernel's coarse clock's.
#[derive(Clone, Copy, Debug, Default)]
struct Lags {
    ours: u64,
    kernel: u64,
}

fn monotonic() -> u64 {
    sys::kernel_nanos(KernelClock::Monotonic).expect("Monotonic")
}

/// Reads for `ns`: the coarse clocks against CLOCK_MONOTONIC read before
/// them; an error for a lag beyond the stated bound or a coarse read ahead
/// of `now()`.
fn read_for(ns: u64) -> Result<Lags, String> {
    let mut lags = Lags::default();
    let start = monotonic();
    loop {
        let bound = getres(ClockId::MonotonicCoarse).accuracy.as_nanos() as u64;
        let before = monotonic();
        if before - start > ns {
            return Ok(lags);
        }
        let ours = now_coarse().as_nanos();
        let kernel = sys::kernel_nanos(KernelClock::MonotonicCoarse).expect("coarse");
        let after = now().as_nanos();
        let lag = before.saturating_sub(ours);
        // Where the machine holds the kernel's own coarse clock up beyond
        // its two ticks (a stopped vCPU), a read that checks ours against
        // it lags as far: the bound holds as long as the kernel's does.
        let kernel_lag = before.saturating_sub(kernel);
        if lag > bound.max(kernel_lag + 50_000 + 1_000) {
            return Err(format!(
                "a coarse read {lag} ns behind, over the {bound} ns stated (CLOCK_MONOTONIC_COARSE {} ns)",
                before.saturating_sub(kernel)
            ));
        }
        if ours > after {
            return Err(format!("a coarse read {} ns ahead of now()", ours - after));
        }
        lags.ours = lags.ours.max(lag);
        lags.kernel = lags.kernel.max(before.saturating_sub(kernel));
    }
}

/// Runs `readers` reading for `ns` while `busy` threads spin, each reader
/// pinned to its CPU and made SCHED_FIFO if `fifo`: the worst lags of all,
/// or `None` where SCHED_FIFO is not allowed.
fn lags_under(readers: &[usize], fifo: bool, busy: usize, ns: u64) -> Option<Lags> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..busy {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let results: Vec<_> = readers
            .iter()
            .map(|&cpu| {
                s.spawn(move || {
                    sys::pin_to_cpu(cpu).expect("pinned to an allowed CPU");
                    if fifo {
                        sys::set_scheduling(Policy::Fifo, 50).ok()?;
                    }
                    Some(read_for(ns))
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|reader| reader.join().expect("a reader"))
            .collect();
        stop.store(true, Ordering::Relaxed);
        let mut worst = Lags::default();
        for result in results {
            let lags = result?.unwrap_or_else(|e| panic!("{e}"));
            worst.ours = worst.ours.max(lags.ours);
            worst.kernel = worst.kernel.max(lags.kernel);
        }
        Some(worst)
    })
}

#[test]
#[cfg_attr(
    miri,
    ignore = "real threads at real-time priorities against the kernel's clocks"
)]
fn the_coarse_clock_keeps_its_bound_under_real_time_spinners_and_busy_threads() {
    let cpus = sys::allowed_cpus().expect("the CPUs");
    // The clock and its thread run before the load comes.
    now_coarse();
    std::thread::sleep(Duration::from_millis(20));
    match lags_under(&cpus, true, 0, 2_000_000_000) {
        Some(lags) => println!(
            "SCHED_FIFO readers on {} CPUs: now_coarse() at most {:.2} ms behind, CLOCK_MONOTONIC_COARSE {:.2} ms",
            cpus.len(),
            lags.ours as f64 / 1e6,
            lags.kernel as f64 / 1e6
        ),
        None => println!("skipped the SCHED_FIFO readers: not allowed here"),
    }
    let lags = lags_under(&cpus[..1], false, 8, 2_000_000_000).expect("a normal reader");
    println!(
        "a reader beside 8 busy threads: now_coarse() at most {:.2} ms behind, CLOCK_MONOTONIC_COARSE {:.2} ms; stated {:?}",
        lags.ours as f64 / 1e6,
        lags.kernel as f64 / 1e6,
        getres(ClockId::MonotonicCoarse).accuracy
    );
}
