//! Scheduling of the expiry threads: SCHED_FIFO for the hard one when the
//! process may have it, a minimal timer slack, and a higher nice value for
//! the soft workers where it may not.
//!
//! A hard timer is only as precise as the thread that expires it is quick to
//! run: under the default policy it waits behind whatever else is runnable.
//! So the hard expiry thread asks for SCHED_FIFO; a refusal is kept as a
//! [`Scheduling::Normal`] with the reason, for the program to report. Linux
//! refuses an unprivileged process (no CAP_SYS_NICE, RLIMIT_RTPRIO too low);
//! an OS without a real-time policy refuses every process, with a reason
//! that names it.
//!
//! Every call into timehands' OS layer is made here.

use std::fmt;

/// How an expiry thread is scheduled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scheduling {
    /// SCHED_FIFO at this priority.
    Fifo {
        /// The SCHED_FIFO priority (1..=99 on Linux).
        priority: i32,
    },
    /// The default policy (SCHED_OTHER on POSIX systems), and why.
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

/// Asks for SCHED_FIFO at `priority` for the calling thread (on Linux,
/// raising a soft RLIMIT_RTPRIO below it where the hard one allows), and
/// says what it got: where the OS has no real-time policy, a refusal that
/// names the OS.
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
/// not defer its wake-ups by the default 50 µs to batch them. Only Linux
/// (and Android) has a timer slack: elsewhere there is nothing to set.
pub fn minimal_timer_slack() {
    timehands::sys::set_minimal_timer_slack();
}

/// Sets the calling thread's nice value, so that without real-time
/// scheduling the fair scheduler still favours the threads left at the
/// default of 0. Only on Linux and Android, where nice values are per thread.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn lower_priority(nice: i32) {
    // SAFETY: gettid and setpriority take no pointers; a failure leaves the
    // thread at its old nice value, which is harmless.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}

/// Elsewhere a nice value is the whole process's (POSIX), or the OS has
/// none: the soft workers keep the process's priority.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn lower_priority(_nice: i32) {}

/// Whether the calling thread is under a time-sharing policy (SCHED_OTHER,
/// SCHED_BATCH, SCHED_IDLE), whose scheduler may take its CPU at any moment
/// for another thread of its priority. A real-time one (SCHED_FIFO,
/// SCHED_RR, SCHED_DEADLINE, which a program started with `chrt` gives
/// every thread it starts) keeps the CPU while it runs, or for RR's slice
/// of 100 ms.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn time_shared() -> bool {
    // SAFETY: sched_getscheduler takes no pointer; 0 is the calling thread.
    let policy = unsafe { libc::sched_getscheduler(0) };
    !matches!(policy, libc::SCHED_FIFO | libc::SCHED_RR) && policy != SCHED_DEADLINE
}

/// SCHED_DEADLINE, which the libc crate does not name.
#[cfg(any(target_os = "linux", target_os = "android"))]
const SCHED_DEADLINE: i32 = 6;

/// Elsewhere a thread under the OS's default policy, as the soft workers
/// are, shares its CPU.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn time_shared() -> bool {
    true
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    /// A thread is time-shared until it is real-time, where the OS lets it
    /// be (a refusal skips the second half, and says so).
    #[test]
    fn a_thread_is_time_shared_until_it_is_real_time() {
        std::thread::spawn(|| {
            assert!(super::time_shared(), "a new thread under SCHED_OTHER");
            match super::request_fifo(1) {
                super::Scheduling::Fifo { .. } => assert!(!super::time_shared()),
                super::Scheduling::Normal { reason } => {
                    eprintln!("skipped the SCHED_FIFO half: {reason}")
                }
            }
        })
        .join()
        .expect("the thread's checks");
    }
}
