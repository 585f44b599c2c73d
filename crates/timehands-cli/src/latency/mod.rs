//! `timehands latency`: wakeup latency, measured as cyclictest measures it.
//!
//! Each measuring thread sleeps to absolute deadlines one interval apart
//! (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`) and records how late it
//! runs after each. The flags, their defaults, the per-thread line and the
//! histogram layout are cyclictest's (rt-tests), so that the two can be run
//! back to back and their figures set side by side. What cyclictest lacks is
//! added where its scripts will not trip on it (`#` lines, extra JSON fields):
//! the periods missed by late wakeups, p50/p99/p99.9 from an HDR histogram,
//! the system the figures came from, and the timer slack of the threads (set to
//! the minimum, as a SCHED_OTHER thread otherwise sleeps up to 50 µs long on
//! purpose).
//!
//! How a thread waits is [`measure::Waiter`]: [`measure::Nanosleep`] as
//! cyclictest, or with `--service` a hard timer of the timehands timer service
//! ([`measure::ServiceTimer`]), whose expiry thread runs at the `-p` priority.

mod affinity;
mod clock;
mod deadline;
pub(crate) mod duration;
pub(crate) mod interrupt;
mod measure;
mod realtime;
mod report;
mod stats;
mod sysinfo;

pub(crate) use clock::sleep_for;

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};

use crate::output;

use measure::{Limits, Nanosleep, Progress, ServiceTimer, Setup, ThreadPlan, Waiter};
use report::ThreadResult;
use sysinfo::SysInfo;

/// cyclictest's default interval, µs.
const DEFAULT_INTERVAL_US: u32 = 1000;
/// cyclictest's default distance between the threads' intervals, µs.
const DEFAULT_DISTANCE_US: u32 = 500;
/// cyclictest's largest histogram, µs.
const MAX_HISTOGRAM_US: u32 = 1_000_000;
/// The most memory the histograms of all threads may take, 1 GiB.
const MAX_HISTOGRAM_BYTES: usize = 1 << 30;
/// More measuring threads than this is a typo, not a test.
const MAX_THREADS: usize = 4096;
/// How often the live display is redrawn (cyclictest's 10 ms).
const REDRAW: Duration = Duration::from_millis(10);

const EXAMPLES: &str = "\
Examples:
  timehands latency -p 80 -i 1000 -l 10000 -q       cyclictest's classic run
  timehands latency -S -p 80 -m -D 10m -h 200 -q   one pinned thread per CPU, a histogram
  timehands latency -p 80 -l 100000 --json out.json   cyclictest's JSON, plus percentiles
  timehands latency -l 1000 --json | jq '.thread[\"0\"].p99_us'

Flags, defaults and output are cyclictest's; `#` lines add missed periods,
p50/p99/p99.9, the system and the timer slack. Ctrl-C stops and prints the summary.";

/// Flags of `timehands latency` (cyclictest's).
#[derive(clap::Args)]
#[command(disable_help_flag = true, after_help = EXAMPLES)]
pub struct Args {
    /// Pin thread N to CPU N of the CPUs this process may use; with CPUSET
    /// (such as 0, 2-3 or 3-5,0), pin the threads round-robin to those CPUs.
    #[arg(short = 'a', long = "affinity", value_name = "CPUSET", num_args = 0..=1, default_missing_value = "")]
    pub affinity: Option<String>,

    /// Distance of the threads' intervals in µs (thread N runs at
    /// interval + N * distance); 500 by default, 0 with a histogram.
    #[arg(short = 'd', long = "distance", value_name = "DIST")]
    pub distance: Option<u32>,

    /// Stop after TIME: seconds, or a number with s, m, h or d.
    #[arg(short = 'D', long = "duration", value_name = "TIME", value_parser = duration::parse)]
    pub duration: Option<Duration>,

    /// Keep a histogram of US one-µs buckets and print it after the run.
    #[arg(short = 'h', long = "histogram", value_name = "US", value_parser = clap::value_parser!(u32).range(1..=MAX_HISTOGRAM_US as i64), conflicts_with = "histofall")]
    pub histogram: Option<u32>,

    /// Like -h, with a column summing all threads.
    #[arg(short = 'H', long = "histofall", value_name = "US", value_parser = clap::value_parser!(u32).range(1..=MAX_HISTOGRAM_US as i64))]
    pub histofall: Option<u32>,

    /// Write the histogram to PATH instead of stdout.
    #[arg(long = "histfile", value_name = "PATH")]
    pub histfile: Option<PathBuf>,

    /// Base interval of the threads in µs.
    #[arg(short = 'i', long = "interval", value_name = "INTV", default_value_t = DEFAULT_INTERVAL_US, value_parser = clap::value_parser!(u32).range(1..))]
    pub interval: u32,

    /// Write the results as JSON to FILE (cyclictest's --json=FILE, with more
    /// fields); alone, print only the JSON, on stdout.
    #[arg(long = "json", value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,

    /// Wakeups per thread; 0 for no limit.
    #[arg(short = 'l', long = "loops", value_name = "LOOPS", default_value_t = 0)]
    pub loops: u64,

    /// Lock current and future memory (mlockall).
    #[arg(short = 'm', long = "mlockall")]
    pub mlockall: bool,

    /// SCHED_FIFO priority of the threads (1-99; 0 picks threads + 1, as
    /// cyclictest does). Without -p the threads run SCHED_OTHER.
    #[arg(short = 'p', long = "priority", value_name = "PRIO", value_parser = clap::value_parser!(u8).range(0..=99))]
    pub priority: Option<u8>,

    /// Print the summary only, on exit.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Wait on hard timers of the timehands timer service instead of
    /// clock_nanosleep: the service's expiry thread (SCHED_FIFO at -p) fires
    /// each timer and wakes the measuring thread
    #[arg(long = "service")]
    pub service: bool,

    /// One thread per CPU, each pinned to its CPU, all at the same priority.
    #[arg(short = 'S', long = "smp")]
    pub smp: bool,

    /// Number of measuring threads; alone, one per CPU this process may use.
    #[arg(short = 't', long = "threads", value_name = "NUM", num_args = 0..=1, default_missing_value = "", value_parser = parse_threads)]
    pub threads: Option<ThreadCount>,

    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// `-t`'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadCount {
    /// `-t` alone: one per CPU.
    PerCpu,
    /// `-t N`.
    Exactly(usize),
}

fn parse_threads(text: &str) -> Result<ThreadCount, String> {
    if text.is_empty() {
        return Ok(ThreadCount::PerCpu);
    }
    match text.parse::<usize>() {
        Ok(n @ 1..=MAX_THREADS) => Ok(ThreadCount::Exactly(n)),
        _ => Err(format!(
            "bad thread count {text:?}: want 1 to {MAX_THREADS}"
        )),
    }
}

/// A run's settings once the flags are checked and cyclictest's rules
/// applied.
struct Plan {
    threads: Vec<ThreadPlan>,
    limits: Limits,
    all_column: bool,
    distance_us: u64,
}

impl Plan {
    fn from_args(args: &Args) -> anyhow::Result<Plan> {
        let allowed = realtime::allowed_cpus();
        let cpus: Option<Vec<usize>> = match (&args.affinity, args.smp) {
            (_, true) => {
                if args.affinity.is_some() {
                    eprintln!("WARN: -a ignored due to smp mode");
                }
                Some(allowed.clone())
            }
            (Some(list), false) if list.is_empty() => Some(allowed.clone()),
            (Some(list), false) => {
                Some(affinity::parse_cpu_list(list, &allowed).map_err(anyhow::Error::msg)?)
            }
            (None, false) => None,
        };
        let per_cpu = cpus.as_ref().map_or(allowed.len(), Vec::len);
        let count = match (args.threads, args.smp) {
            (Some(_), true) => {
                eprintln!("WARN: -t ignored due to smp mode");
                per_cpu
            }
            (_, true) | (Some(ThreadCount::PerCpu), false) => per_cpu,
            (Some(ThreadCount::Exactly(n)), false) => n,
            (None, false) => 1,
        };
        let bound_us = args.histogram.or(args.histofall).map(|us| us as usize);
        if let Some(bound) = bound_us {
            let bytes = bound.saturating_mul(count).saturating_mul(size_of::<u64>());
            if bytes > MAX_HISTOGRAM_BYTES {
                bail!(
                    "-h {bound} with {count} threads needs {} MiB of buckets: \
                     use a smaller bound or fewer threads",
                    bytes >> 20
                );
            }
        }
        let distance_us = match (bound_us, args.distance) {
            (Some(_), Some(_)) => {
                eprintln!("WARN: distance is ignored and set to 0, if histogram enabled");
                0
            }
            (Some(_), None) => 0,
            (None, d) => u64::from(d.unwrap_or(DEFAULT_DISTANCE_US)),
        };
        let priority = match args.priority {
            Some(0) => {
                // SCHED_FIFO has no priority 0.
                let p = u8::try_from((count + 1).min(99)).unwrap_or(99);
                eprintln!("defaulting realtime priority to {p}");
                p
            }
            Some(p) => p,
            None => 0,
        };
        let threads = (0..count)
            .map(|index| ThreadPlan {
                index,
                interval_us: u64::from(args.interval) + index as u64 * distance_us,
                cpu: cpus
                    .as_deref()
                    .map(|cpus| affinity::cpu_for_thread(index, cpus)),
                priority,
            })
            .collect();
        Ok(Plan {
            threads,
            limits: Limits {
                loops: args.loops,
                duration: args.duration,
                bound_us,
            },
            all_column: args.histofall.is_some(),
            distance_us,
        })
    }
}

/// Where the JSON goes.
enum JsonOut {
    Stdout,
    File(PathBuf, File),
}

/// Creates an output file before the run, so that a bad path costs no
/// measurement.
fn create(path: &PathBuf, flag: &str) -> anyhow::Result<File> {
    File::create(path).with_context(|| format!("{flag} {}: cannot write", path.display()))
}

/// Runs `timehands latency`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let plan = Plan::from_args(args)?;
    let json = match &args.json {
        Some(path) if path.as_os_str() == "-" => Some(JsonOut::Stdout),
        Some(path) => Some(JsonOut::File(path.clone(), create(path, "--json")?)),
        None => None,
    };
    let histfile = args
        .histfile
        .as_ref()
        .map(|path| create(path, "--histfile"))
        .transpose()?;
    let text = !matches!(json, Some(JsonOut::Stdout));
    let stop = interrupt::stop_on_interrupt()?;
    if args.mlockall {
        realtime::lock_memory()?;
    }
    let idle_limit = realtime::IdleLimit::request();
    let cpu_dma_latency = match &idle_limit {
        Ok(_) => "0us".to_string(),
        Err(why) => format!("not set: {why}"),
    };
    if text {
        match &idle_limit {
            Ok(_) => output::print("# /dev/cpu_dma_latency set to 0us\n")?,
            Err(why) => output::print(&format!("# WARN: {why}\n"))?,
        }
    }
    let start_unix_s = unix_seconds();
    let live = text && !args.quiet && io::stdout().is_terminal();
    let results = if args.service {
        let service = timer_service(plan.threads[0].priority)?;
        if text {
            output::print(&format!(
                "# timer service: hard expiry thread {}\n",
                service.scheduling()
            ))?;
        }
        measure_all(&plan, stop, live, || ServiceTimer::new(&service))?
    } else {
        measure_all(&plan, stop, live, || Nanosleep)?
    };
    drop(idle_limit);
    let stopped_by = if stop.load(Ordering::Relaxed) {
        "signal"
    } else if plan.limits.loops > 0
        && results
            .iter()
            .all(|r| r.stats.summary().cycles == plan.limits.loops)
    {
        "loops"
    } else {
        "duration"
    };
    let sysinfo = SysInfo::gather();
    if text {
        print_text(args, &plan, &results, histfile, &sysinfo)?;
    }
    if let Some(out) = json {
        let run = RunFacts {
            start_unix_s,
            stopped_by,
            cpu_dma_latency,
        };
        let body = serde_json::to_string_pretty(&document(args, &plan, &results, &sysinfo, run))?;
        match out {
            JsonOut::Stdout => output::print(&format!("{body}\n"))?,
            JsonOut::File(path, mut file) => writeln!(file, "{body}")
                .with_context(|| format!("--json {}: cannot write", path.display()))?,
        }
    }
    Ok(())
}

/// The timer service for `--service`, its hard thread asking for SCHED_FIFO
/// at `priority` (none at 0). A priority it may not have is the error, as for
/// the measuring threads.
fn timer_service(priority: u8) -> anyhow::Result<timehands_timer::TimerService> {
    let service = timehands_timer::Builder::new()
        .realtime_priority((priority > 0).then_some(i32::from(priority)))
        .build()
        .context("--service: cannot start the timer service")?;
    if let (true, timehands_timer::Scheduling::Normal { reason }) =
        (priority > 0, service.scheduling())
    {
        bail!(
            "--service -p {priority}: the timer service's thread cannot have SCHED_FIFO: {reason}"
        );
    }
    Ok(service)
}

/// What the JSON says about the run besides the flags and the figures.
struct RunFacts {
    start_unix_s: u64,
    stopped_by: &'static str,
    cpu_dma_latency: String,
}

fn document<'a>(
    args: &Args,
    plan: &Plan,
    results: &'a [ThreadResult],
    sysinfo: &'a SysInfo,
    run: RunFacts,
) -> report::Document<'a> {
    let priority = plan.threads[0].priority;
    report::Document {
        schema_version: report::SCHEMA_VERSION,
        tool: "timehands latency",
        version: env!("CARGO_PKG_VERSION"),
        cmdline: std::env::args().collect::<Vec<_>>().join(" "),
        start_unix_s: run.start_unix_s,
        end_unix_s: unix_seconds(),
        stopped_by: run.stopped_by,
        sysinfo,
        settings: report::Settings {
            interval_us: u64::from(args.interval),
            distance_us: plan.distance_us,
            priority,
            policy: if priority > 0 { "fifo" } else { "other" },
            loops: plan.limits.loops,
            duration_s: plan.limits.duration.map(|d| d.as_secs()),
            mlockall: args.mlockall,
            histogram_us: plan.limits.bound_us,
            cpu_dma_latency: run.cpu_dma_latency,
            waiter: if args.service {
                "timer service"
            } else {
                "clock_nanosleep"
            },
        },
        num_threads: results.len(),
        resolution_in_ns: 0,
        histogram_overflows: plan.limits.bound_us.map(|_| {
            results
                .iter()
                .filter_map(|r| r.stats.buckets())
                .map(|b| b.overflows())
                .sum()
        }),
        missed_periods: results.iter().map(|r| r.stats.missed()).sum(),
        thread: report::Threads(results),
    }
}

/// Starts one thread per plan, each waiting with a waiter from `waiter`,
/// waits until they are set up (any refusal stops them all and is the error),
/// redraws the live display while they run, and collects their results.
fn measure_all<W: Waiter>(
    plan: &Plan,
    stop: &AtomicBool,
    live: bool,
    waiter: impl Fn() -> W + Sync,
) -> anyhow::Result<Vec<ThreadResult>> {
    let progress: Vec<Progress> = plan.threads.iter().map(|_| Progress::default()).collect();
    let (ready, setups) = mpsc::channel();
    let (progress, waiter) = (&progress, &waiter);
    std::thread::scope(|scope| {
        let outcome = (move || {
            let handles: Vec<_> = plan
                .threads
                .iter()
                .zip(progress)
                .map(|(thread, progress)| {
                    let ready = ready.clone();
                    std::thread::Builder::new()
                        .name(format!("latency-{}", thread.index))
                        .spawn_scoped(scope, move || {
                            measure::run(thread, plan.limits, &mut waiter(), stop, progress, &ready)
                        })
                        .context("cannot start a measuring thread")
                })
                .collect::<anyhow::Result<_>>()?;
            // Only the threads hold senders now: one that dies unannounced ends
            // the wait below instead of hanging it.
            drop(ready);
            let mut tids = vec![Setup::default(); plan.threads.len()];
            let mut refusal = None;
            for _ in &plan.threads {
                let (index, setup) = setups.recv().context("a measuring thread died")?;
                match setup {
                    Ok(setup) => tids[index] = setup,
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        refusal.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = refusal {
                return Err(e);
            }
            if live {
                while !handles.iter().all(|h| h.is_finished()) {
                    let frame = status_frame(plan, &tids, progress);
                    print!("{frame}\x1b[{}A", plan.threads.len() + 2);
                    let _ = io::stdout().flush();
                    std::thread::sleep(REDRAW);
                }
            }
            let mut results = Vec::new();
            for (h, (thread, setup)) in handles.into_iter().zip(plan.threads.iter().zip(tids)) {
                let stats = match h.join() {
                    Ok(outcome) => outcome?,
                    Err(_) => bail!("measuring thread {} panicked", thread.index),
                };
                if let Some(stats) = stats {
                    results.push(ThreadResult {
                        plan: thread.clone(),
                        setup,
                        stats,
                    });
                }
            }
            Ok(results)
        })();
        // Threads still running on an error must end for the scope to end.
        if outcome.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        outcome
    })
}

/// cyclictest's live display: the policy line, an empty line, a line per
/// thread.
fn status_frame(plan: &Plan, setups: &[Setup], progress: &[Progress]) -> String {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut frame = format!(
        "{}          \n\n",
        report::policy_line(plan.threads[0].priority, loadavg.trim())
    );
    for ((thread, setup), progress) in plan.threads.iter().zip(setups).zip(progress) {
        frame.push_str(&report::thread_line(thread, setup.tid, progress.read()));
        frame.push('\n');
    }
    frame
}

/// The text output: cyclictest's (the last frame, or the quiet summary, and
/// the histogram), then the `#` lines it lacks.
fn print_text(
    args: &Args,
    plan: &Plan,
    results: &[ThreadResult],
    histfile: Option<File>,
    sysinfo: &SysInfo,
) -> anyhow::Result<()> {
    // Made whole, then written at once: see `output::print`.
    let mut out = Vec::new();
    if !args.quiet {
        let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        writeln!(
            out,
            "{}          \n",
            report::policy_line(plan.threads[0].priority, loadavg.trim())
        )?;
    }
    // As cyclictest: quiet with a histogram prints the histogram only.
    if !args.quiet || plan.limits.bound_us.is_none() {
        for r in results {
            writeln!(
                out,
                "{}",
                report::thread_line(&r.plan, r.setup.tid, r.stats.summary())
            )?;
        }
    }
    if plan.limits.bound_us.is_some() {
        match (histfile, &args.histfile) {
            (Some(mut file), Some(path)) => {
                report::write_histogram(&mut file, results, plan.all_column)
                    .with_context(|| format!("--histfile {}: cannot write", path.display()))?
            }
            _ => report::write_histogram(&mut out, results, plan.all_column)?,
        }
    }
    writeln!(out, "# {}", sysinfo.line())?;
    writeln!(out, "{}", report::slack_line(results))?;
    for r in results {
        writeln!(out, "{}", report::extra_line(r))?;
    }
    output::print(&String::from_utf8_lossy(&out))
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
