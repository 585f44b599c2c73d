//! `timehands keeper`: one keeper of the clock for the machine. It keeps
//! the clock on the TSC, steered onto the kernel's, and publishes its hands
//! in a page that every process that reads the clock on this machine maps
//! and reads with loads (see `docs/keeper.md`, and `docs/page.md` for the
//! page's layout). Its scheduling is its unit's, chosen by whoever
//! installs it: nothing here sets a policy, a priority or a limit.

use std::path::PathBuf;

/// Flags of `timehands keeper`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  timehands keeper                               keep the clock in /run/timehands/page
  timehands keeper --path /tmp/th/page --seconds 10   a private page, for ten seconds

Readers find the page at /run/timehands/page, or where TIMEHANDS_PAGE
says; `timehands info` in a reader says whether its time comes from it.")]
pub struct Args {
    /// The page's file (its directory is made, mode 0755, if missing).
    #[arg(long, default_value = "/run/timehands/page")]
    pub path: PathBuf,
    /// Stop after this many seconds (0: keep the clock until killed).
    #[arg(long, default_value_t = 0.0, value_parser = seconds, value_name = "SECONDS")]
    pub seconds: f64,
}

/// A number of seconds, 0 or more.
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds, 0 or more")),
    }
}

/// Keeps the clock and publishes it until killed (or for `--seconds`),
/// saying whenever whether it publishes changes.
#[cfg(target_arch = "x86_64")]
pub fn run(args: &Args) -> anyhow::Result<()> {
    use crate::output;
    use anyhow::Context as _;
    use std::time::{Duration, Instant};
    let keeper = timehands::keeper::Keeper::create(&args.path)
        .with_context(|| format!("cannot keep the page {}", args.path.display()))?;
    // Under a paravirtual clocksource the TSC waits for this check.
    timehands::check_across_cpus();
    output::print(&format!(
        "keeping the clock in {}\n",
        keeper.path().display()
    ))?;
    let until =
        (args.seconds > 0.0).then(|| Instant::now() + Duration::from_secs_f64(args.seconds));
    keeper.keep(until, |keeping| output::print(&format!("{keeping}\n")))
}

/// Refuses: the page's readers read the TSC.
#[cfg(not(target_arch = "x86_64"))]
pub fn run(_: &Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "keeper needs x86_64 (its page's readers read the TSC); this is {}: readers here keep their own clocks",
        std::env::consts::ARCH
    )
}
