//! The other unix OSes (illumos, Solaris, Haiku, AIX, …): POSIX's
//! CLOCK_MONOTONIC and CLOCK_REALTIME, and its `fork` handlers. The libc
//! crate binds neither their NTP state nor their real-time scheduling
//! (illumos' `priocntl` is another model), and POSIX has no unslewed or
//! suspend-counting clock.
pub(crate) use super::absent::{
    allowed_cpus, current_cpu, ntp, pin_to_cpus, process_cpus, set_minimal_timer_slack,
    set_scheduling,
};
use super::posix;
pub(crate) use posix::{clock_name, kernel_nanos, on_fork};

/// POSIX's clocks: only CLOCK_MONOTONIC and CLOCK_REALTIME.
pub(super) const CLOCKS: posix::Clocks = posix::Clocks {
    ids: [
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
    ],
};
