//! `timehands info`: what the clock runs on and how well it is doing, from
//! [`timehands::info`], without benchmarking.

use std::fmt;

use serde::Serialize;

use crate::output;

/// Flags of `timehands info`.
#[derive(clap::Args, Default)]
#[command(after_help = "Examples:\n  timehands info\n  timehands info --json | jq .counter")]
pub struct Args {
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The facts `info` prints, as JSON names them.
#[derive(Serialize)]
pub struct Facts {
    /// The counter the clock reads: "TSC", "CNTVCT_EL0" or "CLOCK_MONOTONIC".
    pub counter: String,
    /// Its frequency, as refined so far.
    pub frequency_hz: u64,
    /// Where the first frequency came from.
    pub frequency_source: String,
    /// How sure the frequency is; `None` while it is only stated.
    pub frequency_uncertainty_ppb: Option<u64>,
    /// How far the steering has moved the frequency from the first one.
    pub frequency_correction_ppb: i64,
    /// The checks that chose the counter.
    pub verdicts: Vec<Verdict>,
    /// Why the kernel's clock is read instead of a hardware counter.
    pub fallback: Option<String>,
    /// Timehands published so far.
    pub windups: u64,
    /// The last measured offset, CLOCK_MONOTONIC minus ours.
    pub offset_ns: i64,
    /// The current bound on the error against CLOCK_MONOTONIC.
    pub accuracy_ns: u128,
}

/// One trust check, as JSON names it.
#[derive(Serialize)]
pub struct Verdict {
    /// What was checked.
    pub check: String,
    /// Whether the counter passed.
    pub passed: bool,
    /// What was found.
    pub detail: String,
}

impl Facts {
    /// The host clock's facts now. The first call starts the clock.
    pub fn gather() -> Facts {
        // A read first, so that the steering has a bracket to report.
        timehands::now();
        let info = timehands::info();
        Facts {
            counter: info.counter,
            frequency_hz: info.frequency_hz,
            frequency_source: info.frequency_source,
            frequency_uncertainty_ppb: info.frequency_uncertainty_ppb,
            frequency_correction_ppb: info.frequency_correction_ppb,
            verdicts: info
                .verdicts
                .into_iter()
                .map(|v| Verdict {
                    check: v.check.to_string(),
                    passed: v.passed,
                    detail: v.detail,
                })
                .collect(),
            fallback: info.fallback,
            windups: info.windups,
            offset_ns: info.offset_ns,
            accuracy_ns: info.accuracy.as_nanos(),
        }
    }
}

impl fmt::Display for Facts {
    /// The facts as lines of text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "counter      {}", self.counter)?;
        writeln!(
            f,
            "frequency    {} Hz ({})",
            self.frequency_hz, self.frequency_source
        )?;
        match self.frequency_uncertainty_ppb {
            Some(ppb) => writeln!(f, "uncertainty  {ppb} ppb")?,
            None => writeln!(f, "uncertainty  not measured yet")?,
        }
        writeln!(f, "correction   {} ppb", self.frequency_correction_ppb)?;
        if let Some(why) = &self.fallback {
            writeln!(f, "fallback     {why}")?;
        }
        writeln!(f, "windups      {}", self.windups)?;
        writeln!(
            f,
            "offset       {} ns (CLOCK_MONOTONIC minus ours)",
            self.offset_ns
        )?;
        writeln!(f, "accuracy     {} ns", self.accuracy_ns)?;
        writeln!(f, "verdicts")?;
        for v in &self.verdicts {
            let mark = if v.passed { "pass" } else { "FAIL" };
            writeln!(f, "  {mark}  {:<24} {}", v.check, v.detail)?;
        }
        Ok(())
    }
}

/// Runs `timehands info`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let facts = Facts::gather();
    output::print_json_or_text(args.json, &facts, Facts::to_string)
}
