//! How late a 1 ms hard periodic timer fires while other threads arm and
//! cancel timers as fast as they can: hard ones (whose requests reach the
//! hard thread's queue, the priority inversion this service must not
//! have), then soft ones (another queue, another lock: the baseline).
//! Prints each run's lateness and the ratio of the maxima, and, on Linux and
//! Android, the time the hypervisor took the machine's CPUs away during each
//! run (steal time from /proc/stat, summed over the CPUs): a round during
//! such a stall is late whichever kind of timer it arms.
//!
//! ```text
//! cargo run --release -p timehands-timer --example arming -- [THREADS] [TIMERS] [ROUNDS]
//! ```
//!
//! Defaults: 4 threads, 1 500 000 timers each, 5 rounds (soft then hard,
//! alternating, so that a noisy spell of a shared machine falls on both).

use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use timehands_timer::TimerService;

/// The CPUs' steal time so far, in milliseconds (`None` where /proc/stat
/// does not say).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn steal_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let steal: u64 = stat
        .lines()
        .next()?
        .split_whitespace()
        .nth(8)?
        .parse()
        .ok()?;
    // SAFETY: sysconf takes no pointer and has no precondition (a name it
    // does not know gives -1).
    let ticks_per_s = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    Some(steal * 1000 / ticks_per_s.max(1))
}

/// Steal time is /proc/stat's, Linux's and Android's.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn steal_ms() -> Option<u64> {
    None
}

/// The 1 ms timer's lateness while `threads` threads each arm and cancel
/// `timers` timers, hard or soft; and how long the arming took.
fn run(hard: bool, threads: usize, timers: usize) -> (Histogram<u64>, Duration) {
    let service = Arc::new(TimerService::new().expect("a timer service"));
    let start = timehands::now() + Duration::from_millis(10);
    let tick = service
        .hard_periodic(start, Duration::from_millis(1), |_| {})
        .expect("a 1 ms period");
    timehands_timer::sleep_until(start);
    let began = timehands::now();
    let armers: Vec<_> = (0..threads)
        .map(|_| {
            let service = Arc::clone(&service);
            std::thread::spawn(move || {
                for _ in 0..timers {
                    let deadline = timehands::now() + Duration::from_millis(10);
                    let timer = if hard {
                        service.hard_at(deadline, |_| {})
                    } else {
                        service.soft_at(deadline, Duration::ZERO, |_| {})
                    };
                    timer.cancel();
                }
            })
        })
        .collect();
    for armer in armers {
        armer.join().expect("an arming thread");
    }
    let took = timehands::now() - began;
    tick.cancel();
    (service.hard_lateness(), took)
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let mut arg = |default: usize, name: &str| {
        args.next()
            .unwrap_or(Ok(default))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let (threads, timers, rounds) = (
        arg(4, "THREADS"),
        arg(1_500_000, "TIMERS"),
        arg(5, "ROUNDS"),
    );
    let scheduling = TimerService::new()
        .expect("a timer service")
        .scheduling()
        .clone();
    println!(
        "1 ms hard periodic timer; {threads} threads each arm and cancel {timers} timers; \
         {rounds} rounds of soft then hard"
    );
    println!("hard thread: {scheduling}");
    println!(
        "{:<14} {:>9} {:>10} {:>10} {:>10} {:>12} {:>9}",
        "arming", "expiries", "p50 µs", "p99 µs", "max µs", "arm+cancel/s", "steal ms"
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    // Each kind's maxima, round by round.
    let mut maxima = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (hard, name) in [(false, "soft timers"), (true, "hard timers")] {
            let steal_before = steal_ms();
            let (lateness, took) = run(hard, threads, timers);
            let steal = match (steal_before, steal_ms()) {
                (Some(before), Some(after)) => after.saturating_sub(before).to_string(),
                _ => "-".to_string(),
            };
            println!(
                "{:<14} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>12.0} {:>9}",
                name,
                lateness.len(),
                us(lateness.value_at_quantile(0.5)),
                us(lateness.value_at_quantile(0.99)),
                us(lateness.max()),
                (threads * timers) as f64 / took.as_secs_f64(),
                steal
            );
            maxima[usize::from(hard)].push(lateness.max());
        }
    }
    for kind in &mut maxima {
        kind.sort_unstable();
    }
    let [soft, hard] = &maxima;
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    let median = |v: &[u64]| v[v.len() / 2];
    println!(
        "max lateness arming hard / arming soft: worst {:.0} / {:.0} µs = {:.2}x, median {:.0} / {:.0} µs = {:.2}x (target <= 3x)",
        us(hard[hard.len() - 1]),
        us(soft[soft.len() - 1]),
        ratio(hard[hard.len() - 1], soft[soft.len() - 1]),
        us(median(hard)),
        us(median(soft)),
        ratio(median(hard), median(soft)),
    );
}
