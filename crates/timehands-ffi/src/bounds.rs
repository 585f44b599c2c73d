//! Bounds on real time for C: the earliest and the latest UTC the true time
//! can be, from the best source on the machine (chronyd's tracking, AWS
//! ClockBound's shared memory, the kernel's NTP state) and timehands' own
//! error bound; and TrueTime's verbs on them.

use std::time::Duration;

use libc::{EAGAIN, EFAULT, EINVAL, EIO, ENOTSUP, c_int, timespec};
use timehands_rs::{BoundsSource, BoundsStatus, Error, LeapSecond, RealtimeBounds};

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
    /// (adjtimex's maxerror), in ns, as last read.
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
    /// Whether a source bounds real time at all. If not, no bound exists:
    /// only `realtime` is filled, the rest is zero.
    pub synchronized: bool,
    /// Where the bound comes from: 0 the kernel, 1 chronyd, 2 ClockBound
    /// (2.x's segment), 3 ClockBound 3's page, 4 the VMClock device, 5
    /// ptp4l.
    pub source: c_int,
    /// As ClockBound's status: 0 unknown (no bound), 1 synchronized, 2
    /// free-running (the source stopped updating the clock; the bound still
    /// holds, and grows).
    pub status: c_int,
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

/// `t` as a time since the epoch, or `None` if it is not a valid one (a
/// negative second, nanoseconds outside 0 to 999 999 999).
fn instant_of(t: &timespec) -> Option<Duration> {
    let seconds = u64::try_from(t.tv_sec).ok()?;
    let nanos = u32::try_from(t.tv_nsec)
        .ok()
        .filter(|&n| n < 1_000_000_000)?;
    Some(Duration::new(seconds, nanos))
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
        source: match bounds.source {
            BoundsSource::Chronyd => 1,
            BoundsSource::ClockBound => 2,
            BoundsSource::ClockBound3 => 3,
            BoundsSource::VmClock => 4,
            BoundsSource::Ptp4l => 5,
            _ => 0,
        },
        status: match bounds.status {
            BoundsStatus::FreeRunning => 2,
            _ => 1,
        },
    }
}

/// The bounds when no source bounds real time: our Realtime, no bound.
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
        accuracy_ns: 0,
        tai_offset_s: 0,
        leap: 0,
        synchronized: false,
        source: 0,
        status: 0,
    }
}

/// The errno for an error of the bounds.
fn errno_of(error: Error) -> c_int {
    match error {
        Error::Unsynchronized => EAGAIN,
        Error::Ntp { errno } => errno,
        Error::NoNtpState { .. } => ENOTSUP,
        _ => EIO,
    }
}

/// Fills `*bounds` with the earliest and the latest UTC the true time can be
/// now: timehands' CLOCK_REALTIME widened by its bound against the kernel's
/// and by the bound the best source on the machine gives (chronyd's
/// tracking, AWS ClockBound's shared memory, the kernel's maxerror), grown
/// at the rate the source states since it said it; within a second of
/// midnight UTC with a leap second announced, by that second too. When no
/// source bounds real time, `synchronized` is false and no bound is given.
/// Safe in a signal handler on Linux: no lock, no allocation, no socket (a
/// thread of the library asks the sources).
///
/// Returns 0, or -1 with errno EFAULT if `bounds` is NULL, ENOTSUP on an OS
/// whose NTP state timehands does not read (Android, OpenBSD) where no
/// source answers, or the errno of adjtimex(2) or ntp_gettime(2) if it
/// fails (EIO should the library hit a bug).
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
            Err(e) => Err(errno_of(e)),
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

/// The instant `*instant`, or the errno that refuses it.
///
/// # Safety
/// `instant` is NULL or points to a readable `struct timespec`.
unsafe fn read_instant(instant: *const timespec) -> Result<Duration, c_int> {
    if instant.is_null() {
        return Err(EFAULT);
    }
    // SAFETY: not NULL, and the caller promises it is readable.
    instant_of(unsafe { &*instant }).ok_or(EINVAL)
}

/// `verb` of the bounds now on `*instant`: 1 or 0, 0 when no bound exists
/// (nothing is sure then), or -1 with errno.
///
/// # Safety
/// As [`read_instant`].
unsafe fn answer(instant: *const timespec, verb: fn(&RealtimeBounds, Duration) -> bool) -> c_int {
    // SAFETY: passed on from the caller.
    let instant = match unsafe { read_instant(instant) } {
        Ok(instant) => instant,
        Err(code) => return fail(code),
    };
    let answered = contain(
        || match timehands_rs::realtime_bounds() {
            Ok(b) => Ok(c_int::from(verb(&b, instant))),
            Err(Error::Unsynchronized) => Ok(0),
            Err(e) => Err(errno_of(e)),
        },
        || Err(EIO),
    );
    answered.unwrap_or_else(fail)
}

/// Whether the UTC instant `*instant` (CLOCK_REALTIME's scale) has surely
/// passed: it is before the earliest the true time can be now (TrueTime's
/// `after`). Safe in a signal handler on Linux, as th_clock_getbounds.
///
/// Returns 1 if it surely passed, 0 if not or if no source bounds real time
/// (nothing is sure then), or -1 with errno EFAULT if `instant` is NULL,
/// EINVAL if it is not a valid time since the epoch (a negative second,
/// nanoseconds outside 0 to 999999999), or th_clock_getbounds' errors.
///
/// # Safety
/// `instant` is NULL or points to a readable `struct timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_surely_past(instant: *const timespec) -> c_int {
    // SAFETY: the caller's promise, passed on.
    unsafe { answer(instant, RealtimeBounds::surely_past) }
}

/// Whether the UTC instant `*instant` has surely not come yet: it is after
/// the latest the true time can be now (TrueTime's `before`). Returns and
/// errors as th_clock_surely_past.
///
/// # Safety
/// `instant` is NULL or points to a readable `struct timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_surely_not_yet(instant: *const timespec) -> c_int {
    // SAFETY: the caller's promise, passed on.
    unsafe { answer(instant, RealtimeBounds::surely_not_yet) }
}

/// Commit wait: sleeps until the UTC instant `*instant` is surely past (the
/// earliest the true time can be is after it), then fills `*bounds` (if not
/// NULL) with the bounds that say so. Not for a signal handler: it sleeps.
///
/// Returns 0, or -1 with errno EFAULT if `instant` is NULL, EINVAL if it is
/// not a valid time since the epoch, EAGAIN if no source bounds real time
/// (now, or as the wait goes on), or th_clock_getbounds' errors.
///
/// # Safety
/// `instant` is NULL or points to a readable `struct timespec`; `bounds` is
/// NULL or points to a writable `struct th_realtime_bounds`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_commit_wait(
    instant: *const timespec,
    bounds: *mut th_realtime_bounds,
) -> c_int {
    // SAFETY: passed on from the caller.
    let instant = match unsafe { read_instant(instant) } {
        Ok(instant) => instant,
        Err(code) => return fail(code),
    };
    let waited = contain(
        || timehands_rs::commit_wait(instant).map_err(errno_of),
        || Err(EIO),
    );
    match waited {
        Ok(b) => {
            if !bounds.is_null() {
                // SAFETY: not NULL, and the caller promises it is writable.
                unsafe { bounds.write(to_c(&b)) };
            }
            0
        }
        Err(code) => fail(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_a_time_since_the_epoch() {
        let t = |tv_sec, tv_nsec| timespec { tv_sec, tv_nsec };
        assert_eq!(instant_of(&t(5, 7)), Some(Duration::new(5, 7)));
        assert_eq!(
            instant_of(&t(0, 999_999_999)),
            Some(Duration::new(0, 999_999_999))
        );
        assert_eq!(instant_of(&t(-1, 0)), None);
        assert_eq!(instant_of(&t(1, 1_000_000_000)), None);
        assert_eq!(instant_of(&t(1, -1)), None);
    }

    #[test]
    fn the_verbs_refuse_null_and_invalid_instants() {
        // SAFETY: NULL, and a valid timespec.
        unsafe {
            assert_eq!(th_clock_surely_past(std::ptr::null()), -1);
            assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(EFAULT));
            let bad = timespec {
                tv_sec: 1,
                tv_nsec: 2_000_000_000,
            };
            assert_eq!(th_clock_surely_not_yet(&bad), -1);
            assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(EINVAL));
            assert_eq!(th_clock_commit_wait(&bad, std::ptr::null_mut()), -1);
        }
    }

    /// An instant long past is surely past where a source bounds real
    /// time; an instant far ahead is surely not yet; neither otherwise.
    #[test]
    #[cfg_attr(miri, ignore = "reads the CPU's counter")]
    fn the_verbs_answer_on_this_machine() {
        let synchronized = timehands_rs::realtime_bounds().is_ok();
        let long_ago = timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        let far_ahead = timespec {
            tv_sec: 4_000_000_000,
            tv_nsec: 0,
        };
        // SAFETY: valid timespecs.
        unsafe {
            assert_eq!(th_clock_surely_past(&long_ago), c_int::from(synchronized));
            assert_eq!(
                th_clock_surely_not_yet(&far_ahead),
                c_int::from(synchronized)
            );
            assert_eq!(th_clock_surely_past(&far_ahead), 0);
            assert_eq!(th_clock_surely_not_yet(&long_ago), 0);
        }
    }
}
