//! The kernel's clocks (CLOCK_MONOTONIC, or CLOCK_REALTIME with `-c 1`), read
//! and slept on directly.
//!
//! Wakeup latency is the distance between the deadline a thread asked the
//! kernel for and the moment it runs again, so both ends are taken on the clock
//! the kernel sleeps on (as cyclictest does), not on timehands' own clock:
//! a steering offset between the two would show up as latency.

use std::io;

use timehands::Instant;

/// Nanoseconds in a second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// A kernel clock that a thread can read and sleep on: cyclictest's `-c`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Clock {
    /// CLOCK_MONOTONIC, `-c 0` (the default).
    #[default]
    Monotonic,
    /// CLOCK_REALTIME, `-c 1`.
    Realtime,
}

impl Clock {
    /// cyclictest's `-c` number: 0 or 1.
    pub fn from_number(number: u8) -> Option<Clock> {
        match number {
            0 => Some(Clock::Monotonic),
            1 => Some(Clock::Realtime),
            _ => None,
        }
    }

    /// The kernel's id of the clock.
    pub fn id(self) -> libc::clockid_t {
        match self {
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
            Clock::Realtime => libc::CLOCK_REALTIME,
        }
    }

    /// The clock now.
    pub fn now(self) -> Instant {
        // Both clocks exist on every Linux.
        Instant::from_nanos(
            timehands::sys::clock_nanos(self.id()).expect("a clock every Linux has"),
        )
    }

    /// Sleeps until `deadline` on this clock (TIMER_ABSTIME), so that a late
    /// wakeup does not push every later deadline back.
    ///
    /// A signal ends the sleep early with [`io::ErrorKind::Interrupted`].
    pub fn sleep_until(self, deadline: Instant) -> io::Result<()> {
        nanosleep(self, libc::TIMER_ABSTIME, deadline.as_nanos())
    }

    /// Sleeps for `nanos` on this clock, relative to now (cyclictest's `-r`).
    /// A signal ends the sleep early.
    pub fn sleep_for(self, nanos: u64) -> io::Result<()> {
        nanosleep(self, 0, nanos)
    }
}

/// Sleeps for `nanos` on CLOCK_MONOTONIC, relative to now (what an ordinary
/// program's timeout does). A signal ends the sleep early.
pub fn sleep_for(nanos: u64) -> io::Result<()> {
    Clock::Monotonic.sleep_for(nanos)
}

/// A timespec of `nanos`.
pub fn timespec(nanos: u64) -> libc::timespec {
    libc::timespec {
        // `as _`: time_t's width is the C library's (musl's is to change).
        tv_sec: (nanos / NANOS_PER_SEC) as _,
        tv_nsec: (nanos % NANOS_PER_SEC) as libc::c_long,
    }
}

fn nanosleep(clock: Clock, flags: libc::c_int, nanos: u64) -> io::Result<()> {
    let ts = timespec(nanos);
    // SAFETY: `ts` is a valid timespec; the remainder pointer may be null.
    let ret = unsafe { libc::clock_nanosleep(clock.id(), flags, &ts, std::ptr::null_mut()) };
    // clock_nanosleep returns the error number instead of setting errno.
    match ret {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// cyclictest's `-R`: the resolution the kernel reports for `clock` against
/// the smallest step seen over about a millisecond of back-to-back reads,
/// as warnings when the measured one is coarser (or always with `-v`).
pub fn check_resolution(clock: Clock, verbose: bool, list: bool) {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid, writable timespec.
    let reported = (unsafe { libc::clock_getres(clock.id(), &mut res) } == 0)
        .then(|| res.tv_sec as u64 * NANOS_PER_SEC + res.tv_nsec as u64);
    let start = clock.now();
    let mut readings = Vec::new();
    while clock.now().as_nanos() - start.as_nanos() < 1_000_000 && readings.len() < 100_000 {
        readings.push(clock.now().as_nanos());
    }
    let steps = readings.windows(2).map(|w| w[1] - w[0]);
    if list {
        eprintln!(
            "INFO: For {} consecutive calls to clock_gettime():",
            readings.len()
        );
        eprintln!("INFO: time, delta time (nsec)");
        for (at, step) in readings.iter().skip(1).zip(steps.clone()) {
            eprintln!(
                "INFO: {}.{:09}  {step:5}",
                at / NANOS_PER_SEC,
                at % NANOS_PER_SEC
            );
        }
    }
    let measured = steps.filter(|&s| s > 0).min().unwrap_or(0);
    if verbose || reported.is_some_and(|r| measured > r) {
        match reported {
            Some(r) => eprintln!("WARN: reported clock resolution: {r} nsec"),
            None => eprintln!("WARN: clock_getres failed"),
        }
        eprintln!("WARN: measured clock resolution approximately: {measured} nsec");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_in_the_past_returns_at_once_and_the_clock_does_not_go_back() {
        for clock in [Clock::Monotonic, Clock::Realtime] {
            let before = clock.now();
            clock
                .sleep_until(Instant::from_nanos(before.as_nanos().saturating_sub(1)))
                .expect("sleeps");
            assert!(clock.now() >= before);
        }
    }
}
