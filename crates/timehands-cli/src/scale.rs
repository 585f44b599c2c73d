//! `timehands scale`: how reads per second grow with the threads reading.
//!
//! For 1..N threads, every thread reads one clock back to back for a while;
//! each thread's reads per second, their spread (box-plot figures) and their
//! sum are reported per clock. The four clocks are the two that write no
//! shared memory (timehands' `now()` and the kernel's monotonic clock, on
//! Linux CLOCK_MONOTONIC through the vDSO), which should scale linearly with
//! cores, and the two designs that cannot: a clock read under a global mutex
//! (as RTEMS reads its time of day under one lock), and a clock that makes every reading at
//! least the last one handed out through one shared atomic (a "last value"
//! scheme, which bounces one cache line between every reader).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::ValueEnum;
use serde::Serialize;

use crate::clocks::{self, Clock};
use crate::output::{self, OutFile};
use crate::plot::{self, Chart, Series};
use crate::progress;
use crate::summary::Summary;

/// Flags of `timehands scale`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  timehands scale                         1 to every CPU's threads, 200 ms a step
  timehands scale --threads 4 --step 500 --out scale.svg
  timehands scale --json | jq '.steps[] | {clock, threads, sum_per_s}'")]
pub struct Args {
    /// Up to this many threads (default: the CPUs this process may use).
    #[arg(short = 't', long, value_parser = clap::value_parser!(u32).range(1..=4096), allow_negative_numbers = true)]
    pub threads: Option<u32>,
    /// How long each step (one clock, one thread count) reads, in ms (at
    /// most an hour).
    #[arg(short = 's', long, value_name = "MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=3_600_000), allow_negative_numbers = true)]
    pub step: u64,
    /// The clocks, separated by commas (default: all four).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub clocks: Vec<Shared>,
    /// Also write an SVG plot of reads per second against threads to FILE.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A clock as threads share it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shared {
    /// `timehands::now()`.
    Timehands,
    /// The kernel's monotonic clock: CLOCK_MONOTONIC through the vDSO on
    /// Linux, the OS's own elsewhere (the name is Linux's).
    Vdso,
    /// `timehands::now()` read while holding one global mutex.
    Mutex,
    /// `timehands::now()` made at least the last value handed out, through a
    /// `fetch_max` on one shared atomic.
    LastValue,
}

impl Shared {
    fn label(self) -> &'static str {
        match self {
            Shared::Timehands => "timehands now()",
            Shared::Vdso if cfg!(target_os = "linux") => "vDSO CLOCK_MONOTONIC",
            Shared::Vdso => Clock::KernelMonotonic.label(),
            Shared::Mutex => "mutex-protected now()",
            Shared::LastValue => "shared-atomic last value",
        }
    }
}

/// The state the mutex and last-value clocks share between threads.
#[derive(Default)]
struct SharedState {
    lock: Mutex<()>,
    last: timehands::AtomicInstant,
}

/// Reads checked between looks at the stop flag: enough that the look costs
/// nothing, few enough (some µs) that a step ends on time.
const BATCH: u64 = 256;

/// One clock at one thread count.
#[derive(Serialize)]
struct Step {
    clock: Shared,
    threads: usize,
    /// The threads' reads per second, summed.
    sum_per_s: f64,
    /// The spread of the threads' reads per second.
    per_thread_per_s: Summary,
    /// The part of the step the threads were on a CPU, on average (their
    /// CPU time over the time they ran): below 1 when other programs (or the
    /// readers themselves, more threads than CPUs) took CPU time from them,
    /// or when they slept waiting for the mutex.
    cpu_share: f64,
}

/// What one reading thread did.
struct Count {
    /// Reads per second of the time it ran.
    per_s: f64,
    /// Its CPU time over the time it ran.
    cpu_share: f64,
}

/// The run, as JSON names it.
#[derive(Serialize)]
struct Run {
    step_ms: u64,
    steps: Vec<Step>,
}

/// Runs `timehands scale`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let out = args.out.as_deref().map(OutFile::create).transpose()?;
    let max_threads = match args.threads {
        Some(n) => n as usize,
        None => thread::available_parallelism().map_or(1, usize::from),
    };
    let clocks = clocks::chosen(&args.clocks);
    let step = Duration::from_millis(args.step);
    let steps = (clocks.len() * max_threads) as u64;
    let progress = progress::bar("scale", steps, step.saturating_mul(steps as u32));
    // The clock starts before any thread counts.
    timehands::now();
    let mut run = Run {
        step_ms: args.step,
        steps: Vec::new(),
    };
    for threads in 1..=max_threads {
        for &clock in &clocks {
            let counts = read_in_threads(clock, threads, step)?;
            let rates: Vec<f64> = counts.iter().map(|c| c.per_s).collect();
            let per_thread_per_s = Summary::of(&rates).context("no thread reported")?;
            let cpu_share = counts.iter().map(|c| c.cpu_share).sum::<f64>() / threads as f64;
            run.steps.push(Step {
                clock,
                threads,
                sum_per_s: rates.iter().sum(),
                cpu_share,
                per_thread_per_s,
            });
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    output::print_json_or_text(args.json, &run, Run::text)?;
    if let Some(file) = out {
        file.write(&run.plot(&clocks)?)?;
    }
    Ok(())
}

/// What each of `threads` threads reading `clock` for `step` did.
fn read_in_threads(clock: Shared, threads: usize, step: Duration) -> anyhow::Result<Vec<Count>> {
    let state = SharedState::default();
    let stop = AtomicBool::new(false);
    // The readers start together, once all of them are there.
    let go = AtomicBool::new(false);
    thread::scope(|scope| {
        let readers = (0..threads)
            .map(|i| {
                thread::Builder::new()
                    .name(format!("scale-{i}"))
                    .spawn_scoped(scope, || {
                        while !go.load(Ordering::Acquire) {
                            thread::yield_now();
                        }
                        match clock {
                            Shared::Timehands => reads_per_s(&stop, timehands::now),
                            Shared::Vdso => reads_per_s(&stop, || Clock::KernelMonotonic.read_ns()),
                            Shared::Mutex => reads_per_s(&stop, || {
                                let _held = state.lock.lock().unwrap_or_else(|e| e.into_inner());
                                timehands::now()
                            }),
                            Shared::LastValue => reads_per_s(&stop, || {
                                let now = timehands::now();
                                now.max(state.last.fetch_max(now, Ordering::AcqRel))
                            }),
                        }
                    })
                    .context("cannot start a reading thread")
            })
            .collect::<anyhow::Result<Vec<_>>>();
        // A failed spawn still lets the started threads go, and stops them
        // at once, so that the scope can join them.
        if readers.is_ok() {
            go.store(true, Ordering::Release);
            thread::sleep(step);
        }
        stop.store(true, Ordering::Relaxed);
        go.store(true, Ordering::Release);
        let readers = readers?;
        Ok(readers
            .into_iter()
            .map(|r| {
                r.join().unwrap_or(Count {
                    per_s: 0.0,
                    cpu_share: 0.0,
                })
            })
            .collect())
    })
}

/// Reads `read` back to back until `stop`, and counts.
fn reads_per_s<T>(stop: &AtomicBool, read: impl Fn() -> T) -> Count {
    let began = Instant::now();
    let cpu_began = clocks::thread_cpu_time();
    let mut reads = 0u64;
    // At least one batch, so that a thread scheduled only after the step
    // ended still measures its rate rather than reporting none.
    loop {
        for _ in 0..BATCH {
            std::hint::black_box(read());
        }
        reads += BATCH;
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let ran = began.elapsed().as_secs_f64();
    let on_cpu = clocks::thread_cpu_time()
        .saturating_sub(cpu_began)
        .as_secs_f64();
    Count {
        per_s: reads as f64 / ran,
        cpu_share: (on_cpu / ran).min(1.0),
    }
}

impl Run {
    fn text(&self) -> String {
        let mut text = format!(
            "Reads per second (millions), {} ms per step; per thread: min q1 median q3 max; cpu: the readers' share of a CPU\n",
            self.step_ms
        );
        let _ = writeln!(
            text,
            "{:<26} {:>7} {:>9}   {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}",
            "clock", "threads", "sum", "min", "q1", "median", "q3", "max", "cpu"
        );
        for s in &self.steps {
            let p = &s.per_thread_per_s;
            let _ = writeln!(
                text,
                "{:<26} {:>7} {:>9.2}   {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>5.0}%",
                s.clock.label(),
                s.threads,
                s.sum_per_s / 1e6,
                p.min / 1e6,
                p.q1 / 1e6,
                p.median / 1e6,
                p.q3 / 1e6,
                p.max / 1e6,
                s.cpu_share * 100.0
            );
        }
        text
    }

    /// The sum and the median thread against the number of threads.
    fn plot(&self, clocks: &[Shared]) -> anyhow::Result<String> {
        let series = |figure: fn(&Step) -> f64| -> Vec<Series> {
            clocks
                .iter()
                .map(|&clock| Series {
                    name: clock.label().to_string(),
                    points: self
                        .steps
                        .iter()
                        .filter(|s| s.clock == clock)
                        .map(|s| (s.threads as f64, figure(s) / 1e6))
                        .collect(),
                })
                .collect()
        };
        plot::lines(&[
            Chart {
                title: "Reads per second, all threads".into(),
                x: "threads".into(),
                whole_x: true,
                y: "million reads/s (sum)".into(),
                series: series(|s| s.sum_per_s),
            },
            Chart {
                title: "Reads per second, the median thread".into(),
                x: "threads".into(),
                whole_x: true,
                y: "million reads/s per thread".into(),
                series: series(|s| s.per_thread_per_s.median),
            },
        ])
    }
}
