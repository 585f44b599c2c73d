//! FreeBSD, NetBSD, OpenBSD and DragonFly: the clocks of `clock_gettime`,
//! the NTP state of `ntp_gettime` (FreeBSD, NetBSD), POSIX scheduling, and
//! on FreeBSD the CPU affinity of its `sched_setaffinity`.

use std::io;

use super::NtpState;
#[cfg(any(target_os = "openbsd", target_os = "dragonfly"))]
pub(crate) use super::absent::ntp;
pub(crate) use super::absent::set_minimal_timer_slack;
#[cfg(not(target_os = "freebsd"))]
pub(crate) use super::absent::{allowed_cpus, current_cpu, pin_to_cpus, process_cpus};
use super::posix;
pub(crate) use super::sched::set_scheduling;
pub(crate) use posix::{clock_name, kernel_nanos, on_fork};

/// The clock counting suspend: CLOCK_BOOTTIME where the OS has one (on
/// FreeBSD an alias of CLOCK_UPTIME), CLOCK_MONOTONIC elsewhere.
#[cfg(any(target_os = "freebsd", target_os = "openbsd"))]
const BOOTTIME: (libc::clockid_t, &str) = (libc::CLOCK_BOOTTIME, "CLOCK_BOOTTIME");
#[cfg(not(any(target_os = "freebsd", target_os = "openbsd")))]
const BOOTTIME: (libc::clockid_t, &str) = (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC");

/// The clocks of `clock_gettime(2)`. The BSDs have no unslewed monotonic
/// clock: MonotonicRaw is CLOCK_MONOTONIC, slewed by at most 500 ppm, well
/// inside the watchdog's bound.
pub(super) const CLOCKS: posix::Clocks = posix::Clocks {
    ids: [
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        BOOTTIME,
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
    ],
};

/// FreeBSD's `struct ntptimeval` (`<sys/timex.h>`), which the libc crate
/// does not bind: the same layout as NetBSD's and Apple's.
#[cfg(target_os = "freebsd")]
#[repr(C)]
struct NtpTimeval {
    time: libc::timespec,
    maxerror: libc::c_long,
    esterror: libc::c_long,
    tai: libc::c_long,
    time_state: libc::c_int,
}

#[cfg(target_os = "freebsd")]
unsafe extern "C" {
    /// FreeBSD's `ntp_gettime(2)`, in its C library since FreeBSD 2.
    fn ntp_gettime(ntv: *mut NtpTimeval) -> libc::c_int;
}

/// The kernel's NTP state: `ntp_gettime(2)`, which reads only.
#[cfg(target_os = "freebsd")]
pub(crate) fn ntp() -> io::Result<NtpState> {
    // SAFETY: all zeros is a valid NtpTimeval (integers) for the OS to fill.
    let mut tv: NtpTimeval = unsafe { std::mem::zeroed() };
    // SAFETY: `tv` is a valid, writable ntptimeval as the OS lays it out.
    let state = unsafe { ntp_gettime(&mut tv) };
    ntp_state(state, tv.maxerror, tv.esterror, tv.tai)
}

/// The kernel's NTP state: `ntp_gettime(2)`, which reads only.
#[cfg(target_os = "netbsd")]
pub(crate) fn ntp() -> io::Result<NtpState> {
    // SAFETY: all zeros is a valid ntptimeval (integers) for the OS to fill.
    let mut tv: libc::ntptimeval = unsafe { std::mem::zeroed() };
    // SAFETY: `tv` is a valid ntptimeval to write.
    let state = unsafe { libc::ntp_gettime(&mut tv) };
    ntp_state(state, tv.maxerror, tv.esterror, tv.tai)
}

/// The state `ntp_gettime` returned, with its error bounds (µs) and TAI
/// offset; an error where it failed.
#[cfg(any(target_os = "freebsd", target_os = "netbsd"))]
#[allow(clippy::useless_conversion)] // c_long is 32 bits on 32-bit targets.
fn ntp_state(
    state: libc::c_int,
    maxerror: libc::c_long,
    esterror: libc::c_long,
    tai: libc::c_long,
) -> io::Result<NtpState> {
    if state < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(NtpState::from_kernel(
        state,
        0,
        i64::from(maxerror),
        i64::from(esterror),
        tai as i32,
    ))
}

/// FreeBSD's CPU affinity: its Linux-compatible `sched_getaffinity` and
/// `sched_setaffinity` (FreeBSD 13.1) on a `cpuset_t` of 256 CPUs.
#[cfg(target_os = "freebsd")]
mod affinity {
    use std::io;

    use crate::os::cpu_mask::{cpu_mask, cpus_in, pin_refused};

    /// Words in FreeBSD's `cpuset_t` (CPU_SETSIZE 256).
    const WORDS: usize = std::mem::size_of::<libc::cpuset_t>() / 8;

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
        let mut mask = [0u64; WORDS];
        // SAFETY: the OS writes at most size_of::<cpuset_t>() bytes, the
        // size of `mask`.
        let status = unsafe {
            libc::sched_getaffinity(
                pid,
                std::mem::size_of_val(&mask),
                mask.as_mut_ptr().cast::<libc::cpuset_t>(),
            )
        };
        if status == 0 {
            Ok(cpus_in(&mask))
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Keeps the calling thread on `cpus`.
    pub(crate) fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
        let words = cpu_mask(cpus)?;
        if words.len() > WORDS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot run on CPUs {cpus:?}: FreeBSD numbers CPUs below {}",
                    WORDS * 64
                ),
            ));
        }
        let mut mask = [0u64; WORDS];
        mask[..words.len()].copy_from_slice(&words);
        // SAFETY: pid 0 is the calling thread; the OS reads
        // size_of::<cpuset_t>() bytes, the size of `mask`.
        let status = unsafe {
            libc::sched_setaffinity(
                0,
                std::mem::size_of_val(&mask),
                mask.as_ptr().cast::<libc::cpuset_t>(),
            )
        };
        if status == 0 {
            Ok(())
        } else {
            Err(pin_refused(cpus))
        }
    }

    /// The CPU the calling thread runs on.
    pub(crate) fn current_cpu() -> Option<usize> {
        // SAFETY: sched_getcpu takes nothing and returns a number.
        usize::try_from(unsafe { libc::sched_getcpu() }).ok()
    }
}
#[cfg(target_os = "freebsd")]
pub(crate) use affinity::{allowed_cpus, current_cpu, pin_to_cpus, process_cpus};
