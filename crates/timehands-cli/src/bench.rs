//! `timehands bench`: nanoseconds per call of every clock, ours and the
//! kernel's, in the rounds of OpenBSD's `clock-gettime-bench.c` (R rounds of N
//! calls; a round the kernel preempted is discarded and counted). `--raw`
//! keeps each clock's rounds for `timehands stat` or ministat.
//!
//! `--tail` counts the slow calls instead: of many calls back to back, those
//! whose reading is more than `--tail-above` ns after the one before it
//! (an interrupt, a preemption, a windup the read made), for each clock in
//! turn, blocks of a million calls apiece so that a noisy spell of the
//! machine lands on every clock alike; and each clock's count against the
//! kernel's monotonic clock's. Clocks that stand between ticks (the coarse
//! ones) have no calls to tell apart: they are left out.

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
    /// Count the slow calls instead of timing rounds (see the command's
    /// docs): `now()` against the kernel's monotonic clock unless `--clocks`
    /// names others.
    #[arg(long, conflicts_with = "raw")]
    pub tail: bool,
    /// Calls per clock with `--tail`.
    #[arg(long, value_name = "N", default_value_t = 50_000_000, value_parser = clap::value_parser!(u64).range(TAIL_BLOCK..=10_000_000_000))]
    pub tail_calls: u64,
    /// With `--tail`, a call is slow when its reading is more than this many
    /// nanoseconds after the one before.
    #[arg(long, value_name = "NS", default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub tail_above: u64,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Calls of one clock before the next clock's turn, with `--tail`.
const TAIL_BLOCK: u64 = 1_000_000;

/// One clock's slow calls, as `--tail` counts them.
#[derive(Serialize)]
struct Tail {
    clock: String,
    label: &'static str,
    calls: u64,
    slow: u64,
    /// Slow calls against the kernel's monotonic clock's, where it was run.
    ratio_to_kernel: Option<f64>,
}

/// Counts each clock's slow calls, in blocks taken in turn.
fn tail(clocks: &[Clock], calls: u64, above: u64) -> Vec<Tail> {
    let mut slow = vec![0u64; clocks.len()];
    let blocks = calls / TAIL_BLOCK;
    // Some 25 ns a call.
    let expected = std::time::Duration::from_nanos(25 * calls * clocks.len() as u64);
    let progress = crate::progress::bar("tail", blocks, expected);
    for _ in 0..blocks {
        for (clock, slow) in clocks.iter().zip(&mut slow) {
            *slow += clock.slow_calls(TAIL_BLOCK, above);
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    let kernel = clocks
        .iter()
        .position(|c| *c == Clock::KernelMonotonic)
        .map(|i| slow[i]);
    clocks
        .iter()
        .zip(slow)
        .map(|(clock, slow)| Tail {
            clock: clock.key(),
            label: clock.label(),
            calls: blocks * TAIL_BLOCK,
            slow,
            ratio_to_kernel: kernel.map(|k| slow as f64 / k.max(1) as f64),
        })
        .collect()
}

/// `--tail`: the slow calls of `args`' clocks.
fn run_tail(args: &Args) -> anyhow::Result<()> {
    let asked = if args.clocks.is_empty() {
        vec![Clock::Now, Clock::KernelMonotonic]
    } else {
        clocks::chosen(&args.clocks)
    };
    let (clocks, coarse): (Vec<Clock>, Vec<Clock>) =
        asked.into_iter().partition(|c| !c.is_coarse());
    if clocks.is_empty() {
        anyhow::bail!(
            "--tail: {} stand between ticks, so no call of theirs can be told slow: name a precise clock",
            coarse
                .iter()
                .map(|c| c.key())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let tails = tail(&clocks, args.tail_calls, args.tail_above);
    output::print_json_or_text(args.json, &tails, |tails| {
        let mut text = format!(
            "calls whose reading is more than {} ns after the one before, of {} per clock\n",
            args.tail_above,
            args.tail_calls / TAIL_BLOCK * TAIL_BLOCK
        );
        for t in tails {
            let _ = write!(text, "  {:<36} {:>10}", t.label, t.slow);
            if let Some(ratio) = t.ratio_to_kernel {
                let _ = write!(text, "   {ratio:.2}x the kernel's");
            }
            text.push('\n');
        }
        text
    })
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
    if args.tail {
        return run_tail(args);
    }
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
