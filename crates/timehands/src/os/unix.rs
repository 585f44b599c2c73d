//! The other unix OSes (illumos, Solaris, Haiku, AIX, …): POSIX's
//! CLOCK_MONOTONIC and CLOCK_REALTIME, its `fork` handlers, and on illumos
//! and Solaris the NTP state of `ntp_gettime`. Their real-time scheduling
//! (illumos' `priocntl` is another model) and CPU binding
//! (`processor_bind`) are not implemented here, and POSIX has no unslewed or
//! suspend-counting clock.

#[cfg(not(any(target_os = "illumos", target_os = "solaris")))]
pub(crate) use super::absent::ntp;
pub(crate) use super::absent::{
    allowed_cpus, current_cpu, pin_to_cpus, process_cpus, set_minimal_timer_slack, set_scheduling,
};
pub(crate) use super::absent::{kernel_rate, set_kernel_rate, tai_minus_utc};
use super::posix;
pub(crate) use posix::{clock_name, kernel_nanos, kernel_resolution, on_fork};

/// POSIX's clocks: only CLOCK_MONOTONIC and CLOCK_REALTIME.
pub(super) const CLOCKS: posix::Clocks = posix::Clocks {
    ids: [
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
    ],
};

/// The kernel's NTP state: illumos' `ntp_gettime(2)`, whose `ntptimeval`
/// has the error bounds (µs) but no TAI offset.
#[cfg(any(target_os = "illumos", target_os = "solaris"))]
pub(crate) fn ntp() -> std::io::Result<super::NtpState> {
    // SAFETY: all zeros is a valid ntptimeval (integers) for the OS to fill.
    let mut tv: libc::ntptimeval = unsafe { std::mem::zeroed() };
    // SAFETY: `tv` is a valid ntptimeval to write.
    let state = unsafe { libc::ntp_gettime(&mut tv) };
    if state < 0 {
        return Err(super::last_error("ntp_gettime"));
    }
    Ok(super::NtpState::from_kernel(
        state,
        0,
        i64::from(tv.maxerror),
        i64::from(tv.esterror),
        0,
    ))
}
