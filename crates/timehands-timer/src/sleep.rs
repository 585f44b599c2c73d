//! `sleep_until`: a thread's sleep to an absolute deadline.
//!
//! On Linux and Android it is one `clock_nanosleep(CLOCK_MONOTONIC,
//! TIMER_ABSTIME)`, CLOCK_MONOTONIC being the origin of `timehands::Instant`
//! there. Elsewhere (macOS has no `clock_nanosleep`, Windows and WASI no
//! POSIX clocks) it is std's relative sleep for what is left of the time on
//! std's monotonic clock, which `timehands::Instant` converts from exactly,
//! repeated until the deadline has passed.

use timehands::Instant;

/// Blocks the calling thread until `deadline`; returns at once for a
/// deadline that has passed. The thread never wakes before `deadline` on
/// the kernel's monotonic clock (std's `Instant`).
///
/// On Linux and Android the sleep is absolute
/// (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`): a signal or a
/// preemption before the call does not push the wake-up later. Elsewhere it
/// is relative (see the crate's [Per OS](crate#per-os) notes), so a
/// preemption between reading the clock and sleeping makes it later by as
/// much.
///
/// ```
/// use std::time::Duration;
///
/// let deadline = timehands::now() + Duration::from_micros(200);
/// timehands_timer::sleep_until(deadline);
/// // Checked on the kernel's monotonic clock itself (std's Instant), which
/// // the sleep is measured on.
/// assert!(timehands::Instant::from(std::time::Instant::now()) >= deadline);
/// ```
pub fn sleep_until(deadline: Instant) {
    sleep(deadline);
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn sleep(deadline: Instant) {
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

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn sleep(deadline: Instant) {
    loop {
        let now = Instant::from(std::time::Instant::now());
        // `thread::sleep` may end early (on a signal, or by the rounding of
        // a coarser timer), so the clock says when it is over.
        let Some(left) = deadline
            .checked_duration_since(now)
            .filter(|d| !d.is_zero())
        else {
            return;
        };
        std::thread::sleep(left);
    }
}

/// Nanoseconds since CLOCK_MONOTONIC's origin as the kernel takes them.
/// Lossless: u64::MAX ns is under 2^35 s, and a 64-bit `time_t` holds that.
/// (`as _`: the field's type, `time_t`, whose alias the libc crate marks
/// deprecated on musl.)
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn timespec(nanos: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (nanos / 1_000_000_000) as _,
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    }
}
