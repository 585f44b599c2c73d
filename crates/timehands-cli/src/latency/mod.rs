//! `timehands latency`: wakeup latency, measured as cyclictest measures it.
//!
//! Each measuring thread sleeps to absolute deadlines one interval apart
//! (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`) and records how late it
//! runs after each. The flags, their defaults, the per-thread line and the
//! histogram layout are cyclictest's (rt-tests), so that the two can be run
//! back to back and their figures set side by side. What cyclictest lacks is
//! added where its scripts will not trip on it (`#` lines, extra JSON fields):
//! the periods missed by late wakeups, p50/p99/p99.9 from an HDR histogram,
//! the system the figures came from, and the timer slack of the threads (left
//! as the thread has it, as cyclictest leaves it: a SCHED_OTHER thread sleeps
//! up to its slack, 50 µs by default, long on purpose; `--least-slack` asks
//! for 1 ns).
//!
//! How a thread waits is [`measure::Waiter`]: [`measure::Nanosleep`] as
//! cyclictest by default, a relative sleep (`-r`, `-s`), a POSIX timer (`-x`),
//! or with `--service` a hard timer of the timehands timer service
//! ([`measure::ServiceTimer`]), whose expiry thread runs at the `-p` priority.

mod affinity;
mod args;
mod clock;
mod deadline;
pub(crate) mod duration;
mod feeds;
mod measure;
mod plan;
mod realtime;
mod report;
mod stats;
mod sysinfo;

pub use args::Args;
use args::{DEFAULT_DISTANCE_US, MAX_HISTOGRAM_BYTES, ThreadCount};
pub(crate) use clock::sleep_for;

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, mpsc};
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

use crate::output;

use measure::{
    Align, BreakTrace, Nanosleep, PosixTimer, Progress, RelativeSleep, Sample, ServiceTimer, Setup,
    Shared, Spikes, ThreadPlan, Waiter,
};
use plan::{Plan, WaitMode};
use report::ThreadResult;
use stats::Unit;
use sysinfo::SysInfo;

/// How often the live display is redrawn (cyclictest's 10 ms).
const REDRAW: Duration = Duration::from_millis(10);

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

/// What the run's flags ask of the system before the threads start, kept
/// until the end.
struct Tuning {
    idle_limit: Option<Result<realtime::IdleLimit, String>>,
    pm_qos: i32,
}

impl Tuning {
    /// The PM QoS request unless `--laptop` or `--default-system`.
    fn apply(args: &Args) -> Tuning {
        let pm_qos = args.pm_qos.max(0);
        if args.laptop {
            eprintln!("WARN: not setting cpu_dma_latency to save battery power");
        }
        let idle_limit =
            (!args.laptop && !args.default_system).then(|| realtime::IdleLimit::request(pm_qos));
        Tuning { idle_limit, pm_qos }
    }

    /// What JSON says of the request.
    fn cpu_dma_latency(&self) -> String {
        match &self.idle_limit {
            Some(Ok(_)) => format!("{}us", self.pm_qos),
            Some(Err(why)) => format!("not set: {why}"),
            None => "not set: --laptop or --default-system".to_string(),
        }
    }

    /// cyclictest's line about the request, or the reason it failed.
    fn line(&self) -> Option<String> {
        match &self.idle_limit {
            Some(Ok(_)) => Some(format!("# /dev/cpu_dma_latency set to {}us\n", self.pm_qos)),
            Some(Err(why)) => Some(format!("# WARN: {why}\n")),
            None => None,
        }
    }
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
    if args.smi {
        check_smi(&plan)?;
    }
    let marker = match (args.tracemark, args.breaktrace.filter(|&b| b > 0)) {
        (true, Some(_)) => Some(realtime::TraceMarker::open()?),
        (true, None) => {
            eprintln!("WARN: --tracemark marks the -b threshold: without -b it marks nothing");
            None
        }
        (false, _) => None,
    };
    let fifo = args.fifo.as_deref().map(feeds::Fifo::create).transpose()?;
    pin_main_thread(args)?;
    let text = !matches!(json, Some(JsonOut::Stdout));
    let stop = crate::interrupt::stop_on_interrupt()?;
    if args.resolution {
        clock::check_resolution(plan.threads[0].clock, args.verbose, args.dbg_cyclictest);
    }
    if text && args.verbose {
        output::print(&format!(
            "Max CPUs = {}\nOnline CPUs = {}\n",
            cpu_count(libc::_SC_NPROCESSORS_CONF),
            cpu_count(libc::_SC_NPROCESSORS_ONLN)
        ))?;
    }
    if args.mlockall {
        realtime::lock_memory()?;
    }
    let tuning = Tuning::apply(args);
    if let (true, Some(line)) = (text, tuning.line()) {
        output::print(&line)?;
    }
    if text && args.verbose {
        let mut lines = String::new();
        for t in &plan.threads {
            lines.push_str(&format!("Thread {} Interval: {}\n", t.index, t.interval_us));
        }
        output::print(&lines)?;
    }
    let (samples, verbose_feed) = if args.verbose && text {
        let (sender, receiver) = mpsc::channel();
        let printer =
            feeds::VerbosePrinter::new(plan.threads.len(), args.oscope.unwrap_or(1), args.smi);
        (Some(sender), Some((receiver, printer)))
    } else {
        (None, None)
    };
    let shared = Shared {
        stop,
        samples,
        // 0 is off for both, as in cyclictest.
        break_trace: args.breaktrace.filter(|&b| b > 0).map(|above| BreakTrace {
            above,
            hit: Mutex::new(None),
            marker,
        }),
        spikes: args.spike.filter(|&s| s > 0).map(|above| Spikes {
            above,
            kept: args.spike_nodes,
            seen: Mutex::new((Vec::new(), 0)),
        }),
        align: args.aligned.or(args.secaligned).map(|offset_us| Align {
            barrier: Barrier::new(plan.threads.len()),
            start: Mutex::new(None),
            offset_ns: u64::from(offset_us) * 1000,
            to_second: args.secaligned.is_some(),
        }),
    };
    let start_time = SystemTime::now();
    let display = Display {
        text,
        live: text && !args.quiet && !args.verbose && io::stdout().is_terminal(),
        refresh_on_max: args.refresh_on_max,
        verbose: verbose_feed,
        fifo: fifo.as_ref(),
    };
    let results = run_threads(&plan, &shared, display)?;
    let cpu_dma_latency = tuning.cpu_dma_latency();
    drop(tuning);
    let stopped_by = if shared
        .break_trace
        .as_ref()
        .is_some_and(|b| b.hit.lock().is_ok_and(|hit| hit.is_some()))
    {
        "breaktrace"
    } else if plan.limits.loops > 0
        && results
            .iter()
            .any(|r| r.stats.summary().cycles == plan.limits.loops)
    {
        "loops"
    } else if stop.load(Ordering::Relaxed) {
        "signal"
    } else {
        "duration"
    };
    let sysinfo = SysInfo::gather();
    if text {
        print_text(args, &plan, &results, &shared, histfile, &sysinfo)?;
    }
    if let Some(out) = json {
        let run = RunFacts {
            start_time,
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

/// Opens the SMI counter of the first thread's CPU once before the run, so
/// that a machine without one is told at once.
fn check_smi(plan: &Plan) -> anyhow::Result<()> {
    if !cfg!(target_arch = "x86_64")
        || timehands::diagnostics::hw::TscFacts::read().vendor != "GenuineIntel"
    {
        bail!("--smi: SMI counter is not supported on this processor (it is an Intel MSR)");
    }
    measure::SmiCounter::open(plan.threads[0].cpu).map(drop)
}

/// `--mainaffinity`, or else the CPUs of `-a` (as cyclictest restricts its
/// main thread to them).
fn pin_main_thread(args: &Args) -> anyhow::Result<()> {
    let allowed = realtime::allowed_cpus();
    let (flag, list) = match (&args.mainaffinity, &args.affinity) {
        (Some(list), _) => ("--mainaffinity", list),
        (None, Some(list)) if !list.is_empty() && !args.smp => ("-a", list),
        _ => return Ok(()),
    };
    let cpus = affinity::parse_cpu_list(flag, list, &allowed).map_err(anyhow::Error::msg)?;
    timehands::sys::pin_to_cpus(&cpus).with_context(|| format!("{flag} {list}: cannot run there"))
}

fn cpu_count(name: libc::c_int) -> i64 {
    // SAFETY: sysconf takes a name and touches no memory.
    i64::from(unsafe { libc::sysconf(name) } as i32)
}

/// What the main thread does while the threads measure.
struct Display<'a> {
    /// The run prints text (not JSON alone).
    text: bool,
    /// Redraw cyclictest's live display (a terminal, not quiet, not -v).
    live: bool,
    /// `-M`: only on a new maximum.
    refresh_on_max: bool,
    /// `-v`: the values the threads send, and how they are printed.
    verbose: Option<(mpsc::Receiver<Sample>, feeds::VerbosePrinter)>,
    /// `-F`: the named pipe to serve.
    fifo: Option<&'a feeds::Fifo>,
}

/// Starts the threads with the waiter the flags ask for.
fn run_threads(
    plan: &Plan,
    shared: &Shared,
    display: Display,
) -> anyhow::Result<Vec<ThreadResult>> {
    let interval_ns = |t: &ThreadPlan| t.interval_us * 1000;
    match plan.wait {
        WaitMode::Absolute => measure_all(plan, shared, display, |t| Nanosleep(t.clock)),
        WaitMode::Relative | WaitMode::System => {
            measure_all(plan, shared, display, |t| RelativeSleep {
                clock: t.clock,
                interval_ns: interval_ns(t),
                system_call: plan.wait == WaitMode::System,
            })
        }
        WaitMode::PosixTimer => {
            // Before any thread starts, so that every thread inherits it.
            measure::block_timer_signal();
            measure_all(plan, shared, display, |t| {
                PosixTimer::new(t.clock, interval_ns(t))
            })
        }
        WaitMode::Service => {
            let service = timer_service(plan.threads[0].priority)?;
            if display.text {
                output::print(&format!(
                    "# timer service: hard expiry thread {}\n",
                    service.scheduling()
                ))?;
            }
            measure_all(plan, shared, display, |_| ServiceTimer::new(&service))
        }
    }
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
    start_time: SystemTime,
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
    let cmdline = std::env::args().collect::<Vec<_>>().join(" ");
    let end_time = SystemTime::now();
    report::Document {
        file_version: 1,
        cmdline_: cmdline.clone(),
        rt_test_version_: report::RT_TESTS_VERSION,
        start_time: report::date(run.start_time),
        end_time: report::date(end_time),
        return_code: 0,
        sysinfo,
        num_threads: results.len(),
        resolution_in_ns: u8::from(plan.limits.unit == Unit::Nanos),
        thread: report::Threads(results),
        schema_version: report::SCHEMA_VERSION,
        tool: "timehands latency",
        version: env!("CARGO_PKG_VERSION"),
        cmdline,
        start_unix_s: unix_seconds(run.start_time),
        end_unix_s: unix_seconds(end_time),
        stopped_by: run.stopped_by,
        settings: report::Settings {
            interval_us: u64::from(args.interval),
            distance_us: plan.distance_us,
            priority,
            policy: if plan.other {
                "other"
            } else {
                plan.policy.name()
            },
            loops: plan.limits.loops,
            duration_s: plan.limits.duration.map(|d| d.as_secs()),
            mlockall: args.mlockall,
            histogram: plan.limits.bound,
            unit: if plan.limits.unit == Unit::Nanos {
                "ns"
            } else {
                "us"
            },
            cpu_dma_latency: run.cpu_dma_latency,
            waiter: match plan.wait {
                WaitMode::Absolute => "clock_nanosleep",
                WaitMode::Relative => "clock_nanosleep relative",
                WaitMode::System => "nanosleep",
                WaitMode::PosixTimer => "posix timer",
                WaitMode::Service => "timer service",
            },
            least_slack: args.least_slack,
        },
        histogram_overflows: plan.limits.bound.map(|_| {
            results
                .iter()
                .filter_map(|r| r.stats.buckets())
                .map(|b| b.overflows())
                .sum()
        }),
        missed_periods: results.iter().map(|r| r.stats.missed()).sum(),
    }
}

/// Starts one thread per plan, each waiting with a waiter from `waiter`,
/// waits until they are set up (any refusal stops them all and is the error),
/// prints what `display` asks while they run, and collects their results.
fn measure_all<W: Waiter>(
    plan: &Plan,
    shared: &Shared,
    mut display: Display,
    waiter: impl Fn(&ThreadPlan) -> W + Sync,
) -> anyhow::Result<Vec<ThreadResult>> {
    let stop = shared.stop;
    // Raised when the threads are done, for the named pipe's server.
    let done = AtomicBool::new(false);
    let done = &done;
    let progress: Vec<Progress> = plan.threads.iter().map(|_| Progress::default()).collect();
    let (ready, setups) = mpsc::channel();
    let (progress, waiter) = (&progress, &waiter);
    std::thread::scope(|scope| {
        let outcome = (|| {
            let handles: Vec<_> = plan
                .threads
                .iter()
                .zip(progress)
                .map(|(thread, progress)| {
                    let ready = ready.clone();
                    std::thread::Builder::new()
                        .name(format!("latency-{}", thread.index))
                        .spawn_scoped(scope, move || {
                            measure::run(
                                thread,
                                plan.limits,
                                &mut waiter(thread),
                                shared,
                                progress,
                                &ready,
                            )
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
            let running = || !handles.iter().all(|h| h.is_finished());
            if let Some(fifo) = display.fifo {
                scope.spawn(move || {
                    fifo.serve(done, || {
                        plan.threads
                            .iter()
                            .zip(progress)
                            .map(|(t, p)| {
                                format!(
                                    "{}\n",
                                    report::thread_line(t, p.tid(), p.read(), plan.limits.unit)
                                )
                            })
                            .collect()
                    })
                });
            }
            let mut shown_max = None;
            while (display.live || display.verbose.is_some()) && running() {
                if let Some((samples, printer)) = &mut display.verbose {
                    output::print(&printer.lines(samples.try_iter()))?;
                }
                let max: Vec<u64> = progress.iter().map(|p| p.read().max).collect();
                if display.live && (!display.refresh_on_max || shown_max.as_ref() != Some(&max)) {
                    let frame = status_frame(plan, progress);
                    print!("{frame}\x1b[{}A", plan.threads.len() + 2);
                    let _ = io::stdout().flush();
                    shown_max = Some(max);
                }
                std::thread::sleep(REDRAW);
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
            if let Some((samples, printer)) = &mut display.verbose {
                output::print(&printer.lines(samples.try_iter()))?;
            }
            Ok(results)
        })();
        // Threads still running on an error, and the named pipe's server,
        // must end for the scope to end.
        if outcome.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        done.store(true, Ordering::Relaxed);
        outcome
    })
}

/// cyclictest's live display: the policy line, an empty line, a line per
/// thread.
fn status_frame(plan: &Plan, progress: &[Progress]) -> String {
    let mut frame = format!("{}          \n\n", policy_line(plan));
    for (thread, progress) in plan.threads.iter().zip(progress) {
        frame.push_str(&report::thread_line(
            thread,
            progress.tid(),
            progress.read(),
            plan.limits.unit,
        ));
        frame.push('\n');
    }
    frame
}

/// cyclictest's `policy: ...: loadavg: ...` line.
fn policy_line(plan: &Plan) -> String {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    report::policy_line(plan.policy.name(), plan.other, loadavg.trim())
}

/// The text output: cyclictest's (the last frame, or the quiet summary, the
/// spikes, the histogram, the break), then the `#` lines it lacks.
fn print_text(
    args: &Args,
    plan: &Plan,
    results: &[ThreadResult],
    shared: &Shared,
    histfile: Option<File>,
    sysinfo: &SysInfo,
) -> anyhow::Result<()> {
    // Made whole, then written at once: see `output::print`.
    let mut out = Vec::new();
    if !args.quiet && !args.verbose {
        writeln!(out, "{}          \n", policy_line(plan))?;
    }
    // As cyclictest: quiet with a histogram prints the histogram only; -v
    // prints values instead of lines, unless quiet.
    let lines = if args.verbose {
        args.quiet && plan.limits.bound.is_none()
    } else {
        !args.quiet || plan.limits.bound.is_none()
    };
    if lines {
        for r in results {
            writeln!(
                out,
                "{}",
                report::thread_line(&r.plan, r.setup.tid, r.stats.summary(), plan.limits.unit)
            )?;
        }
    }
    if let Some(spikes) = &shared.spikes {
        let seen = spikes
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        report::write_spikes(&mut out, &seen.0, seen.1)?;
    }
    if plan.limits.bound.is_some() {
        match (histfile, &args.histfile) {
            (Some(mut file), Some(path)) => {
                report::write_histogram(&mut file, results, plan.all_column, args.smi)
                    .with_context(|| format!("--histfile {}: cannot write", path.display()))?
            }
            _ => report::write_histogram(&mut out, results, plan.all_column, args.smi)?,
        }
    }
    if let Some(break_trace) = &shared.break_trace {
        let hit = *break_trace
            .hit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        report::write_break(&mut out, results, hit)?;
    }
    writeln!(out, "# {}", sysinfo.line())?;
    writeln!(out, "{}", report::slack_line(results, args.least_slack))?;
    for r in results {
        writeln!(out, "{}", report::extra_line(r))?;
    }
    output::print(&String::from_utf8_lossy(&out))
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
