//! Apple's OSes: the clocks of `clock_gettime` (the mach clocks in
//! nanoseconds), the NTP state of `ntp_gettime`, POSIX scheduling. There is
//! no CPU pinning (only affinity hints) and no timer slack to set.

use std::io;

use super::NtpState;
pub(crate) use super::absent::{
    allowed_cpus, current_cpu, pin_to_cpus, process_cpus, set_minimal_timer_slack,
};
use super::posix;
pub(crate) use super::sched::set_scheduling;
pub(crate) use posix::{clock_name, kernel_nanos, on_fork};

/// The clocks of `clock_gettime(3)`: CLOCK_UPTIME_RAW is
/// mach_absolute_time (not counting sleep), which std's `Instant` reads;
/// CLOCK_MONOTONIC_RAW is mach_continuous_time (counting sleep). Neither is
/// slewed.
pub(super) const CLOCKS: posix::Clocks = posix::Clocks {
    ids: [
        (libc::CLOCK_UPTIME_RAW, "CLOCK_UPTIME_RAW"),
        (libc::CLOCK_UPTIME_RAW, "CLOCK_UPTIME_RAW"),
        (libc::CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW"),
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
    ],
};

/// The kernel's NTP state: `ntp_gettime(2)`, which reads only.
pub(crate) fn ntp() -> io::Result<NtpState> {
    // SAFETY: all zeros is a valid ntptimeval (integers) for the OS to fill.
    let mut tv: libc::ntptimeval = unsafe { std::mem::zeroed() };
    // SAFETY: `tv` is a valid ntptimeval to write.
    let state = unsafe { libc::ntp_gettime(&mut tv) };
    if state < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(NtpState::from_kernel(
        state,
        0,
        tv.maxerror as i64,
        tv.esterror as i64,
        tv.tai as i32,
    ))
}
