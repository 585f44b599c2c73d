//! `timehands bench`: nanoseconds per call of every clock, ours and the
//! kernel's, in the rounds of OpenBSD's `clock-gettime-bench.c` (R rounds of N
//! calls; a round the kernel preempted is discarded and counted). `--raw`
//! keeps each clock's rounds for `timehands stat` or ministat.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::clocks::{self, Clock};
use crate::output::{self, OutFile};
use crate::rounds::{self, Cost, Plan};

/// Flags of `timehands bench`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  timehands bench                                   every clock, 1000 rounds of 10000 calls
  timehands bench --clocks now,kernel-monotonic --rounds 100
  timehands bench --raw runs/ && timehands stat runs/now.txt runs/kernel-monotonic.txt
  timehands bench --json | jq '.clocks[] | {clock, median: .ns_per_call.median}'")]
pub struct Args {
    /// Rounds kept per clock.
    #[arg(short = 'r', long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=rounds::MAX_ROUNDS), allow_negative_numbers = true)]
    pub rounds: u32,
    /// Calls per round.
    #[arg(short = 'n', long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=rounds::MAX_CALLS), allow_negative_numbers = true)]
    pub calls: u64,
    /// The clocks to measure, separated by commas (default: all, less the
    /// kernel clocks this OS reads as another).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub clocks: Vec<Clock>,
    /// Write each clock's rounds into DIR/CLOCK.txt, ns per call, one round a
    /// line: the format `timehands stat` and ministat read.
    #[arg(long, value_name = "DIR")]
    pub raw: Option<PathBuf>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The run, as JSON names it.
#[derive(Serialize)]
struct Bench {
    rounds: u32,
    calls: u64,
    clocks: Vec<Cost>,
}

/// Runs `timehands bench`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let clocks = if args.clocks.is_empty() {
        Clock::every_here()
    } else {
        clocks::chosen(&args.clocks)
    };
    let raw_files = match &args.raw {
        Some(dir) => {
            output::create_dir(dir)?;
            clocks
                .iter()
                .map(|c| OutFile::create(&dir.join(format!("{}.txt", c.key()))))
                .collect::<anyhow::Result<Vec<_>>>()?
        }
        None => Vec::new(),
    };
    let plan = Plan {
        rounds: args.rounds as usize,
        calls: args.calls,
        budget: None,
    };
    let measured = rounds::measure(&clocks, plan)?;
    for (file, rounds) in raw_files.iter().zip(&measured) {
        let mut lines = String::new();
        for ns in &rounds.ns_per_call {
            let _ = writeln!(lines, "{ns}");
        }
        file.write(&lines)?;
    }
    let bench = Bench {
        rounds: args.rounds,
        calls: args.calls,
        clocks: measured.iter().filter_map(|r| r.cost(args.calls)).collect(),
    };
    output::print_json_or_text(args.json, &bench, |bench| {
        format!(
            "{} rounds of {} calls per clock; {}\n{}",
            bench.rounds,
            bench.calls,
            rounds::KEPT,
            rounds::table(&bench.clocks)
        )
    })
}
