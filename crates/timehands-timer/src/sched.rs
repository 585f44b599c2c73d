//! Scheduling of the expiry threads: SCHED_FIFO for the hard one when the
//! process may have it, and a minimal timer slack.
//!
//! A hard timer is only as precise as the thread that expires it is quick to
//! run: under SCHED_OTHER it waits behind whatever else is runnable. So the
//! hard expiry thread asks for SCHED_FIFO; an unprivileged process (no
//! CAP_SYS_NICE, RLIMIT_RTPRIO too low) is refused, and the refusal is kept as
//! a [`Scheduling::Normal`] with the reason, for the program to report.

use std::fmt;

/// How an expiry thread is scheduled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scheduling {
    /// SCHED_FIFO at this priority.
    Fifo {
        /// The SCHED_FIFO priority (1..=99 on Linux).
        priority: i32,
    },
    /// The default policy (SCHED_OTHER), and why.
    Normal {
        /// Why the thread is not real-time: not asked, or refused and why.
        reason: String,
    },
}

impl fmt::Display for Scheduling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheduling::Fifo { priority } => write!(f, "SCHED_FIFO priority {priority}"),
            Scheduling::Normal { reason } => write!(f, "SCHED_OTHER ({reason})"),
        }
    }
}

/// Asks for SCHED_FIFO at `priority` for the calling thread (raising a soft
/// RLIMIT_RTPRIO below it where the hard one allows), and says what it got.
pub fn request_fifo(priority: i32) -> Scheduling {
    match timehands::sys::set_scheduling(timehands::sys::Policy::Fifo, priority) {
        Ok(()) => Scheduling::Fifo { priority },
        Err(refused) => Scheduling::Normal {
            reason: refused.to_string(),
        },
    }
}

/// Makes the calling thread fit to expire precise timers: a minimal timer
/// slack, and SCHED_FIFO at `priority` if one is given and allowed.
pub fn precise_thread(priority: Option<i32>) -> Scheduling {
    minimal_timer_slack();
    match priority {
        Some(p) => request_fifo(p),
        None => Scheduling::Normal {
            reason: "real-time priority not asked for".into(),
        },
    }
}

/// Sets the calling thread's timer slack to 1 ns, so that the kernel does
/// not defer its wake-ups by the default 50 µs to batch them.
pub fn minimal_timer_slack() {
    timehands::sys::set_minimal_timer_slack();
}

/// Sets the calling thread's nice value (on Linux nice values are per
/// thread), so that without real-time scheduling the fair scheduler still
/// favours the threads left at the default of 0.
pub(crate) fn lower_priority(nice: i32) {
    // SAFETY: gettid and setpriority take no pointers; a failure leaves the
    // thread at its old nice value, which is harmless.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}
