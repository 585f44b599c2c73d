//! How late a 1 ms hard periodic timer fires while other threads arm and
//! cancel timers as fast as they can: hard ones (whose requests reach the
//! hard thread's queue, the priority inversion this service must not
//! have), then soft ones (another queue, whose requests the soft workers
//! apply: the baseline). Prints each run's lateness, the ratios of the
//! p99s and of the maxima, and, on Linux and Android, the time the
//! hypervisor took the machine's CPUs away during each run (the service's
//! `statistics().steal`): a round during such a stall is late whichever
//! kind of timer it arms. Beside the arming rate, which on a shared
//! machine follows the CPU the other processes leave, it prints the arming
//! threads' own CPU time per arm+cancel (where the OS tells), which does
//! not.
//!
//! ```text
//! cargo run --release -p timehands-timer --example arming -- [THREADS] [TIMERS] [ROUNDS]
//! ```
//!
//! Defaults: 4 threads, 1 500 000 timers each, 5 rounds (soft then hard,
//! alternating, so that a noisy spell of a shared machine falls on both).
//!
//! The targets: the median round's hard p99 within 1.5x of the median soft
//! one, and the worst hard round within 3x of the worst soft one where no
//! round saw steal time. A target missed makes the example exit non-zero.

use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use timehands_timer::TimerService;

/// The 1 ms timer's lateness while `threads` threads each arm and cancel
/// `timers` timers, hard or soft; how long the arming took, the arming
/// threads' CPU time, and the machine's steal time meanwhile, where the OS
/// says.
fn run(hard: bool, threads: usize, timers: usize) -> Run {
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
                thread_cpu()
            })
        })
        .collect();
    let cpu: Option<Duration> = armers
        .into_iter()
        .map(|armer| armer.join().expect("an arming thread"))
        .sum();
    let took = timehands::now() - began;
    tick.cancel();
    Run {
        lateness: service.hard_lateness(),
        took,
        cpu,
        steal: service.statistics().steal,
    }
}

/// What [`run`] measured.
struct Run {
    lateness: Histogram<u64>,
    took: Duration,
    cpu: Option<Duration>,
    steal: Option<Duration>,
}

/// The calling thread's CPU time, where the OS tells.
fn thread_cpu() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec to write.
        let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        (read == 0).then(|| Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
    }
    #[cfg(not(unix))]
    None
}

fn main() {
    let mut args = std::env::args().skip(1);
    // Each a count of at least 1 (a run of none has nothing to compare),
    // and all the timers armed fit a u32.
    let mut arg = |default: u32, name: &str| -> usize {
        let text = args.next().unwrap_or_else(|| default.to_string());
        match text.parse::<u32>() {
            Ok(count) if count > 0 => count as usize,
            _ => {
                eprintln!(
                    "arming: {name} {text:?} is not a count from 1 to {}: give THREADS TIMERS ROUNDS, as 4 1500000 5",
                    u32::MAX
                );
                std::process::exit(2)
            }
        }
    };
    let (threads, timers, rounds) = (
        arg(4, "THREADS"),
        arg(1_500_000, "TIMERS"),
        arg(5, "ROUNDS"),
    );
    let armed = threads as f64 * timers as f64;
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
        "{:<14} {:>9} {:>10} {:>10} {:>10} {:>12} {:>13} {:>9}",
        "arming",
        "expiries",
        "p50 µs",
        "p99 µs",
        "max µs",
        "arm+cancel/s",
        "caller CPU ns",
        "steal ms"
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    // Each kind's p99s and maxima, round by round.
    let mut p99s = [Vec::new(), Vec::new()];
    let mut maxima = [Vec::new(), Vec::new()];
    let mut stolen = false;
    for _ in 0..rounds {
        for (hard, name) in [(false, "soft timers"), (true, "hard timers")] {
            let Run {
                lateness,
                took,
                cpu,
                steal,
            } = run(hard, threads, timers);
            stolen |= steal.is_some_and(|steal| !steal.is_zero());
            let steal = steal.map_or("-".to_string(), |steal| steal.as_millis().to_string());
            let per_op = cpu.map_or("-".to_string(), |cpu| {
                format!("{:.0}", cpu.as_nanos() as f64 / armed)
            });
            println!(
                "{:<14} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>12.0} {:>13} {:>9}",
                name,
                lateness.len(),
                us(lateness.value_at_quantile(0.5)),
                us(lateness.value_at_quantile(0.99)),
                us(lateness.max()),
                armed / took.as_secs_f64(),
                per_op,
                steal
            );
            p99s[usize::from(hard)].push(lateness.value_at_quantile(0.99));
            maxima[usize::from(hard)].push(lateness.max());
        }
    }
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    let mut missed = Vec::new();
    let median = |v: &[u64]| v[v.len() / 2];
    let worst = |v: &[u64]| v[v.len() - 1];
    // The p99 is judged on the median round, the max on the worst, where
    // no round saw steal time.
    for (what, mut figures, judged_on, target, judged) in [
        ("p99", p99s, median as fn(&[u64]) -> u64, 1.5, true),
        ("max", maxima, worst, 3.0, !stolen),
    ] {
        for kind in &mut figures {
            kind.sort_unstable();
        }
        let [soft, hard] = &figures;
        let ratio_judged = ratio(judged_on(hard), judged_on(soft));
        let verdict = if !judged {
            "not judged: a round saw steal time"
        } else if ratio_judged <= target {
            "met"
        } else {
            missed.push(what);
            "missed"
        };
        println!(
            "{what} lateness arming hard / arming soft: worst {:.0} / {:.0} µs = {:.2}x, median {:.0} / {:.0} µs = {:.2}x (target <= {target}x: {verdict})",
            us(worst(hard)),
            us(worst(soft)),
            ratio(worst(hard), worst(soft)),
            us(median(hard)),
            us(median(soft)),
            ratio(median(hard), median(soft)),
        );
    }
    if !missed.is_empty() {
        eprintln!("arming: missed the {} target", missed.join(" and the "));
        std::process::exit(1)
    }
}
