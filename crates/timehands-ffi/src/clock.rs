//! The clocks of `clock_gettime(2)`: the time and the resolution of a clock
//! named by its `clockid_t`, from timehands for the ids it serves and from the
//! kernel for every other (so that `th_clock_gettime` can stand in for
//! `clock_gettime`), timehands' error bound, and CLOCK_MONOTONIC as plain
//! nanoseconds.
//!
//! Which ids timehands serves is the OS's business: each of its clocks is
//! served under the id of the kernel clock whose origin it keeps, and only
//! where the OS has one (`timehands_clock`, one table an OS).

use std::time::Duration;

use libc::{EFAULT, EINVAL, EIO, EOVERFLOW, c_int, clockid_t, timespec};
use timehands_rs::sys::KernelClock;
use timehands_rs::{ClockId, Resolution};

use crate::boundary::{contain, fail};

/// The id of the clock `now()` counts on: the one std's `Instant` reads,
/// CLOCK_UPTIME_RAW on Apple's systems, CLOCK_MONOTONIC elsewhere.
#[cfg(target_vendor = "apple")]
const MONOTONIC: clockid_t = libc::CLOCK_UPTIME_RAW;
/// The id of the clock `now()` counts on: the one std's `Instant` reads,
/// CLOCK_UPTIME_RAW on Apple's systems, CLOCK_MONOTONIC elsewhere.
#[cfg(not(target_vendor = "apple"))]
const MONOTONIC: clockid_t = libc::CLOCK_MONOTONIC;

/// The timehands clock behind a `clock_gettime` id, if timehands serves it:
/// each of its clocks has the origin of the kernel's clock of that name.
/// (timehands' own `Second` has no id on Linux.)
#[cfg(any(target_os = "linux", target_os = "android"))]
fn timehands_clock(id: clockid_t) -> Option<ClockId> {
    match id {
        libc::CLOCK_REALTIME => Some(ClockId::Realtime),
        libc::CLOCK_MONOTONIC => Some(ClockId::Monotonic),
        libc::CLOCK_BOOTTIME => Some(ClockId::Boottime),
        libc::CLOCK_MONOTONIC_RAW => Some(ClockId::MonotonicRaw),
        libc::CLOCK_REALTIME_COARSE => Some(ClockId::RealtimeCoarse),
        libc::CLOCK_MONOTONIC_COARSE => Some(ClockId::MonotonicCoarse),
        libc::CLOCK_TAI => Some(ClockId::Tai),
        _ => None,
    }
}

/// FreeBSD's ids of timehands' clocks: its CLOCK_BOOTTIME is CLOCK_UPTIME,
/// its coarse clocks the `_FAST` ones; it has no raw clock and no TAI clock.
#[cfg(target_os = "freebsd")]
fn timehands_clock(id: clockid_t) -> Option<ClockId> {
    match id {
        libc::CLOCK_REALTIME => Some(ClockId::Realtime),
        libc::CLOCK_MONOTONIC => Some(ClockId::Monotonic),
        libc::CLOCK_BOOTTIME => Some(ClockId::Boottime),
        libc::CLOCK_REALTIME_COARSE => Some(ClockId::RealtimeCoarse),
        libc::CLOCK_MONOTONIC_COARSE => Some(ClockId::MonotonicCoarse),
        _ => None,
    }
}

/// Apple's ids of timehands' clocks: monotonic time is CLOCK_UPTIME_RAW
/// (std's `Instant`), time with suspend CLOCK_MONOTONIC_RAW; there are no
/// coarse, raw or TAI clocks of the same origins to name.
#[cfg(target_vendor = "apple")]
fn timehands_clock(id: clockid_t) -> Option<ClockId> {
    match id {
        libc::CLOCK_REALTIME => Some(ClockId::Realtime),
        libc::CLOCK_UPTIME_RAW => Some(ClockId::Monotonic),
        libc::CLOCK_MONOTONIC_RAW => Some(ClockId::Boottime),
        _ => None,
    }
}

/// The other unixes: the two clocks every one of them has.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_vendor = "apple"
)))]
fn timehands_clock(id: clockid_t) -> Option<ClockId> {
    match id {
        libc::CLOCK_REALTIME => Some(ClockId::Realtime),
        libc::CLOCK_MONOTONIC => Some(ClockId::Monotonic),
        _ => None,
    }
}

/// `d` as a timespec, or EOVERFLOW where `time_t` cannot hold its seconds (a
/// 32-bit `time_t` after 2038), as `clock_gettime` reports it.
fn to_timespec(d: Duration) -> Result<timespec, c_int> {
    Ok(timespec {
        tv_sec: d.as_secs().try_into().map_err(|_| EOVERFLOW)?,
        // Below 10^9, so it fits whatever integer type `tv_nsec` has.
        tv_nsec: d.subsec_nanos() as _,
    })
}

/// The kernel's clock `id`: the answer for the ids timehands does not serve,
/// and when ours has panicked.
fn kernel_gettime(id: clockid_t) -> Result<timespec, c_int> {
    timehands_rs::sys::clock_timespec(id).map_err(|e| e.raw_os_error().unwrap_or(EIO))
}

/// The kernel's monotonic clock in nanoseconds (saturating: this runs after
/// a panic, outside `contain`, so it must not panic itself).
fn kernel_monotonic_ns() -> u64 {
    timehands_rs::sys::kernel_nanos(KernelClock::Monotonic).unwrap_or(0)
}

/// Ends a call: stores the time in `*out` and returns 0, or fails with its
/// error code.
///
/// # Safety
/// `out` is not NULL and points to a writable timespec.
unsafe fn store(out: *mut timespec, time: Result<timespec, c_int>) -> c_int {
    match time {
        Ok(ts) => {
            // SAFETY: the caller's promise.
            unsafe { out.write(ts) };
            0
        }
        Err(code) => fail(code),
    }
}

/// Reads clock `clock_id` into `*tp`, as clock_gettime(2) does, for every id
/// it takes: timehands serves CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME,
/// CLOCK_MONOTONIC_RAW, CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE and
/// CLOCK_TAI on Linux (on other OSes the ids README.md lists); the kernel
/// every other (the CPU-time clocks, also those of
/// clock_getcpuclockid(3) and pthread_getcpuclockid(3),
/// CLOCK_REALTIME_ALARM, CLOCK_BOOTTIME_ALARM, the auxiliary clocks of Linux
/// 6.17), so that `#define clock_gettime th_clock_gettime` keeps a program's
/// every clock working.
///
/// Returns 0, or -1 with errno set: the kernel's EINVAL for an id it refuses,
/// EFAULT if `tp` is NULL (the id is checked first), EOVERFLOW if `time_t`
/// cannot hold the seconds.
///
/// Async-signal-safe, as clock_gettime is.
///
/// # Safety
/// `tp` is NULL or points to a writable `struct timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_gettime(clock_id: clockid_t, tp: *mut timespec) -> c_int {
    // The clocks read most, first: the read alone, with nothing on its way
    // (`try_gettime` cannot panic, so nothing to contain). Every other id,
    // every error and every read that must wind up is out of line.
    let fast = match clock_id {
        MONOTONIC if !tp.is_null() => timehands_rs::try_gettime(ClockId::Monotonic),
        libc::CLOCK_REALTIME if !tp.is_null() => timehands_rs::try_gettime(ClockId::Realtime),
        _ => None,
    };
    match fast.map(to_timespec) {
        Some(Ok(ts)) => {
            // SAFETY: `tp` is not NULL, and the caller promises it is writable.
            unsafe { tp.write(ts) };
            0
        }
        // SAFETY: the caller's promise.
        _ => unsafe { gettime_any(clock_id, tp) },
    }
}

/// [`th_clock_gettime`] for every id.
///
/// # Safety
/// As [`th_clock_gettime`].
#[inline(never)]
unsafe fn gettime_any(clock_id: clockid_t, tp: *mut timespec) -> c_int {
    let time = match timehands_clock(clock_id) {
        Some(id) => {
            if tp.is_null() {
                return fail(EFAULT);
            }
            contain(
                || to_timespec(timehands_rs::gettime(id)),
                || kernel_gettime(clock_id),
            )
        }
        // Read before `tp` is looked at, so that the kernel checks the id
        // first; and never through a NULL `tp`, which the vDSO would follow.
        None => {
            kernel_gettime(clock_id).and_then(|ts| if tp.is_null() { Err(EFAULT) } else { Ok(ts) })
        }
    };
    // SAFETY: `time` is Ok only if `tp` is not NULL, and the caller promises
    // it is writable.
    unsafe { store(tp, time) }
}

/// One figure of timehands clock `id`'s [`Resolution`] into `*out`, with
/// `clock_getres`'s conventions: a NULL `out` only checks the id.
///
/// # Safety
/// `out` is NULL or points to a writable timespec.
unsafe fn write_resolution(
    id: ClockId,
    out: *mut timespec,
    figure: fn(Resolution) -> Duration,
) -> c_int {
    if out.is_null() {
        return 0;
    }
    let value = contain(
        || to_timespec(figure(timehands_rs::getres(id))),
        || Err(EIO),
    );
    // SAFETY: `out` is not NULL, and the caller promises it is writable.
    unsafe { store(out, value) }
}

/// The resolution of clock `clock_id` (the smallest step it takes) into
/// `*res`, as clock_getres(2) does, for every id it takes: timehands' for the
/// ids th_clock_gettime serves, the kernel's for the others. A NULL `res`
/// only checks the id.
///
/// Returns 0, or -1 with errno set: the kernel's EINVAL for an id it refuses.
///
/// Async-signal-safe, as clock_gettime is.
///
/// # Safety
/// `res` is NULL or points to a writable `struct timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_getres(clock_id: clockid_t, res: *mut timespec) -> c_int {
    match timehands_clock(clock_id) {
        // SAFETY: passed on from our caller.
        Some(id) => unsafe { write_resolution(id, res, |r| r.resolution) },
        // SAFETY: clock_getres(2) takes what our caller promises: NULL or a
        // writable timespec.
        None => unsafe { libc::clock_getres(clock_id, res) },
    }
}

/// The current bound on the error of clock `clock_id` against the kernel's
/// clock of that id into `*accuracy`; for the coarse clocks it includes the
/// lag of up to one resolution. Conventions of th_clock_getres: a NULL
/// `accuracy` only checks the id.
///
/// Returns 0, or -1 with errno EINVAL if timehands does not serve `clock_id`
/// (the kernel's clocks have no error against themselves to state).
///
/// Async-signal-safe, as clock_gettime is.
///
/// # Safety
/// `accuracy` is NULL or points to a writable `struct timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_getaccuracy(
    clock_id: clockid_t,
    accuracy: *mut timespec,
) -> c_int {
    let Some(id) = timehands_clock(clock_id) else {
        return fail(EINVAL);
    };
    // SAFETY: passed on from our caller.
    unsafe { write_resolution(id, accuracy, |r| r.accuracy) }
}

/// Now, in nanoseconds on CLOCK_MONOTONIC (the origin of
/// clock_gettime(CLOCK_MONOTONIC); on macOS, CLOCK_UPTIME_RAW's): the
/// fastest correct clock this machine has. Never goes backwards, on one thread or across threads.
///
/// Async-signal-safe, as clock_gettime is.
#[unsafe(no_mangle)]
pub extern "C" fn th_now_ns() -> u64 {
    contain(|| timehands_rs::now().as_nanos(), kernel_monotonic_ns)
}

/// Now, like th_now_ns but from an unordered counter read: cheaper, never
/// backwards on one thread, but a thread that has seen another thread's time
/// may read an earlier one. For timing intervals on one thread.
///
/// Async-signal-safe, as clock_gettime is.
#[unsafe(no_mangle)]
pub extern "C" fn th_now_unordered_ns() -> u64 {
    contain(
        || timehands_rs::now_unordered().as_nanos(),
        kernel_monotonic_ns,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On every OS, the ids of the clock `now()` counts on and of UTC are
    /// timehands'; an id no OS has is not.
    #[test]
    fn the_monotonic_and_realtime_ids_are_served() {
        assert_eq!(timehands_clock(MONOTONIC), Some(ClockId::Monotonic));
        assert_eq!(
            timehands_clock(libc::CLOCK_REALTIME),
            Some(ClockId::Realtime)
        );
        assert_eq!(timehands_clock(clockid_t::MAX), None);
    }

    /// Every clock of timehands has its id, but `Second`, which Linux lacks;
    /// the ids of other clocks are refused.
    #[cfg(target_os = "linux")]
    #[test]
    fn every_clock_but_second_has_an_id() {
        use std::collections::HashSet;

        let reached: HashSet<ClockId> = (0..64).filter_map(timehands_clock).collect();
        let expected: HashSet<ClockId> = ClockId::ALL
            .into_iter()
            .filter(|&id| id != ClockId::Second)
            .collect();
        assert_eq!(reached, expected);
        for id in [
            libc::CLOCK_PROCESS_CPUTIME_ID,
            libc::CLOCK_BOOTTIME_ALARM,
            -1,
        ] {
            assert_eq!(timehands_clock(id), None, "id {id}");
        }
    }

    #[test]
    fn seconds_beyond_time_t_overflow() {
        let ts = to_timespec(Duration::new(5, 7)).unwrap();
        assert_eq!((ts.tv_sec, ts.tv_nsec), (5, 7));
        assert_eq!(to_timespec(Duration::MAX).err(), Some(EOVERFLOW));
    }
}
