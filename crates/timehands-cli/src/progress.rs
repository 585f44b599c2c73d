//! Progress on stderr, for runs long enough to wonder about.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Runs expected to be shorter than this show no progress.
const WORTH_SHOWING: Duration = Duration::from_secs(2);

/// A bar of `steps` steps named `what`, drawn on stderr only when stderr is
/// a terminal and the run is expected to take `expected` of at least two
/// seconds; otherwise a hidden bar, so that scripts and pipes see nothing.
pub fn bar(what: &'static str, steps: u64, expected: Duration) -> ProgressBar {
    if expected < WORTH_SHOWING || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({eta} left)")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr())
        .with_style(style)
        .with_message(what)
}
