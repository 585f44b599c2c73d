//! The kernel's CLOCK_MONOTONIC, read and slept on directly.
//!
//! Wakeup latency is the distance between the deadline a thread asked the
//! kernel for and the moment it runs again, so both ends are taken on the clock
//! the kernel sleeps on (as cyclictest does), not on timehands' own clock:
//! a steering offset between the two would show up as latency.

use std::io;

use timehands::Instant;

/// Nanoseconds in a second.
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// CLOCK_MONOTONIC now.
pub fn now() -> Instant {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on
    // every Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Instant::from_nanos(ts.tv_sec as u64 * NANOS_PER_SEC + ts.tv_nsec as u64)
}

/// Sleeps until `deadline` on CLOCK_MONOTONIC (TIMER_ABSTIME), so that a late
/// wakeup does not push every later deadline back.
///
/// A signal ends the sleep early with [`io::ErrorKind::Interrupted`].
pub fn sleep_until(deadline: Instant) -> io::Result<()> {
    nanosleep(libc::TIMER_ABSTIME, deadline.as_nanos())
}

/// Sleeps for `nanos` on CLOCK_MONOTONIC, relative to now (what an ordinary
/// program's timeout does). A signal ends the sleep early.
pub fn sleep_for(nanos: u64) -> io::Result<()> {
    nanosleep(0, nanos)
}

fn nanosleep(flags: libc::c_int, nanos: u64) -> io::Result<()> {
    let ts = libc::timespec {
        tv_sec: (nanos / NANOS_PER_SEC) as libc::time_t,
        tv_nsec: (nanos % NANOS_PER_SEC) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remainder pointer may be null.
    let ret =
        unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, flags, &ts, std::ptr::null_mut()) };
    // clock_nanosleep returns the error number instead of setting errno.
    match ret {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_in_the_past_returns_at_once_and_the_clock_does_not_go_back() {
        let before = now();
        sleep_until(Instant::from_nanos(before.as_nanos().saturating_sub(1))).expect("sleeps");
        assert!(now() >= before);
    }
}
