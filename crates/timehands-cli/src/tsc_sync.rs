//! `timehands tsc-sync`: bounds on the TSC offset of every pair of CPUs, from
//! messages handed back and forth between two pinned threads
//! ([`timehands::diagnostics::tsc_sync`] explains the model), and a verdict: synchronized
//! when every pair's bounds contain 0. The exit status carries the verdict,
//! so that a script can use it as a check.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde::Serialize;

use crate::output;

/// Flags of `timehands tsc-sync`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  timehands tsc-sync                      every pair of the CPUs this process may use
  timehands tsc-sync --cpus 0,3 --handoffs 100000
  timehands tsc-sync --json | jq .synchronized

Exit status: 0 when every pair's bounds contain 0, 1 when some pair is apart,
2 when the check cannot be made (a bad flag, a CPU this process may not use).")]
pub struct Args {
    /// Hand-offs per pair (half each way): more give tighter bounds.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(2..=100_000_000), allow_negative_numbers = true)]
    pub handoffs: u64,
    /// Only the pairs of these CPUs, separated by commas (default: every CPU
    /// this process may run on).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        allow_negative_numbers = true
    )]
    pub cpus: Vec<usize>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One pair's bounds, as JSON names them.
#[derive(Serialize)]
struct Pair {
    cpus: (usize, usize),
    lo_cycles: i64,
    hi_cycles: i64,
    lo_ns: f64,
    hi_ns: f64,
    min_round_trip_cycles: u64,
    min_round_trip_ns: f64,
    handoffs: u64,
    backward: u64,
    synchronized: bool,
}

/// The run, as JSON names it.
#[derive(Serialize)]
struct Run {
    frequency_hz: u64,
    handoffs: u64,
    synchronized: bool,
    pairs: Vec<Pair>,
}

/// The exit status of a check that could not be made.
pub const CANNOT_CHECK: u8 = 2;

/// Runs `timehands tsc-sync`: success when every pair agrees, 1 when some
/// pair is apart. An error means the check could not be made
/// ([`CANNOT_CHECK`]).
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let run = measure(args)?;
    output::print_json_or_text(args.json, &run, Run::text)?;
    Ok(run.exit_code())
}

#[cfg(not(target_arch = "x86_64"))]
fn measure(_: &Args) -> anyhow::Result<Run> {
    anyhow::bail!(
        "tsc-sync measures the x86_64 TSC: this is {} (on {}); run it on an x86_64 machine",
        std::env::consts::ARCH,
        std::env::consts::OS
    )
}

#[cfg(target_arch = "x86_64")]
fn measure(args: &Args) -> anyhow::Result<Run> {
    use anyhow::{Context, bail};
    use timehands::diagnostics::tsc_sync::{self, PairBounds};

    let frequency_hz = tsc_frequency()?;
    let bounds: Vec<PairBounds> = if args.cpus.is_empty() {
        tsc_sync::measure_all(args.handoffs, frequency_hz)?.pairs
    } else {
        let cpus = &args.cpus;
        if cpus.len() < 2 {
            bail!(
                "--cpus {}: give at least two CPUs, such as --cpus 0,1",
                cpus[0]
            );
        }
        // Checked before any pair is measured, to fail at once.
        let twice = cpus
            .iter()
            .enumerate()
            .find_map(|(i, cpu)| cpus[..i].contains(cpu).then_some(cpu));
        if let Some(cpu) = twice {
            bail!("--cpus {}: CPU {cpu} is given twice", list(cpus));
        }
        let mut pairs = Vec::new();
        for (i, &a) in cpus.iter().enumerate() {
            for &b in &cpus[i + 1..] {
                let pair = tsc_sync::measure_pair(a, b, args.handoffs, frequency_hz)
                    .with_context(|| format!("--cpus {}", list(cpus)))?;
                pairs.push(pair);
            }
        }
        pairs
    };
    let pairs: Vec<Pair> = bounds
        .into_iter()
        .map(|b| Pair {
            synchronized: b.synchronized(),
            cpus: b.cpus,
            lo_cycles: b.lo,
            hi_cycles: b.hi,
            lo_ns: b.lo_ns,
            hi_ns: b.hi_ns,
            min_round_trip_cycles: b.min_round_trip,
            min_round_trip_ns: b.min_round_trip_ns,
            handoffs: b.handoffs,
            backward: b.backward,
        })
        .collect();
    Ok(Run {
        frequency_hz,
        handoffs: args.handoffs,
        synchronized: pairs.iter().all(|p| p.synchronized),
        pairs,
    })
}

#[cfg(target_arch = "x86_64")]
fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The TSC's frequency, to express counts in ns: timehands' refined one when
/// its clock runs on the TSC, else the one CPUID states.
#[cfg(target_arch = "x86_64")]
fn tsc_frequency() -> anyhow::Result<u64> {
    timehands::now();
    let info = timehands::info();
    if info.counter == timehands::CounterKind::Tsc {
        return Ok(info.frequency_hz);
    }
    timehands::diagnostics::hw::TscFacts::read()
        .stated_frequency()
        .map(|stated| stated.hz)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the TSC's frequency is unknown: timehands runs on {} and CPUID states none",
                info.counter
            )
        })
}

impl Run {
    /// 0 when every pair agrees (or there is no pair), 1 when some pair is
    /// apart.
    fn exit_code(&self) -> ExitCode {
        if self.synchronized {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    fn text(&self) -> String {
        let mut text = format!(
            "TSC offset of the second CPU minus the first, {} hand-offs per pair, TSC at {} Hz\n",
            self.handoffs, self.frequency_hz
        );
        let _ = writeln!(
            text,
            "{:<9} {:>25} {:>25} {:>19} {:>9}  synchronized",
            "cpus", "bounds (cycles)", "bounds (ns)", "min round trip", "backward"
        );
        for p in &self.pairs {
            let _ = writeln!(
                text,
                "{:<9} {:>25} {:>25} {:>19} {:>9}  {}",
                format!("{}-{}", p.cpus.0, p.cpus.1),
                format!("[{}, {}]", p.lo_cycles, p.hi_cycles),
                format!("[{:.1}, {:.1}]", p.lo_ns, p.hi_ns),
                format!(
                    "{} cy / {:.1} ns",
                    p.min_round_trip_cycles, p.min_round_trip_ns
                ),
                p.backward,
                if p.synchronized { "yes" } else { "NO" }
            );
        }
        let verdict = if self.pairs.is_empty() {
            "nothing to compare: this process may run on one CPU only"
        } else if self.synchronized {
            "synchronized: every pair's bounds contain 0"
        } else {
            "NOT synchronized: some pair's bounds exclude 0"
        };
        let _ = writeln!(text, "verdict: {verdict}");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(lo_cycles: i64, hi_cycles: i64) -> Pair {
        Pair {
            cpus: (0, 1),
            lo_cycles,
            hi_cycles,
            lo_ns: lo_cycles as f64,
            hi_ns: hi_cycles as f64,
            min_round_trip_cycles: 100,
            min_round_trip_ns: 100.0,
            handoffs: 2,
            backward: 0,
            synchronized: lo_cycles <= 0 && 0 <= hi_cycles,
        }
    }

    fn run_of(pairs: Vec<Pair>) -> Run {
        Run {
            frequency_hz: 1_000_000_000,
            handoffs: 2,
            synchronized: pairs.iter().all(|p| p.synchronized),
            pairs,
        }
    }

    #[test]
    fn a_pair_apart_makes_the_exit_status_1() {
        let apart = run_of(vec![pair(-5, 5), pair(20, 40)]);
        assert_eq!(apart.exit_code(), ExitCode::FAILURE);
        assert!(apart.text().contains("verdict: NOT synchronized"));
    }

    #[test]
    fn pairs_that_agree_or_no_pair_make_it_0() {
        assert_eq!(
            run_of(vec![pair(-5, 5), pair(0, 3)]).exit_code(),
            ExitCode::SUCCESS
        );
        assert_eq!(run_of(Vec::new()).exit_code(), ExitCode::SUCCESS);
    }
}
