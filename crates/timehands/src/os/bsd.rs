//! FreeBSD, NetBSD, OpenBSD and DragonFly: the clocks of `clock_gettime`,
//! the NTP state of `ntp_gettime` (but OpenBSD, which has none), POSIX
//! scheduling (but OpenBSD, whose threads library accepts a policy and
//! ignores it), and the CPU affinity of `sched_setaffinity` on FreeBSD and
//! DragonFly (NetBSD's and OpenBSD's are not implemented here).

pub(crate) use super::absent::set_minimal_timer_slack;
#[cfg(any(target_os = "netbsd", target_os = "openbsd"))]
pub(crate) use super::absent::{allowed_cpus, current_cpu, pin_to_cpus, process_cpus};
pub(crate) use super::absent::{kernel_rate, set_kernel_rate, tai_minus_utc};
#[cfg(target_os = "openbsd")]
pub(crate) use super::absent::{ntp, set_scheduling};
#[cfg(not(target_os = "openbsd"))]
pub(crate) use super::ntp_model::ntp_gettime as ntp;
use super::posix;
#[cfg(not(target_os = "openbsd"))]
pub(crate) use super::sched::set_scheduling;
pub(crate) use posix::{clock_name, kernel_nanos, kernel_resolution, on_fork};

/// The clock counting suspend: OpenBSD's CLOCK_BOOTTIME. FreeBSD's
/// CLOCK_BOOTTIME is an alias of CLOCK_UPTIME, which does not count it, and
/// NetBSD and DragonFly have none: Monotonic there.
#[cfg(target_os = "openbsd")]
const BOOTTIME: (libc::clockid_t, &str) = (libc::CLOCK_BOOTTIME, "CLOCK_BOOTTIME");
#[cfg(not(target_os = "openbsd"))]
const BOOTTIME: (libc::clockid_t, &str) = (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC");

/// The clocks as of the last tick: FreeBSD's and DragonFly's `_FAST` ones;
/// the precise ones on NetBSD and OpenBSD, which have none.
#[cfg(any(target_os = "freebsd", target_os = "dragonfly"))]
const COARSE: [(libc::clockid_t, &str); 2] = [
    (libc::CLOCK_MONOTONIC_FAST, "CLOCK_MONOTONIC_FAST"),
    (libc::CLOCK_REALTIME_FAST, "CLOCK_REALTIME_FAST"),
];
#[cfg(not(any(target_os = "freebsd", target_os = "dragonfly")))]
const COARSE: [(libc::clockid_t, &str); 2] = [
    (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
    (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
];

/// The clocks of `clock_gettime(2)`. The BSDs have no unslewed monotonic
/// clock: MonotonicRaw is CLOCK_MONOTONIC, slewed by at most 500 ppm, well
/// inside the watchdog's bound.
pub(super) const CLOCKS: posix::Clocks = posix::Clocks {
    ids: [
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        BOOTTIME,
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
        COARSE[0],
        COARSE[1],
    ],
};

/// FreeBSD's and DragonFly's CPU affinity: their Linux-compatible
/// `sched_getaffinity` and `sched_setaffinity` (FreeBSD 13.1), with a mask
/// grown while the kernel's is larger (FreeBSD says ERANGE, DragonFly
/// EINVAL).
#[cfg(any(target_os = "freebsd", target_os = "dragonfly"))]
mod affinity {
    use std::io;

    use crate::os::cpu_mask::{pin_affinity, read_affinity};

    /// The C library's CPU set type, only named for the calls' signatures.
    #[cfg(target_os = "freebsd")]
    type CpuSet = libc::cpuset_t;
    #[cfg(target_os = "dragonfly")]
    type CpuSet = libc::cpu_set_t;

    /// The CPUs the calling thread may run on, in increasing order.
    pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
        affinity_of(0)
    }

    /// The CPUs the process may run on.
    pub(crate) fn process_cpus() -> io::Result<Vec<usize>> {
        // SAFETY: getpid takes nothing and cannot fail.
        affinity_of(unsafe { libc::getpid() })
    }

    fn affinity_of(pid: libc::pid_t) -> io::Result<Vec<usize>> {
        read_affinity("sched_getaffinity", &[libc::ERANGE, libc::EINVAL], |mask| {
            // SAFETY: the OS writes at most the size of `mask`, ours to
            // write; the pointer is only cast for the signature.
            unsafe {
                libc::sched_getaffinity(
                    pid,
                    std::mem::size_of_val(mask),
                    mask.as_mut_ptr().cast::<CpuSet>(),
                )
            }
        })
    }

    /// Keeps the calling thread on `cpus`.
    pub(crate) fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
        pin_affinity(cpus, |mask| {
            // SAFETY: pid 0 is the calling thread; the OS reads the size of
            // `mask`. The pointer is only cast for the signature.
            unsafe {
                libc::sched_setaffinity(
                    0,
                    std::mem::size_of_val(mask),
                    mask.as_ptr().cast::<CpuSet>(),
                )
            }
        })
    }
}
#[cfg(any(target_os = "freebsd", target_os = "dragonfly"))]
pub(crate) use super::cpu_mask::current_cpu;
#[cfg(any(target_os = "freebsd", target_os = "dragonfly"))]
pub(crate) use affinity::{allowed_cpus, pin_to_cpus, process_cpus};
