//! `timehands`: the measurement tools of the field in one command.
//!
//! Each subcommand is a module with an `Args` (its flags, parsed by clap) and a
//! `run` that prints to stdout and returns an error for anything the user can
//! fix. `main` prints that error on one line and exits non-zero; nothing here
//! panics on user input.

mod info;
mod latency;
mod load;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Measures clocks: what timehands runs on, what each clock costs, and how
/// well it keeps time.
#[derive(Parser)]
#[command(name = "timehands", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

const EXAMPLES: &str = "\
Examples:
  timehands info              the counter, its frequency and the trust verdicts
  timehands info --json       the same as one JSON document";

#[derive(Subcommand)]
enum Command {
    /// The counter, its frequency and where it came from, the trust verdicts,
    /// and the offset to the kernel's clock, without benchmarking.
    Info(info::Args),
    /// Wakeup latency as cyclictest measures it (same flags, line and
    /// histogram), plus missed periods, p50/p99/p99.9, the system and the
    /// timer slack.
    Latency(latency::Args),
    /// The timer stress of seed 001: N threads doing random sub-millisecond
    /// sleeps, until the duration or Ctrl-C.
    Load(load::Args),
}

fn main() -> ExitCode {
    let cli = parse();
    let result = match cli.command {
        Some(Command::Info(args)) => info::run(&args),
        Some(Command::Latency(args)) => latency::run(&args),
        Some(Command::Load(args)) => load::run(&args),
        None => info::run(&info::Args::default()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("timehands: {e:#}");
            ExitCode::FAILURE
        }
    }
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
                .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                .collect();
            eprintln!("timehands: {}", line.join(" "));
            std::process::exit(e.exit_code());
        }
    }
}
