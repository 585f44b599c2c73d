//! `timehands timers`: how late a hard timer fires under a storm of soft
//! timers, with the timehands timer service and with one naive queue.
//!
//! Timer expiries stacking in front of a real-time thread, one level up. A hard timer fires every `--interval`
//! while M soft timers, each periodic with a random period between half of
//! `--window` and `--window` and each expiry doing `--work` ns of busy work,
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use rand::Rng;
use serde::Serialize;
use timehands::Instant;
use timehands_timer::periodic::forward;
use timehands_timer::{Builder, Scheduling, SideStatistics, TimerService, sched, sleep_until};

/// Flags of `timehands timers`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  timehands timers                      100000 soft timers, 2 s per setup
  timehands timers -m 10000 -D 5        fewer soft timers, longer runs
  timehands timers --work 1000 --json   lighter soft handlers, as JSON")]
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

    /// The soft counts of `service` since `before`, over a spell from
    /// `began` to `ended`, taken once a timer due at `ended` would be past
    /// its bound (or at the window's `end`, if sooner).
    fn spell(
        &self,
        service: &TimerService,
        before: &SideStatistics,
        began: Instant,
        ended: Instant,
        end: Instant,
    ) -> Spell {
        let counted = (ended + self.slack + self.soft_tick() * 2).min(end);
        sleep_until(counted);
        let soft = since(before, &service.statistics().soft);
        Spell {
            span_ms: ms(counted.duration_since(began)),
            soft_expiries: soft.fired,
            soft_beyond_bound: soft.beyond_bound,
            soft_beyond_bound_behind_callbacks: soft.beyond_bound_behind_callbacks,
            soft_beyond_bound_stalled: soft.beyond_bound_stalled,
            soft_workers_waited_for_cpu_ms: ms(soft.waited_for_cpu),
        }
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

/// One setup's figures, as JSON names them.
#[derive(Serialize)]
struct Setup {
    name: String,
    hard_expiries: u64,
    hard_missed: u64,
    p50_ns: u64,
    p99_ns: u64,
    max_ns: u64,
    soft_expiries: u64,
    /// Soft expiries in the window's steady part (its first half where a
    /// pile comes in the second), and of those, the ones after deadline +
    /// slack + one soft tick (the service's bound; 0 for the naive queue,
    /// which promises none), the ones whose worker was busy with callbacks
    /// since before the bound, and the ones whose worker was still waiting
    /// after it.
    steady_soft_expiries: u64,
    soft_beyond_bound: u64,
    soft_beyond_bound_behind_callbacks: u64,
    soft_beyond_bound_stalled: u64,
    /// How long the soft workers waited for a CPU while they could run
    /// (Linux, Android; 0 elsewhere and for the naive queue).
    soft_workers_waited_for_cpu_ms: f64,
    /// The machine's steal time during the window, where the OS says (not
    /// for the naive queue).
    steal_ms: Option<f64>,
}

impl Setup {
    fn new(name: String, m: &Measured) -> Setup {
        let hard = &m.hard;
        Setup {
            name,
            hard_expiries: hard.len(),
            hard_missed: m.missed,
            p50_ns: hard.value_at_quantile(0.5),
            p99_ns: hard.value_at_quantile(0.99),
            max_ns: hard.max(),
            soft_expiries: m.soft.fired,
            steady_soft_expiries: m.steady.fired,
            soft_beyond_bound: m.steady.beyond_bound,
            soft_beyond_bound_behind_callbacks: m.steady.beyond_bound_behind_callbacks,
            soft_beyond_bound_stalled: m.steady.beyond_bound_stalled,
            soft_workers_waited_for_cpu_ms: ms(m.steady.waited_for_cpu),
            steal_ms: m.steal.map(ms),
        }
    }
}

/// A pile of soft timers armed at once in the middle of the window, as
/// JSON names it.
#[derive(Clone, Copy, Default, Serialize)]
struct Pile {
    timers: usize,
    /// How long the arming thread took to arm them.
    arming_ms: f64,
    /// From the first arm until the workers had them all (a timer armed
    /// after the pile, due at once, fired); `None` if that was not before
    /// the window's end.
    applied_ms: Option<f64>,
    /// The soft timers due from the first arm until the workers had the
    /// pile, counted until the last of them is past its bound.
    spell: Spell,
    /// The control: the same counts over a spell as long as the pile's
    /// (from the first arm to the pile in the wheel) in which the arming
    /// thread only spins, taking a CPU as arming did, later in the window;
    /// `None` if the window ended first.
    busy: Option<Spell>,
}

/// The soft timers' counts over a spell of the window, as JSON names them.
#[derive(Clone, Copy, Default, Serialize)]
struct Spell {
    /// From the spell's start until a timer due at its end is past its
    /// bound.
    span_ms: f64,
    /// Soft expiries in that span, those beyond their bound and why, and
    /// how long the soft workers waited for a CPU.
    soft_expiries: u64,
    soft_beyond_bound: u64,
    soft_beyond_bound_behind_callbacks: u64,
    soft_beyond_bound_stalled: u64,
    soft_workers_waited_for_cpu_ms: f64,
}

/// Ratios between setups, as JSON names them.
#[derive(Serialize)]
struct Ratios {
    naive_over_service_p50: f64,
    naive_over_service_p99: f64,
    naive_over_service_max: f64,
    loaded_over_unloaded_p99: f64,
}

/// The whole report, as JSON names it.
#[derive(Serialize)]
struct Report {
    soft_timers: usize,
    interval_us: u64,
    duration_s: f64,
    window_ms: u64,
    slack_us: u64,
    work_ns: u64,
    soft_workers: usize,
    /// The service's soft tick.
    soft_tick_us: f64,
    /// How long the service took to arm the soft timers, and how far that
    /// ran past their first deadlines (0 when it ended before them).
    soft_arming_ms: f64,
    soft_arming_overran_ms: f64,
    /// The pile armed in the middle of the loaded window.
    pile: Pile,
    hard_scheduling: String,
    naive_scheduling: String,
    setups: [Setup; 3],
    ratios: Ratios,
    /// The targets missed, by name (the command then exits non-zero).
    missed: Vec<String>,
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
    /// The pile armed in the middle of the window, where soft timers were
    /// armed through the service.
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

/// The most soft expiries beyond their bound in the steady state, in
/// percent, on a quiet machine.
const SOFT_BEYOND_TARGET_PERCENT: f64 = 0.1;

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
/// the middle of the window (see [`pile`]).
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
    // The steady state in the first half; the pile and what it leaves
    // behind in the second.
    let (steady, pile) = if soft {
        sleep_until(start + storm.run / 2);
        let mid = service.statistics();
        let pile = pile(&service, storm, end);
        sleep_until(end);
        (mid, Some(pile))
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

/// Arms a pile of as many one-shot soft timers as the storm has, due after
/// the window (`end`), back to back from this thread, as a server arms a
/// timeout per connection after a reconnect storm: how long that takes,
/// how long until the workers have them all, and how the soft timers due
/// meanwhile fared. A due soft timer waits for no more than a batch of
/// requests, so it keeps its bound as long as the workers have the CPU its
/// callbacks need. Whether they had is what the control measures: a spell
/// as long, later in the window, in which this thread spins instead.
fn pile(service: &TimerService, storm: &Storm, end: Instant) -> Pile {
    let before = service.statistics().soft;
    let later = end + Duration::from_secs(1);
    let began = timehands::now();
    for _ in 0..storm.soft {
        service.soft_at(later, storm.slack, |_| {});
    }
    let armed = timehands::now();
    // Requests are applied oldest first: one armed after the pile and due
    // at once fires once the pile is in. It waits for the pile by design,
    // so it must not count as a timer the pile held up: a deadline `reach`
    // in the past and a slack of twice that file it in the past (due as
    // soon as it is in the wheel), and put its bound, which runs from when
    // it was armed, past the window's end.
    let reach = end.duration_since(armed) + storm.soft_tick();
    let deadline = Instant::from_nanos(armed.as_nanos().saturating_sub(reach.as_nanos() as u64));
    let (tx, rx) = mpsc::channel();
    service.soft_at(deadline, reach * 2, move |_| {
        let _ = tx.send(timehands::now());
    });
    // Not past the window's end, which the pile must not stretch.
    let applied = rx.recv_timeout(end.duration_since(timehands::now())).ok();
    let spell = storm.spell(
        service,
        &before,
        began,
        applied.unwrap_or(end).min(end),
        end,
    );
    let busy = applied.and_then(|applied| {
        let long = applied - began;
        let from = timehands::now() + storm.slack + storm.soft_tick() * 4;
        // The control, when the window has room for it.
        (from + long + storm.slack + storm.soft_tick() * 2 <= end).then(|| {
            sleep_until(from);
            let before = service.statistics().soft;
            spin(long);
            storm.spell(service, &before, from, from + long, end)
        })
    });
    Pile {
        timers: storm.soft,
        arming_ms: ms(armed - began),
        applied_ms: applied.map(|applied| ms(applied - began)),
        spell,
        busy,
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
    let arming = loaded.arming.unwrap_or_default();
    let setups = [
        Setup::new("service, no soft timers".into(), &unloaded),
        Setup::new(format!("service, {m} soft timers"), &loaded),
        Setup::new(format!("naive queue, {m} soft timers"), &stacked),
    ];
    let ratios = Ratios {
        naive_over_service_p50: ratio(setups[2].p50_ns, setups[1].p50_ns),
        naive_over_service_p99: ratio(setups[2].p99_ns, setups[1].p99_ns),
        naive_over_service_max: ratio(setups[2].max_ns, setups[1].max_ns),
        loaded_over_unloaded_p99: ratio(setups[1].p99_ns, setups[0].p99_ns),
    };
    let mut report = Report {
        soft_timers: m,
        interval_us: args.interval,
        duration_s: args.duration,
        window_ms: args.window,
        slack_us: args.slack,
        work_ns: args.work,
        soft_workers: storm.soft_workers,
        soft_tick_us: storm.soft_tick().as_nanos() as f64 / 1000.0,
        soft_arming_ms: ms(arming.0),
        soft_arming_overran_ms: ms(arming.1),
        pile: loaded.pile.unwrap_or_default(),
        hard_scheduling: unloaded.scheduling.to_string(),
        naive_scheduling: stacked.scheduling.to_string(),
        setups,
        ratios,
        missed: Vec::new(),
    };
    report.missed = report.targets().missed();
    crate::output::print_json_or_text(args.json, &report, text)?;
    if report.missed.is_empty() {
        Ok(())
    } else {
        bail!("missed {}", report.missed.join("; "))
    }
}

/// Whether each target the command prints was met.
struct Targets {
    /// Soft expiries beyond their bound in the steady part, at most
    /// [`SOFT_BEYOND_TARGET_PERCENT`].
    steady: bool,
    /// None of the soft timers due while the pile went in beyond its bound,
    /// the pile in the workers' wheel before the window's end.
    pile: bool,
    /// The hard p99 with soft timers within 1.2x of the one without.
    hard_p99: bool,
}

impl Targets {
    /// The names of the targets missed.
    fn missed(&self) -> Vec<String> {
        [
            (self.steady, "soft expiries beyond their bound"),
            (self.pile, "soft timers due while the pile went in"),
            (self.hard_p99, "hard p99 with / without soft timers"),
        ]
        .into_iter()
        .filter(|&(met, _)| !met)
        .map(|(_, name)| name.to_string())
        .collect()
    }
}

/// A spell's soft counts, as a line's part.
fn spell_text(spell: &Spell) -> String {
    format!(
        "(the {:.1} ms until the last was past its bound): {} fired, {} beyond the bound \
         ({} behind callbacks, {} stalled; the soft workers waited {:.1} ms for a CPU)",
        spell.span_ms,
        spell.soft_expiries,
        spell.soft_beyond_bound,
        spell.soft_beyond_bound_behind_callbacks,
        spell.soft_beyond_bound_stalled,
        spell.soft_workers_waited_for_cpu_ms
    )
}

/// The word a target's line ends with.
fn met(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

impl Report {
    /// The soft expiries beyond their bound in the steady part, in percent.
    fn steady_beyond_percent(&self) -> f64 {
        let loaded = &self.setups[1];
        100.0 * ratio(loaded.soft_beyond_bound, loaded.steady_soft_expiries)
    }

    fn targets(&self) -> Targets {
        let pile = &self.pile;
        Targets {
            steady: self.steady_beyond_percent() <= SOFT_BEYOND_TARGET_PERCENT,
            pile: pile.spell.soft_beyond_bound == 0 && pile.applied_ms.is_some(),
            hard_p99: self.ratios.loaded_over_unloaded_p99 <= 1.2,
        }
    }
}

/// The report as lines of text.
fn text(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "hard timer every {} µs; {} soft timers with periods of {}-{} ms, slack {} µs, {} ns of work each; {} s per setup",
        r.interval_us,
        r.soft_timers,
        r.window_ms / 2,
        r.window_ms,
        r.slack_us,
        r.work_ns,
        r.duration_s
    );
    let _ = writeln!(
        out,
        "service hard thread: {}; {} soft workers, soft tick {:.0} µs",
        r.hard_scheduling, r.soft_workers, r.soft_tick_us
    );
    let _ = writeln!(out, "naive queue thread:  {}", r.naive_scheduling);
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<32} {:>8} {:>7} {:>10} {:>10} {:>10} {:>12}",
        "hard-timer lateness", "expiries", "missed", "p50 µs", "p99 µs", "max µs", "soft fired"
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    for s in &r.setups {
        let _ = writeln!(
            out,
            "{:<32} {:>8} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>12}",
            s.name,
            s.hard_expiries,
            s.hard_missed,
            us(s.p50_ns),
            us(s.p99_ns),
            us(s.max_ns),
            s.soft_expiries
        );
    }
    let loaded = &r.setups[1];
    if r.soft_timers > 0 {
        let _ = writeln!(
            out,
            "service's soft timers armed in {:.1} ms, {}",
            r.soft_arming_ms,
            if r.soft_arming_overran_ms > 0.0 {
                format!(
                    "{:.1} ms past their first deadlines (those due meanwhile waited for arming)",
                    r.soft_arming_overran_ms
                )
            } else {
                "before their first deadlines".to_string()
            }
        );
    }
    let targets = r.targets();
    let _ = writeln!(
        out,
        "service's soft timers beyond deadline + slack + one tick{}: {} of {} ({:.3}%, \
         target <= {SOFT_BEYOND_TARGET_PERCENT}%: {}): \
         {} behind callbacks, {} stalled (a worker waiting for its alarm or a CPU); \
         the soft workers waited {:.0} ms for a CPU",
        if r.soft_timers > 0 {
            " in the window's first half"
        } else {
            ""
        },
        loaded.soft_beyond_bound,
        loaded.steady_soft_expiries,
        r.steady_beyond_percent(),
        met(targets.steady),
        loaded.soft_beyond_bound_behind_callbacks,
        loaded.soft_beyond_bound_stalled,
        loaded.soft_workers_waited_for_cpu_ms
    );
    let steal = |s: &Setup| s.steal_ms.map_or("-".to_string(), |ms| format!("{ms:.0}"));
    let _ = writeln!(
        out,
        "machine's steal time in the service's windows: {} ms without soft timers, {} ms with",
        steal(&r.setups[0]),
        steal(loaded)
    );
    if r.soft_timers > 0 {
        let p = &r.pile;
        let applied = p
            .applied_ms
            .map_or("not by the window's end".to_string(), |ms| {
                format!("{ms:.1} ms after the first")
            });
        let _ = writeln!(
            out,
            "a pile of {} more soft timers armed mid-window in {:.1} ms ({:.0} ns each), \
             all in the workers' wheel {applied}; soft timers due meanwhile {} (target 0 beyond: {})",
            p.timers,
            p.arming_ms,
            p.arming_ms * 1e6 / p.timers.max(1) as f64,
            spell_text(&p.spell),
            met(targets.pile),
        );
        let _ = writeln!(
            out,
            "the control, the arming thread spinning as long instead, later: soft timers due {}",
            p.busy
                .as_ref()
                .map_or("no room left in the window".to_string(), spell_text)
        );
    }
    out.push('\n');
    let x = &r.ratios;
    let _ = writeln!(
        out,
        "naive queue / service: p50 {:.2}x, p99 {:.2}x, max {:.2}x",
        x.naive_over_service_p50, x.naive_over_service_p99, x.naive_over_service_max
    );
    let _ = writeln!(
        out,
        "service with / without soft timers: p99 {:.2}x (target <= 1.2x: {})",
        x.loaded_over_unloaded_p99,
        met(targets.hard_p99)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::Targets;

    /// Each target missed is named, in the order the text prints them;
    /// none missed, none named (and the command exits zero).
    #[test]
    fn the_targets_missed_are_named() {
        let targets = |steady, pile, hard_p99| Targets {
            steady,
            pile,
            hard_p99,
        };
        assert!(targets(true, true, true).missed().is_empty());
        assert_eq!(
            targets(false, true, false).missed(),
            [
                "soft expiries beyond their bound",
                "hard p99 with / without soft timers"
            ]
        );
        assert_eq!(
            targets(true, false, true).missed(),
            ["soft timers due while the pile went in"]
        );
    }
}
