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

/// The facts `info` prints: the library's [`timehands::Info`], which
/// serializes as the JSON document.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Facts(timehands::Info);

impl Facts {
    /// The host clock's facts now, once the cross-CPU check of the TSC ran
    /// (a tool that says what the clock runs on asks for it: a guest on a
    /// paravirtual clocksource then reads the TSC). The first call starts
    /// the clock.
    pub fn gather() -> Facts {
        timehands::check_across_cpus();
        // A read first, so that the steering has a bracket to report.
        timehands::now();
        Facts(timehands::info())
    }

    /// Why timehands reads the kernel's clock instead of a counter, when it
    /// does.
    pub fn fallback(&self) -> Option<&str> {
        self.0.fallback.as_deref()
    }
}

impl fmt::Display for Facts {
    /// The facts as lines of text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = &self.0;
        writeln!(f, "counter      {}", info.counter)?;
        writeln!(
            f,
            "frequency    {} Hz ({})",
            info.frequency_hz, info.frequency_source
        )?;
        match info.frequency_uncertainty_ppb {
            Some(ppb) => writeln!(f, "uncertainty  {ppb} ppb")?,
            None => writeln!(f, "uncertainty  not measured yet")?,
        }
        writeln!(f, "correction   {} ppb", info.frequency_correction_ppb)?;
        if let Some(why) = &info.fallback {
            writeln!(f, "fallback     {why}")?;
        }
        writeln!(
            f,
            "windups      {} ({} by readers; {} reads stood at the promise)",
            info.windups, info.reader_windups, info.standing_reads
        )?;
        writeln!(
            f,
            "steerings    {} ({} changes of the kernel's rate followed)",
            info.steerings, info.rate_changes
        )?;
        for what in &info.refused {
            writeln!(f, "refused      {what}")?;
        }
        writeln!(f, "time from    {}", info.keeper)?;
        writeln!(
            f,
            "offset       {} ns ({} minus ours)",
            info.offset_ns,
            timehands::sys::KernelClock::Monotonic.name()
        )?;
        writeln!(f, "accuracy     {} ns", info.accuracy.as_nanos())?;
        match &info.realtime_bounds {
            Ok(b) => writeln!(
                f,
                "realtime     UTC within ±{} ns (kernel maxerror {} ns, estimated {} ns; ours {} ns), TAI − UTC {} s, leap second: {:?}",
                (b.latest - b.realtime).as_nanos(),
                b.kernel_max_error.as_nanos(),
                b.kernel_estimated_error.as_nanos(),
                b.accuracy.as_nanos(),
                b.tai_offset_s,
                b.leap,
            )?,
            Err(e) => writeln!(f, "realtime     no bounds: {e}")?,
        }
        writeln!(f, "verdicts")?;
        for v in &info.verdicts {
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
