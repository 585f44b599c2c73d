//! `timehands`: the measurement tools of the field in one command.
//!
//! Each subcommand is a module with an `Args` (its flags, parsed by clap) and a
//! `run` that prints to stdout and returns an error for anything the user can
//! fix. `main` prints that error on one line and exits non-zero; nothing here
//! panics on user input.

mod bench;
mod bounds;
mod bracket;
mod clocks;
mod discipline;
mod info;
mod interrupt;
// callers, latency, load and signals need Linux (see `linux_only`): elsewhere
// each is a stub that refuses in one line, so that the rest of the command
// builds anywhere.
#[cfg(target_os = "linux")]
mod callers;
#[cfg(target_os = "linux")]
mod keeper;
#[cfg(target_os = "linux")]
mod latency;
#[cfg(any(not(target_os = "linux"), test))]
mod linux_only;
#[cfg(target_os = "linux")]
mod load;
#[cfg(target_os = "linux")]
mod signals;
#[cfg(not(target_os = "linux"))]
use linux_only::{callers, keeper, latency, load, signals};
mod output;
mod plot;
mod progress;
mod report;
mod rounds;
mod scale;
mod stat;
mod summary;
mod timers;
mod track;
mod tsc_sync;
mod verdict;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Measures clocks: what timehands runs on, what each clock costs, and how
/// well it keeps time.
#[derive(Parser)]
#[command(name = "timehands", version, after_help = EXAMPLES)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `report` runs with these flags.
    #[command(flatten)]
    report: report::Args,
}

const EXAMPLES: &str = "\
Examples:
  timehands                   the report: the facts, every clock's cost and accuracy
  timehands bench             ns per call of every clock, in rounds (--raw for stat)
  timehands stat a.txt b.txt  ministat: is b different from a, at 95% confidence?
  timehands scale             reads per second for 1..N threads
  timehands tsc-sync          bounds on every CPU pair's TSC offset, and a verdict
  timehands track -D 10       our clock's offset and rate against the kernel's
  timehands latency -p 80 -l 10000 -q   wakeup latency, as cyclictest measures it (Linux)
  timehands load -t 6 -D 60   six threads of random short sleeps, to run beside latency (Linux)
  timehands timers            hard-timer lateness under a soft-timer storm
  timehands info              the counter, its frequency and the trust verdicts
  timehands info --json       the same as one JSON document
  timehands discipline        PPS and NTP discipline in simulation, beside a hardpps model
  timehands signals           every clock read in SIGPROF handlers: processes that hang (Linux)
  timehands callers           the clock as each kind of reading thread finds it (Linux)
  timehands keeper            keep the clock for the machine in /run/timehands/page (Linux)";

#[derive(Subcommand)]
enum Command {
    /// The counter, its frequency and where it came from, the trust verdicts,
    /// and the offset to the kernel's clock, without benchmarking.
    Info(info::Args),
    /// The facts of `info`, then every clock's cost (ns per call) and the
    /// offset of each of ours from the kernel's clock of the same name.
    Report(report::Args),
    /// Nanoseconds per call of every clock, in rounds; preempted rounds are
    /// discarded; raw rounds for `stat`.
    Bench(bench::Args),
    /// Reads per second for 1..N threads: timehands, the vDSO, a clock behind
    /// a mutex and a clock that bounces one cache line.
    Scale(scale::Args),
    /// Bounds on the TSC offset of every pair of CPUs, and a verdict.
    TscSync(tsc_sync::Args),
    /// Our clock's offset and frequency error against the kernel's, over time.
    Track(track::Args),
    /// ministat: compare data sets (one number a line) with Student's t, with
    /// the same flags, layout and numbers as FreeBSD's ministat.
    Stat(stat::Args),
    /// Hard-timer lateness (p50, p99, max) under a storm of soft timers: the
    /// timehands timer service against one naive queue, in the same run.
    Timers(timers::Args),
    /// Wakeup latency as cyclictest measures it (same flags, line and
    /// histogram), plus missed periods, p50/p99/p99.9, the system and the
    /// timer slack. Linux only.
    Latency(Box<latency::Args>),
    /// A timer stress: N threads doing random sub-millisecond sleeps, until
    /// the duration or Ctrl-C. Linux only.
    Load(load::Args),
    /// The engine's PPS discipline and NTP control in simulation: each
    /// scenario's figures beside a model of hardpps and the physical limit.
    Discipline(discipline::Args),
    /// Every clock read in SIGPROF handlers under a POSIX timer, in
    /// processes that allocate and read: how many hang (Linux).
    Signals(signals::Args),
    /// The clock as each kind of thread that reads it finds it, in a
    /// process each: cost, stated bound, steerings, and what the library
    /// took of the process (Linux).
    Callers(callers::Args),
    /// Bounds on UTC, live: the earliest and the latest the true time can
    /// be, from chronyd, ClockBound or the kernel, with ClockBound's own
    /// beside them where its daemon runs; --bench: their costs.
    Bounds(bounds::Args),
    /// One keeper for the machine: keeps the clock and publishes it in a
    /// page every process here reads with loads (Linux, x86_64).
    Keeper(keeper::Args),
}

fn main() -> ExitCode {
    let cli = parse();
    let result = match cli.command {
        Some(Command::Info(args)) => info::run(&args),
        Some(Command::Report(args)) => report::run(&args),
        Some(Command::Bench(args)) => bench::run(&args),
        Some(Command::Stat(args)) => stat::run(&args),
        Some(Command::Scale(args)) => scale::run(&args),
        Some(Command::TscSync(args)) => {
            return tsc_sync::run(&args)
                .unwrap_or_else(|e| fail(&e, ExitCode::from(tsc_sync::CANNOT_CHECK)));
        }
        Some(Command::Track(args)) => track::run(&args),
        Some(Command::Timers(args)) => timers::run(&args),
        Some(Command::Latency(args)) => latency::run(&args),
        Some(Command::Load(args)) => load::run(&args),
        Some(Command::Discipline(args)) => discipline::run(&args),
        Some(Command::Signals(args)) => signals::run(&args),
        Some(Command::Callers(args)) => callers::run(&args),
        Some(Command::Bounds(args)) => bounds::run(&args),
        Some(Command::Keeper(args)) => keeper::run(&args),
        None => report::run(&cli.report),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, ExitCode::FAILURE),
    }
}

/// Prints `error` on one line and returns `status`.
fn fail(error: &anyhow::Error, status: ExitCode) -> ExitCode {
    say(&format!("{error:#}"));
    status
}

/// Parses the command line; a bad one gets clap's error folded onto one line
/// (help and version print as clap prints them).
fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let text = e.to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                // The usage and the pointer to --help repeat what --help says.
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("Usage:")
                        && !l.starts_with("For more information")
                })
                .collect();
            say(&line.join(" "));
            std::process::exit(e.exit_code());
        }
    }
}

/// Prints the one line of an error on stderr; a stderr that cannot be
/// written leaves the exit status to tell (where `eprintln!` would panic).
fn say(error: &str) {
    let _ = writeln!(std::io::stderr(), "timehands: {error}");
}
