//! `timehands keeper`: one keeper of the clock for the machine. It keeps
//! the clock on the TSC, steered onto the kernel's, and publishes its hands
//! in a page that every process that reads the clock on this machine maps
//! and reads with loads (see `docs/keeper.md`, and `docs/page.md` for the
//! page's layout). Its scheduling is its unit's, chosen by whoever
//! installs it: nothing here sets a policy, a priority or a limit.

use std::path::PathBuf;

use anyhow::Context as _;

/// Flags of `timehands keeper`.
#[derive(clap::Args)]
pub struct Args {
    /// The page's file; readers find it there by default, or where
    /// TIMEHANDS_PAGE says.
    #[arg(long, default_value = "/run/timehands/page")]
    path: PathBuf,
    /// Stop after this many seconds (0: keep the clock until killed).
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    seconds: f64,
}

/// Keeps the clock and publishes it until killed (or for `--seconds`).
#[cfg(target_arch = "x86_64")]
pub fn run(args: &Args) -> anyhow::Result<()> {
    use std::time::{Duration, Instant};
    if !(args.seconds >= 0.0 && args.seconds.is_finite()) {
        anyhow::bail!(
            "--seconds {}: give a number of seconds, 0 or more",
            args.seconds
        );
    }
    let keeper = timehands::keeper::Keeper::create(&args.path)
        .with_context(|| format!("cannot make the page {}", args.path.display()))?;
    // Under a paravirtual clocksource the TSC waits for this check.
    timehands::check_across_cpus();
    println!("keeping the clock in {}", keeper.path().display());
    let until =
        (args.seconds > 0.0).then(|| Instant::now() + Duration::from_secs_f64(args.seconds));
    let mut said: Option<String> = None;
    while until.is_none_or(|until| Instant::now() < until) {
        keeper.sleep_until_due();
        let now = match keeper.publish() {
            Ok(()) => "publishing".to_string(),
            Err(not_yet) => format!("not publishing: {not_yet}"),
        };
        if said.as_ref() != Some(&now) {
            println!("{now}");
            said = Some(now);
        }
    }
    Ok(())
}

/// Refuses: the page's readers read the TSC.
#[cfg(not(target_arch = "x86_64"))]
pub fn run(_: &Args) -> anyhow::Result<()> {
    anyhow::bail!(
        "keeper needs x86_64 (its page's readers read the TSC); this is {}: readers here keep their own clocks",
        std::env::consts::ARCH
    )
}
