//! Bounds on real time for C: the earliest and the latest UTC the true time
//! can be, from the kernel's NTP state and timehands' own error bound.

use std::time::Duration;

use libc::{EFAULT, EIO, ENOTSUP, c_int, timespec};
use timehands_rs::{Error, LeapSecond, RealtimeBounds};

use crate::boundary::{contain, fail};

/// Where real time can be, as th_clock_getbounds fills it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct th_realtime_bounds {
    /// The earliest UTC the true time can be (CLOCK_REALTIME's scale).
    pub earliest: timespec,
    /// timehands' CLOCK_REALTIME, read for these bounds.
    pub realtime: timespec,
    /// The latest UTC the true time can be.
    pub latest: timespec,
    /// The kernel's bound on its CLOCK_REALTIME's error against UTC
    /// (adjtimex's maxerror), in ns.
    pub kernel_max_error_ns: u64,
    /// The NTP daemon's estimate of that error (esterror), in ns: not a bound.
    pub kernel_estimated_error_ns: u64,
    /// timehands' bound against the kernel's CLOCK_REALTIME, in ns.
    pub accuracy_ns: u64,
    /// TAI − UTC in seconds, as the kernel has it (0 where no daemon set it).
    pub tai_offset_s: i32,
    /// The leap second announced for the end of the UTC day: 0 none, 1 an
    /// insertion, 2 a deletion, 3 an insertion under way.
    pub leap: c_int,
    /// Whether an NTP daemon keeps the kernel synchronized to UTC. If not,
    /// no bound exists: earliest and latest are zero, the rest is filled.
    pub synchronized: bool,
}

/// `d` as a timespec (saturating: these are times of this century).
// The libc crate deprecates musl's `time_t` for a change of its width to
// come; `time_t::MAX` is right at either width.
#[allow(deprecated)]
fn timespec_of(d: Duration) -> timespec {
    timespec {
        tv_sec: d.as_secs().try_into().unwrap_or(libc::time_t::MAX),
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Nanoseconds of `d`, saturating.
fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The C view of `bounds`.
fn to_c(bounds: &RealtimeBounds) -> th_realtime_bounds {
    th_realtime_bounds {
        earliest: timespec_of(bounds.earliest),
        realtime: timespec_of(bounds.realtime),
        latest: timespec_of(bounds.latest),
        kernel_max_error_ns: nanos_of(bounds.kernel_max_error),
        kernel_estimated_error_ns: nanos_of(bounds.kernel_estimated_error),
        accuracy_ns: nanos_of(bounds.accuracy),
        tai_offset_s: bounds.tai_offset_s,
        leap: match bounds.leap {
            LeapSecond::Insert => 1,
            LeapSecond::Delete => 2,
            LeapSecond::InProgress => 3,
            _ => 0,
        },
        synchronized: true,
    }
}

/// The bounds when the kernel is not synchronized: our Realtime and its
/// accuracy, no bound.
fn unsynchronized() -> th_realtime_bounds {
    let zero = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    th_realtime_bounds {
        earliest: zero,
        realtime: timespec_of(timehands_rs::gettime(timehands_rs::ClockId::Realtime)),
        latest: zero,
        kernel_max_error_ns: 0,
        kernel_estimated_error_ns: 0,
        accuracy_ns: nanos_of(timehands_rs::getres(timehands_rs::ClockId::Realtime).accuracy),
        tai_offset_s: 0,
        leap: 0,
        synchronized: false,
    }
}

/// Fills `*bounds` with the earliest and the latest UTC the true time can be
/// now: timehands' CLOCK_REALTIME widened by its bound against the kernel's
/// and by the kernel's own bound against UTC (which an NTP daemon keeps);
/// within a second of midnight UTC with a leap second announced, by that
/// second too. When no NTP daemon keeps the kernel synchronized, `synchronized`
/// is false and no bound is given.
///
/// Returns 0, or -1 with errno EFAULT if `bounds` is NULL, ENOTSUP on an OS
/// whose NTP state timehands does not read (Android, OpenBSD), or the errno
/// of adjtimex(2) or ntp_gettime(2) if it fails (EIO should the library hit
/// a bug).
///
/// # Safety
/// `bounds` is NULL or points to a writable `struct th_realtime_bounds`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_getbounds(bounds: *mut th_realtime_bounds) -> c_int {
    if bounds.is_null() {
        return fail(EFAULT);
    }
    let filled = contain(
        || match timehands_rs::realtime_bounds() {
            Ok(b) => Ok(to_c(&b)),
            Err(Error::Unsynchronized) => Ok(unsynchronized()),
            Err(Error::Ntp { errno }) => Err(errno),
            Err(Error::NoNtpState { .. }) => Err(ENOTSUP),
            Err(_) => Err(EIO),
        },
        || Err(EIO),
    );
    match filled {
        Ok(filled) => {
            // SAFETY: `bounds` is not NULL, and the caller promises it is
            // writable.
            unsafe { bounds.write(filled) };
            0
        }
        Err(code) => fail(code),
    }
}
