//! The operating system's plumbing that the library and its tools share:
//! the OS's clocks, the CPUs a thread may run on, real-time scheduling and
//! timer slack. One implementation each, on every OS (what an OS lacks is an
//! error that names it), so that the library, the timer service, the
//! command, the benchmarks and the C library handle overflow, large
//! machines and refusals the same way.
//!
//! Errors are [`io::Error`]s whose message is one line that names the input
//! (the CPU, the priority, the OS) and, where there is one, the remedy.
//!
//! ```
//! use timehands::sys::{self, KernelClock, Policy};
//!
//! let realtime = sys::kernel_nanos(KernelClock::Realtime)?;
//! assert!(realtime > 1_700_000_000 * 1_000_000_000); // after 2023
//! match sys::set_scheduling(Policy::Fifo, 1_000) {
//!     Err(e) => println!("{e}"), // the range, the privilege, or the OS
//!     Ok(()) => unreachable!("no OS has SCHED_FIFO priority 1000"),
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;

#[cfg(unix)]
pub use crate::os::posix::{clock_nanos, clock_timespec, timespec_nanos};
pub use crate::os::{KernelClock, KernelRate, Policy};

/// `clock` in nanoseconds since its origin; see [`KernelClock`] for what
/// each is on this OS.
///
/// # Errors
/// The OS's, for a clock it cannot read (none of the OSes this crate knows
/// refuses one; the system time before 1970 where std reads it).
#[inline]
pub fn kernel_nanos(clock: KernelClock) -> io::Result<u64> {
    crate::os::kernel_nanos(clock)
}

/// The kernel clock's tick and frequency (Linux's `adjtimex(2)`, read
/// without privilege).
///
/// # Errors
/// The OS's; on an OS that does not say, one naming it.
pub fn kernel_rate() -> io::Result<KernelRate> {
    crate::os::kernel_rate()
}

/// Sets the kernel clock's tick and frequency, as an NTP daemon does: every
/// program's CLOCK_MONOTONIC and CLOCK_REALTIME run at the new rate until
/// it is set back (Realtime keeps what it gained meanwhile).
///
/// # Errors
/// Without the privilege (root: CAP_SYS_TIME), for a tick outside 9000 to
/// 11 000 µs or a frequency beyond ±500 ppm, and on an OS that has no such
/// call, one line that says which.
pub fn set_kernel_rate(rate: KernelRate) -> io::Result<()> {
    crate::os::set_kernel_rate(rate)
}

/// The CPUs the calling thread may run on, in increasing order (on Windows,
/// in its processor group).
///
/// # Errors
/// What the OS says, naming the call (`sched_getaffinity(2)` on Linux,
/// FreeBSD and DragonFly; `GetThreadGroupAffinity` on Windows); where CPU
/// affinity is not implemented (Apple's OSes, which have only hints;
/// NetBSD, OpenBSD, illumos and the other unix; wasm), one naming the OS.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    crate::os::allowed_cpus()
}

/// The CPUs the process may run on, in increasing order: what a thread
/// started from a pinned one can widen its own to. On Linux the affinity of
/// its first thread; on FreeBSD and DragonFly the process's set; on Windows
/// the process's mask in its processor group.
///
/// # Errors
/// As [`allowed_cpus`].
pub fn process_cpus() -> io::Result<Vec<usize>> {
    crate::os::process_cpus()
}

/// Keeps the calling thread on `cpus`; on Linux, FreeBSD and DragonFly the
/// threads it starts inherit that (on Windows they take the process's).
///
/// # Errors
/// An empty list, or a CPU numbered beyond any machine's, named in the
/// message; what the OS says otherwise (on Linux, EINVAL when none of
/// `cpus` is online or allowed; on Windows, a refusal when any is outside
/// the process's mask, and CPUs from 64 on are refused), or where CPU
/// affinity is not implemented (see [`allowed_cpus`]), one naming the OS.
pub fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
    crate::os::pin_to_cpus(cpus)
}

/// Pins the calling thread to `cpu`; see [`pin_to_cpus`].
///
/// # Errors
/// As [`pin_to_cpus`].
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    pin_to_cpus(&[cpu])
}

/// The CPU the calling thread runs on (it may have moved by the time the
/// caller looks); `None` where this is not implemented (see
/// [`allowed_cpus`]).
pub fn current_cpu() -> Option<usize> {
    crate::os::current_cpu()
}

/// Makes the calling thread `policy` at `priority`. On Linux, as cyclictest
/// does, a refusal (EPERM) with a soft RLIMIT_RTPRIO below `priority` and a
/// hard one at or above it raises the soft limit and tries again.
///
/// # Errors
/// A priority outside the policy's range, or a refusal: the message names
/// the priority and the remedy (on Linux the RLIMIT_RTPRIO limits, and root
/// or CAP_SYS_NICE, or `ulimit -r`; elsewhere root); where POSIX real-time
/// scheduling is not implemented (Windows, OpenBSD, whose threads library
/// accepts a policy and ignores it, illumos and the other unix, wasm), one
/// naming the OS.
pub fn set_scheduling(policy: Policy, priority: i32) -> io::Result<()> {
    crate::os::set_scheduling(policy, priority)
}

/// Sets the calling thread's timer slack to 1 ns where the OS defers
/// wake-ups to batch them (Linux's default slack is 50 µs); nothing
/// elsewhere.
pub fn set_minimal_timer_slack() {
    crate::os::set_minimal_timer_slack();
}
