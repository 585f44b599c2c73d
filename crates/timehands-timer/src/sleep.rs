//! `sleep_until`: a thread's absolute sleep on CLOCK_MONOTONIC.

use timehands::Instant;

/// Blocks the calling thread until `deadline`, with
/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`: an absolute sleep, so
/// a signal or a preemption before the call does not push the wake-up later
/// (a relative sleep would add the delay), and the thread never wakes before
/// `deadline`. Returns at once for a deadline that has passed.
///
/// ```
/// use std::time::Duration;
///
/// let deadline = timehands::now() + Duration::from_micros(200);
/// timehands_timer::sleep_until(deadline);
/// // Checked on the kernel's CLOCK_MONOTONIC itself (std's Instant), which
/// // the sleep is measured on.
/// assert!(timehands::Instant::from(std::time::Instant::now()) >= deadline);
/// ```
pub fn sleep_until(deadline: Instant) {
    let at = timespec(deadline.as_nanos());
    loop {
        // SAFETY: `at` is a valid timespec for the call; the remaining-time
        // pointer may be null for an absolute sleep.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &at,
                std::ptr::null_mut(),
            )
        };
        // An interrupted absolute sleep is simply resumed with the same
        // deadline; any other result means the deadline has passed.
        if rc != libc::EINTR {
            return;
        }
    }
}

/// Nanoseconds since CLOCK_MONOTONIC's origin as the kernel takes them.
/// Lossless: u64::MAX ns is under 2^35 s, and a 64-bit `time_t` holds that.
pub(crate) fn timespec(nanos: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (nanos / 1_000_000_000) as libc::time_t,
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    }
}
