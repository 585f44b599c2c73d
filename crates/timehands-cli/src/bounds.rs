//! `timehands bounds`: timehands' bounds on UTC, live (the earliest and the
//! latest the true time can be, where they come from), with AWS
//! ClockBound's beside them when its daemon's shared memory is there; with
//! `--bench`, the cost of a call and the half-widths of both side by side.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;
use timehands::{BoundsSource, BoundsStatus, RealtimeBounds};

use crate::output;

/// Flags of `timehands bounds`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  timehands bounds\n  timehands bounds -n 60 --interval 500 --json\n  timehands bounds --bench"
)]
pub struct Args {
    /// How many lines to print.
    #[arg(short = 'n', long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Milliseconds between lines.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub interval: u64,
    /// One JSON document a line instead of text.
    #[arg(long)]
    pub json: bool,
    /// Instead of lines: the cost of a call (ns) of `now()`, of
    /// `realtime_bounds()` and of ClockBound's client, and the half-widths
    /// of the two bounds, in one run.
    #[arg(long)]
    pub bench: bool,
}

/// One side's interval: ns since the epoch, and what it says of itself.
#[derive(Serialize, Clone)]
struct Interval {
    earliest_ns: u128,
    latest_ns: u128,
    half_width_ns: u128,
    /// Where it comes from and how the source keeps the clock.
    status: String,
}

impl Interval {
    fn new(earliest_ns: u128, latest_ns: u128, status: String) -> Interval {
        Interval {
            earliest_ns,
            latest_ns,
            half_width_ns: latest_ns.saturating_sub(earliest_ns) / 2,
            status,
        }
    }
}

/// What a source and status are called in the output.
fn describe(source: BoundsSource, status: BoundsStatus) -> String {
    let source = match source {
        BoundsSource::Chronyd => "chronyd",
        BoundsSource::ClockBound => "ClockBound",
        BoundsSource::ClockBound3 => "ClockBound 3",
        BoundsSource::VmClock => "VMClock",
        BoundsSource::Ptp4l => "ptp4l",
        _ => "kernel",
    };
    let status = match status {
        BoundsStatus::FreeRunning => "free-running",
        _ => "synchronized",
    };
    format!("{source}, {status}")
}

/// Ours, or why there is none.
fn ours(bounds: &Result<RealtimeBounds, timehands::Error>) -> Result<Interval, String> {
    match bounds {
        Ok(b) => Ok(Interval::new(
            b.earliest.as_nanos(),
            b.latest.as_nanos(),
            describe(b.source, b.status),
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// AWS ClockBound's client, where its daemon's segment is.
struct ClockBound {
    #[cfg(target_os = "linux")]
    client: Option<clock_bound_client::ClockBoundClient>,
    /// Why there is no client.
    absent: String,
}

impl ClockBound {
    #[cfg(target_os = "linux")]
    fn open() -> ClockBound {
        match clock_bound_client::ClockBoundClient::new() {
            Ok(client) => ClockBound {
                client: Some(client),
                absent: String::new(),
            },
            Err(e) => ClockBound {
                client: None,
                absent: format!(
                    "no ClockBound ({:?}{}{})",
                    e.kind,
                    if e.detail.is_empty() { "" } else { ": " },
                    e.detail
                ),
            },
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn open() -> ClockBound {
        ClockBound {
            absent: "no ClockBound on this OS".to_string(),
        }
    }

    fn present(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.client.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// ClockBound's interval now, `None` without its daemon.
    fn now(&mut self) -> Option<Result<Interval, String>> {
        #[cfg(target_os = "linux")]
        {
            let client = self.client.as_mut()?;
            Some(match client.now() {
                Ok(r) => {
                    let ns = |t: &libc::timespec| {
                        (i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)).max(0)
                            as u128
                    };
                    Ok(Interval::new(
                        ns(r.earliest.as_ref()),
                        ns(r.latest.as_ref()),
                        format!("{:?}", r.clock_status),
                    ))
                }
                Err(e) => Err(format!("{:?}: {}", e.kind, e.detail)),
            })
        }
        #[cfg(not(target_os = "linux"))]
        None
    }
}

/// A line's worth.
#[derive(Serialize)]
struct Line {
    realtime_ns: u128,
    timehands: Result<Interval, String>,
    clockbound: Option<Result<Interval, String>>,
}

/// `12.345 µs`
fn micros(ns: u128) -> String {
    format!("{:.3} µs", ns as f64 / 1e3)
}

fn side(interval: &Result<Interval, String>) -> String {
    match interval {
        Ok(i) => format!("± {:>12}  {}", micros(i.half_width_ns), i.status),
        Err(why) => format!("no bound: {why}"),
    }
}

/// The library asks chronyd at `TIMEHANDS_CHRONYD` (an IP address and
/// port) where it is set; one that does not parse would be passed over in
/// silence there (a read has nowhere to say so): here it is refused.
fn check_chronyd_address() -> Result<()> {
    if let Ok(address) = std::env::var("TIMEHANDS_CHRONYD") {
        if let Err(e) = address.parse::<std::net::SocketAddr>() {
            anyhow::bail!(
                "TIMEHANDS_CHRONYD={address:?} is not an IP address and port, such as 127.0.0.1:323: {e}"
            );
        }
    }
    Ok(())
}

/// Runs `timehands bounds`.
pub fn run(args: &Args) -> Result<()> {
    check_chronyd_address()?;
    let mut clockbound = ClockBound::open();
    // The sources asked once, as ClockBound's client opened its segment.
    let _ = timehands::realtime_bounds_when_ready(Duration::from_secs(2));
    if args.bench {
        return bench(args, &mut clockbound);
    }
    if !args.json && !clockbound.present() {
        output::print(&format!("{}\n", clockbound.absent))?;
    }
    for i in 0..args.count {
        let bounds = timehands::realtime_bounds();
        let line = Line {
            realtime_ns: bounds.as_ref().map_or_else(
                |_| timehands::gettime(timehands::ClockId::Realtime).as_nanos(),
                |b| b.realtime.as_nanos(),
            ),
            timehands: ours(&bounds),
            clockbound: clockbound.now(),
        };
        if args.json {
            output::print(&format!("{}\n", serde_json::to_string(&line)?))?;
        } else {
            let theirs = line
                .clockbound
                .as_ref()
                .map_or_else(String::new, |c| format!("   ClockBound {}", side(c)));
            output::print(&format!(
                "{}.{:09}  timehands {}{theirs}\n",
                line.realtime_ns / 1_000_000_000,
                line.realtime_ns % 1_000_000_000,
                side(&line.timehands),
            ))?;
        }
        if i + 1 < args.count {
            std::thread::sleep(Duration::from_millis(args.interval));
        }
    }
    Ok(())
}

/// Calls a round.
const CALLS: u32 = 20_000;
/// Rounds of each; the median round is reported.
const ROUNDS: usize = 15;

/// ns per call of a round of [`CALLS`] of `f`.
fn round<T>(f: &mut impl FnMut() -> T) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        std::hint::black_box(f());
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

/// The median of `rounds`.
fn median_of(mut rounds: Vec<f64>) -> f64 {
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

/// ns per call of `f`, the median of [`ROUNDS`] rounds of [`CALLS`].
fn cost<T>(mut f: impl FnMut() -> T) -> f64 {
    median_of((0..ROUNDS).map(|_| round(&mut f)).collect())
}

/// ns per call of `a` and of `b`, their rounds taken in turn (so that
/// both meet the clock in the same state), each the median of [`ROUNDS`].
fn costs_side_by_side<A, B>(mut a: impl FnMut() -> A, mut b: impl FnMut() -> B) -> (f64, f64) {
    let (a, b): (Vec<f64>, Vec<f64>) = (0..ROUNDS).map(|_| (round(&mut a), round(&mut b))).unzip();
    (median_of(a), median_of(b))
}

/// How long the clock is read before the costs are: its start (the
/// counter's choice, the first steerings) is over by then.
const WARM_UP: Duration = Duration::from_millis(200);

fn median(values: &mut [u128]) -> Option<u128> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
}

/// The figures of `--bench`.
#[derive(Serialize)]
struct Bench {
    now_ns: f64,
    realtime_bounds_ns: f64,
    clockbound_ns: Option<f64>,
    realtime_bounds_over_now: f64,
    /// Over `samples` pairs taken at `interval` ms.
    samples: u64,
    timehands_half_width_median_ns: Option<u128>,
    clockbound_half_width_median_ns: Option<u128>,
    timehands_source: Option<String>,
}

fn bench(args: &Args, clockbound: &mut ClockBound) -> Result<()> {
    let start = Instant::now();
    while start.elapsed() < WARM_UP {
        std::hint::black_box(timehands::now());
        let _ = std::hint::black_box(timehands::realtime_bounds());
    }
    let (now_ns, realtime_bounds_ns) =
        costs_side_by_side(timehands::now, timehands::realtime_bounds);
    let clockbound_ns = clockbound.present().then(|| cost(|| clockbound.now()));
    let (mut ours_hw, mut theirs_hw) = (Vec::new(), Vec::new());
    let mut source = None;
    for _ in 0..args.count {
        let bounds = timehands::realtime_bounds();
        if let Ok(i) = ours(&bounds) {
            ours_hw.push(i.half_width_ns);
            source = Some(i.status);
        }
        if let Some(Ok(i)) = clockbound.now() {
            theirs_hw.push(i.half_width_ns);
        }
        std::thread::sleep(Duration::from_millis(args.interval));
    }
    let figures = Bench {
        now_ns,
        realtime_bounds_ns,
        clockbound_ns,
        realtime_bounds_over_now: realtime_bounds_ns / now_ns,
        samples: args.count,
        timehands_half_width_median_ns: median(&mut ours_hw),
        clockbound_half_width_median_ns: median(&mut theirs_hw),
        timehands_source: source,
    };
    if args.json {
        return output::print(&format!("{}\n", serde_json::to_string(&figures)?));
    }
    let hw = |m: Option<u128>| m.map_or_else(|| "no bound".to_string(), micros);
    let mut text = format!("{:<30} {:>10}  {:>14}\n", "", "ns/call", "half-width");
    text += &format!("{:<30} {:>10.1}\n", "timehands::now()", now_ns);
    text += &format!(
        "{:<30} {:>10.1}  {:>14}  ({}; {:.2}x now())\n",
        "timehands::realtime_bounds()",
        realtime_bounds_ns,
        hw(figures.timehands_half_width_median_ns),
        figures.timehands_source.as_deref().unwrap_or("no bound"),
        figures.realtime_bounds_over_now
    );
    text += &match clockbound_ns {
        Some(ns) => format!(
            "{:<30} {:>10.1}  {:>14}\n",
            "ClockBound client now()",
            ns,
            hw(figures.clockbound_half_width_median_ns)
        ),
        None => format!("{}\n", clockbound.absent),
    };
    text += &format!(
        "half-widths: medians of {} samples {} ms apart\n",
        args.count, args.interval
    );
    output::print(&text)?;
    Ok(())
}
