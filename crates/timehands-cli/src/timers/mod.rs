//! `timehands timers`: how late a hard timer fires under a storm of soft
//! timers, with the timehands timer service and with one naive queue.
//!
//! Timer expiries stacking in front of a real-time thread, one level up.
//! A hard timer fires every `--interval` while M soft timers, each
//! periodic with a random period between half of `--window` and
//! `--window` and each expiry doing `--work` ns of busy work,
//! keep expiring. Three setups run one after another in the same process:
//!
//! 1. the service with the hard timer alone (the unloaded figure);
//! 2. the service with the M soft timers: hard timers on their own thread
//!    (SCHED_FIFO when allowed), soft ones in the wheel on another;
//! 3. a naive queue: every timer in one `BinaryHeap`, expired in deadline
//!    order by one thread at the same priority, so the hard timer waits
//!    behind every soft expiry due just before it (the stacking).
//!
//! Lateness is the time from a hard timer's deadline to its handler's start,
//! on timehands' clock; each setup prints its p50, p99 and max.
//!
//! With the soft timers, the service's window also shows what its soft
//! side promises: how many soft expiries came out beyond their bound
//! (deadline + slack + one tick) in the window's first half, split by
//! cause (the workers busy with callbacks since before the bound, or still
//! waiting for their alarm after it: the machine stalled) beside the
//! machine's steal time; and, in its second half, what arming a pile of M
//! more soft timers at once costs the arming thread and the soft timers
//! due while it goes in. A target printed as missed makes the command exit
//! non-zero, naming it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use rand::Rng;
use timehands::Instant;
use timehands_timer::periodic::forward;
use timehands_timer::{Builder, Scheduling, SideStatistics, sched, sleep_until};

use pile::{Pile, pile};
use report::Report;

mod pile;
mod report;

/// Flags of `timehands timers`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  timehands timers                      100000 soft timers, 2 s per setup
  timehands timers -m 10000 -D 5        fewer soft timers, longer runs
  timehands timers --work 1000 --json   lighter soft handlers, as JSON

Exit status: 0 when every target it prints is met; 1 with one line naming
the targets missed (or an error that stopped the run).")]
pub struct Args {
    /// Soft timers in the storm.
    #[arg(short = 'm', long = "soft", default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(0..=2_000_000))]
    pub soft: u32,
    /// Period of the hard timer, in microseconds.
    #[arg(short, long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=10_000_000))]
    pub interval: u64,
    /// Seconds each of the three setups runs.
    #[arg(
        short = 'D',
        long,
        default_value_t = 2.0,
        allow_negative_numbers = true
    )]
    pub duration: f64,
    /// Soft timers' periods are random between half this and this, in ms.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(2..=3_600_000))]
    pub window: u64,
    /// Slack of the soft timers, in microseconds (the naive queue has none).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=60_000_000))]
    pub slack: u64,
    /// Busy work of each soft expiry, in nanoseconds (a retry's send, a
    /// cache eviction).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub work: u64,
    /// Threads of the service that expire soft timers.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub soft_workers: u64,
    /// The service's soft tick is 2^this ns (20: about 1 ms); a soft timer
    /// may fire up to a tick after its deadline and slack.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(10..=40))]
    pub soft_tick_shift: u32,
    /// SCHED_FIFO priority of the hard timer's thread and of the naive
    /// queue's thread (0: do not ask).
    #[arg(short, long, default_value_t = 50, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub priority: i32,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The storm, checked.
struct Storm {
    soft: usize,
    interval_ns: u64,
    run: Duration,
    window_ns: u64,
    slack: Duration,
    work: Duration,
    soft_workers: usize,
    soft_tick_shift: u32,
    priority: Option<i32>,
}

impl Storm {
    fn from_args(args: &Args) -> anyhow::Result<Storm> {
        // The integer flags' ranges are checked by clap as they are parsed.
        if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= 3600.0) {
            bail!(
                "--duration {}: must be more than 0 and at most 3600 s",
                args.duration
            );
        }
        Ok(Storm {
            soft: args.soft as usize,
            interval_ns: args.interval * 1000,
            run: Duration::from_secs_f64(args.duration),
            window_ns: args.window * 1_000_000,
            slack: Duration::from_micros(args.slack),
            work: Duration::from_nanos(args.work),
            soft_workers: args.soft_workers as usize,
            soft_tick_shift: args.soft_tick_shift,
            priority: (args.priority > 0).then_some(args.priority),
        })
    }

    /// When a soft timer due at `due` is past its bound (deadline + slack
    /// + one tick), with a tick to spare.
    fn past_bound(&self, due: Instant) -> Instant {
        due + self.slack + self.soft_tick() * 2
    }

    /// The service's soft tick.
    fn soft_tick(&self) -> Duration {
        Duration::from_nanos(1 << self.soft_tick_shift)
    }

    /// When the measured window starts if `armed` timers are armed from
    /// `now`: after 10 ms, and the arming allowance for each.
    fn start(&self, now: Instant, armed: usize) -> Instant {
        let armed = u32::try_from(armed).unwrap_or(u32::MAX);
        now + Duration::from_millis(10) + ARMING_ALLOWANCE_PER_TIMER * armed
    }

    /// Each soft timer's (first deadline, period) from `start`: periods
    /// uniform in [window/2, window], first expiry uniform in one period.
    fn soft_timers(&self, start: Instant) -> Vec<(Instant, Duration)> {
        let mut rng = rand::rng();
        (0..self.soft)
            .map(|_| {
                let period = rng.random_range(self.window_ns / 2..=self.window_ns);
                let first = rng.random_range(1..=period);
                (
                    start + Duration::from_nanos(first),
                    Duration::from_nanos(period),
                )
            })
            .collect()
    }
}

/// What one setup measured.
struct Measured {
    /// The hard timer's lateness, in ns.
    hard: Histogram<u64>,
    /// Hard expiries skipped because the previous one was handled more than
    /// a period late.
    missed: u64,
    /// The soft timers' counts over the window (the naive queue counts
    /// only its expiries).
    soft: SideStatistics,
    /// The same over its steady part: the first half where a pile comes
    /// in the second.
    steady: SideStatistics,
    /// The machine's steal time over the window, where the OS says.
    steal: Option<Duration>,
    /// How long arming the soft timers through the service took, and how
    /// far it ran past their first deadlines (zero when it ended before
    /// them, as it should); `None` where none were armed through it.
    arming: Option<(Duration, Duration)>,
    /// The pile armed in the middle of the window, where a storm of soft
    /// timers was armed through the service.
    pile: Option<Pile>,
    scheduling: Scheduling,
}

/// Nanoseconds up to a minute at 3 significant digits; later is recorded
/// as a minute.
fn lateness_histogram() -> Histogram<u64> {
    Histogram::new_with_max(60_000_000_000, 3).expect("valid histogram bounds")
}

/// Busy work until `work` has passed on timehands' clock.
fn spin(work: Duration) {
    let until = timehands::now() + work;
    while timehands::now() < until {
        std::hint::spin_loop();
    }
}

fn progress(what: &str, storm: &Storm) {
    if std::io::stderr().is_terminal() {
        eprintln!("timers: {what} for {:.1} s", storm.run.as_secs_f64());
    }
}

/// Time allowed for arming each soft timer before the first of them comes
/// due (some 0.5 µs each on a 2-vCPU AMD EPYC guest, so 4x that).
const ARMING_ALLOWANCE_PER_TIMER: Duration = Duration::from_micros(2);

/// Setups 1 and 2: the service, with `soft` soft timers armed.
///
/// The storm's arming is kept out of the measured window, for the soft
/// timers as for the hard one, so that the window shows the steady state:
/// the soft timers' first deadlines start after an allowance for arming
/// them, the hard timer starts then too, and the soft counts are taken over
/// the window alone. What arming a pile costs is measured on its own, in
/// the middle of the window (see [`pile()`]).
fn service(storm: &Storm, soft: bool) -> anyhow::Result<Measured> {
    let service = Builder::new()
        .realtime_priority(storm.priority)
        .soft_workers(storm.soft_workers)
        .soft_tick_shift(storm.soft_tick_shift)
        .build()
        .context("starting the timer service")?;
    let arming_from = timehands::now();
    let start = storm.start(arming_from, if soft { storm.soft } else { 0 });
    if soft {
        for (first, period) in storm.soft_timers(start) {
            let work = storm.work;
            service
                .soft_periodic(first, period, storm.slack, move |_| spin(work))
                .context("arming a soft timer")?;
        }
    }
    let armed = timehands::now();
    let missed = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&missed);
    service
        .hard_periodic(start, Duration::from_nanos(storm.interval_ns), move |e| {
            counted.fetch_add(e.overruns, Ordering::Relaxed);
        })
        .context("arming the hard timer")?;
    sleep_until(start);
    let before = service.statistics();
    let end = start + storm.run;
    // The steady state in the first half; the pile and its control in the
    // second (a storm of no soft timers has no pile either).
    let (steady, pile) = if soft {
        sleep_until(start + storm.run / 2);
        let mid = service.statistics();
        let pile = (storm.soft > 0).then(|| pile(&service, storm, end));
        sleep_until(end);
        (mid, pile)
    } else {
        sleep_until(end);
        (service.statistics(), None)
    };
    let after = service.statistics();
    Ok(Measured {
        hard: service.hard_lateness(),
        missed: missed.load(Ordering::Relaxed),
        soft: since(&before.soft, &after.soft),
        steady: since(&before.soft, &steady.soft),
        steal: after
            .steal
            .zip(before.steal)
            .map(|(a, b)| a.saturating_sub(b)),
        arming: soft.then(|| (armed - arming_from, armed.duration_since(start))),
        pile,
        scheduling: service.scheduling().clone(),
    })
}

/// The soft counts from `before` to `after`.
fn since(before: &SideStatistics, after: &SideStatistics) -> SideStatistics {
    SideStatistics {
        fired: after.fired - before.fired,
        beyond_bound: after.beyond_bound - before.beyond_bound,
        beyond_bound_behind_callbacks: after.beyond_bound_behind_callbacks
            - before.beyond_bound_behind_callbacks,
        beyond_bound_stalled: after.beyond_bound_stalled - before.beyond_bound_stalled,
        waited_for_cpu: after.waited_for_cpu.saturating_sub(before.waited_for_cpu),
        ..SideStatistics::default()
    }
}

/// Setup 3: every timer in one heap, one thread. Entry 0 is the hard timer.
fn naive(storm: &Storm) -> anyhow::Result<Measured> {
    let mut periods = vec![storm.interval_ns];
    let mut heap = BinaryHeap::with_capacity(storm.soft + 1);
    // As for the service: the soft timers start with the hard one.
    let start = storm.start(timehands::now(), storm.soft);
    for (id, (first, period)) in storm.soft_timers(start).into_iter().enumerate() {
        periods.push(period.as_nanos() as u64);
        heap.push(Reverse((first.as_nanos(), id + 1)));
    }
    let end = (start + storm.run).as_nanos();
    heap.push(Reverse((start.as_nanos(), 0)));
    let soft_expiries = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&soft_expiries);
    let (priority, work) = (storm.priority, storm.work);
    let queue = std::thread::Builder::new()
        .name("naive-queue".into())
        .spawn(move || {
            let scheduling = sched::precise_thread(priority);
            let mut hard = lateness_histogram();
            let mut missed = 0;
            while let Some(&Reverse((deadline, id))) = heap.peek() {
                let now = timehands::now().as_nanos();
                if now >= end {
                    break;
                }
                if deadline > now {
                    sleep_until(Instant::from_nanos(deadline.min(end)));
                    continue;
                }
                heap.pop();
                if id == 0 {
                    hard.saturating_record(now - deadline);
                } else {
                    spin(work);
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                let (next, skipped) = forward(deadline, now, periods[id]);
                if id == 0 {
                    missed += skipped;
                }
                heap.push(Reverse((next, id)));
            }
            (hard, missed, scheduling)
        })
        .context("starting the naive queue's thread")?;
    let (hard, missed, scheduling) = queue
        .join()
        .map_err(|_| anyhow::anyhow!("the naive queue's thread panicked"))?;
    let soft = SideStatistics {
        fired: soft_expiries.load(Ordering::Relaxed),
        ..SideStatistics::default()
    };
    Ok(Measured {
        hard,
        missed,
        steady: soft.clone(),
        soft,
        steal: None,
        arming: None,
        pile: None,
        scheduling,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio(a: u64, b: u64) -> f64 {
    a as f64 / b.max(1) as f64
}

/// Runs `timehands timers`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let storm = Storm::from_args(args)?;
    let m = storm.soft;
    progress("service, no soft timers", &storm);
    let unloaded = service(&storm, false)?;
    progress(&format!("service, {m} soft timers"), &storm);
    let loaded = service(&storm, true)?;
    progress(&format!("naive queue, {m} soft timers"), &storm);
    let stacked = naive(&storm)?;
    let report = Report::new(args, &storm, [&unloaded, &loaded, &stacked]);
    crate::output::print_json_or_text(args.json, &report, report::text)?;
    if report.missed.is_empty() {
        Ok(())
    } else {
        bail!("missed {}", report.missed.join("; "))
    }
}
