//! What an OS family lacks, said once: each family's file re-exports the
//! items here that it has no better answer for (so that each family takes
//! some of them, and none takes all: hence the `allow` in `mod.rs`).

use std::io;

use super::{ForkHandler, KernelRate, NtpState, Policy, unsupported};

/// No NTP state a program can read: no bound on real time.
pub(crate) fn ntp() -> io::Result<NtpState> {
    Err(unsupported("the kernel's NTP state"))
}

/// No CPU pinning: the thread runs where the OS puts it.
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    Err(unsupported("the CPU affinity"))
}

/// See [`allowed_cpus`].
pub(crate) fn process_cpus() -> io::Result<Vec<usize>> {
    Err(unsupported("the CPU affinity"))
}

/// See [`allowed_cpus`].
pub(crate) fn pin_to_cpus(_cpus: &[usize]) -> io::Result<()> {
    Err(unsupported("pinning a thread to CPUs"))
}

/// The OS does not say which CPU a thread runs on.
pub(crate) fn current_cpu() -> Option<usize> {
    None
}

/// No real-time scheduling policy.
pub(crate) fn set_scheduling(policy: Policy, _priority: i32) -> io::Result<()> {
    Err(unsupported(policy.name()))
}

/// No tick and frequency of the kernel's clock that a program can read.
pub(crate) fn kernel_rate() -> io::Result<KernelRate> {
    Err(unsupported(
        "the kernel clock's tick and frequency (adjtimex)",
    ))
}

/// No tick and frequency of the kernel's clock that a program can set.
pub(crate) fn set_kernel_rate(_rate: KernelRate) -> io::Result<()> {
    Err(unsupported(
        "setting the kernel clock's tick and frequency (adjtimex)",
    ))
}

/// No timer slack to set: nothing to do.
pub(crate) fn set_minimal_timer_slack() {}

/// No `fork()`: no handlers to register.
pub(crate) fn on_fork(_prepare: ForkHandler, _parent: ForkHandler, _child: ForkHandler) {}

/// How finely `clock` moves: where the OS has no coarse clock, its coarse
/// ids read the precise clock, which moves by the 100 ns of Windows'
/// counter at the coarsest.
pub(crate) fn kernel_resolution(_clock: super::KernelClock) -> std::time::Duration {
    std::time::Duration::from_nanos(100)
}

/// TAI − UTC as the OS's clocks read it: no clock of TAI here (the NTP
/// state's, where the OS keeps one, says it).
pub(crate) fn tai_minus_utc() -> Option<i32> {
    None
}
