//! Apple's OSes: the clocks of `clock_gettime` (the mach clocks in
//! nanoseconds), the NTP state of `ntp_gettime`, POSIX scheduling. There is
//! no CPU pinning (only affinity hints, not implemented here) and no timer
//! slack to set.

pub(crate) use super::absent::{
    allowed_cpus, current_cpu, pin_to_cpus, process_cpus, set_minimal_timer_slack,
};
pub(crate) use super::absent::{kernel_rate, set_kernel_rate, tai_minus_utc};
pub(crate) use super::ntp_model::ntp_gettime as ntp;
use super::posix;
pub(crate) use super::sched::set_scheduling;
pub(crate) use posix::{clock_name, kernel_nanos, kernel_resolution, on_fork};

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
        (libc::CLOCK_UPTIME_RAW, "CLOCK_UPTIME_RAW"),
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
    ],
};
