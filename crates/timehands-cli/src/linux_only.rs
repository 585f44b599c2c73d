//! `latency`, `load`, `signals` and `callers` on an OS other than Linux: each refuses in one line
//! and exits 2, the status of a check that cannot be made (as `tsc-sync`'s).
//!
//! `latency` is cyclictest: a SCHED_FIFO thread with its memory locked, woken
//! by an absolute `clock_nanosleep` or by a POSIX timer signalled to that one
//! thread (SIGEV_THREAD_ID), with the timer slack set, and it reports the
//! system from `/proc` and `/sys`. `load` is the storm of relative
//! `clock_nanosleep`s it is measured beside. Elsewhere some of these are
//! missing (FreeBSD has no timer slack, macOS no `clock_nanosleep` and no
//! SCHED_FIFO for a process to ask for, Windows none of them), so a port
//! would measure something else under the same name: the subcommands say so
//! instead.
//!
//! The stubs exist only off Linux; the words of the refusal are built by
//! [`refusal`], which the unit tests check on Linux too.

/// A subcommand that needs Linux.
#[derive(Clone, Copy, Debug)]
pub enum Subcommand {
    /// `timehands latency`.
    Latency,
    /// `timehands load`.
    Load,
    /// `timehands signals`.
    Signals,
    /// `timehands callers`.
    Callers,
    /// `timehands keeper`.
    Keeper,
}

/// The one line a subcommand that needs Linux prints on `os` (a name as
/// [`std::env::consts::OS`] gives it): what it needs, where it is, and the
/// remedy.
pub fn refusal(subcommand: Subcommand, os: &str) -> String {
    let (name, needs) = match subcommand {
        Subcommand::Latency => (
            "latency",
            "SCHED_FIFO, mlockall, clock_nanosleep and timers signalled to one thread",
        ),
        Subcommand::Load => (
            "load",
            "its sleeps are the clock_nanosleep timers latency is measured beside",
        ),
        Subcommand::Signals => (
            "signals",
            "its signals come from a POSIX timer, timer_create's, which macOS and Windows lack and which it is tested with on Linux alone",
        ),
        Subcommand::Callers => (
            "callers",
            "it reads each process's threads, their policies and its limits from /proc and RLIMIT_RTPRIO",
        ),
        Subcommand::Keeper => (
            "keeper",
            "its page lives in /run and its readers map it with mmap and check it against /proc's boot id",
        ),
    };
    format!("{name} needs Linux ({needs}); this is {os}: run it on a Linux machine")
}

/// Says [`refusal`] on stderr and exits 2.
#[cfg(not(target_os = "linux"))]
fn refuse(subcommand: Subcommand) -> ! {
    crate::say(&refusal(subcommand, std::env::consts::OS));
    // Nothing has been opened or buffered yet: the process can end here.
    std::process::exit(i32::from(crate::tsc_sync::CANNOT_CHECK))
}

/// The flags of a refused subcommand: whatever Linux's would be, taken and
/// ignored, so that the answer to `timehands latency -p 80` is the refusal
/// rather than a complaint about `-p`.
#[cfg(not(target_os = "linux"))]
#[derive(clap::Args)]
pub struct AnyArgs {
    #[arg(num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _ignored: Vec<std::ffi::OsString>,
}

/// A module in the place of a Linux-only subcommand's: its `Args` and a
/// `run` that refuses.
#[cfg(not(target_os = "linux"))]
macro_rules! stub {
    ($module:ident, $subcommand:ident) => {
        #[doc = concat!("`timehands ", stringify!($module), "`, which refuses here.")]
        pub mod $module {
            /// Any flags.
            pub type Args = super::AnyArgs;

            /// Refuses: this OS is not Linux.
            pub fn run(_: &Args) -> anyhow::Result<()> {
                super::refuse(super::Subcommand::$subcommand)
            }
        }
    };
}

#[cfg(not(target_os = "linux"))]
stub!(latency, Latency);
#[cfg(not(target_os = "linux"))]
stub!(load, Load);
#[cfg(not(target_os = "linux"))]
stub!(signals, Signals);
#[cfg(not(target_os = "linux"))]
stub!(callers, Callers);
#[cfg(not(target_os = "linux"))]
stub!(keeper, Keeper);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_subcommand_what_it_needs_the_os_and_the_remedy() {
        assert_eq!(
            refusal(Subcommand::Latency, "macos"),
            "latency needs Linux (SCHED_FIFO, mlockall, clock_nanosleep and timers signalled to one thread); this is macos: run it on a Linux machine"
        );
        assert_eq!(
            refusal(Subcommand::Load, "windows"),
            "load needs Linux (its sleeps are the clock_nanosleep timers latency is measured beside); this is windows: run it on a Linux machine"
        );
        assert_eq!(
            refusal(Subcommand::Signals, "freebsd"),
            "signals needs Linux (its signals come from a POSIX timer, timer_create's, which macOS and Windows lack and which it is tested with on Linux alone); this is freebsd: run it on a Linux machine"
        );
        assert_eq!(
            refusal(Subcommand::Callers, "macos"),
            "callers needs Linux (it reads each process's threads, their policies and its limits from /proc and RLIMIT_RTPRIO); this is macos: run it on a Linux machine"
        );
        assert_eq!(
            refusal(Subcommand::Keeper, "windows"),
            "keeper needs Linux (its page lives in /run and its readers map it with mmap and check it against /proc's boot id); this is windows: run it on a Linux machine"
        );
    }
}
