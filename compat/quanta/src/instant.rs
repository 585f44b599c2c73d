//! `Instant`: quanta's point in time, nanoseconds on timehands' Monotonic.
//!
//! An instant from the host clock is [`timehands::now`]'s nanoseconds (on
//! Linux, CLOCK_MONOTONIC's), so it can be compared with `std::time::Instant`
//! and with the kernel's timestamps; one from a mocked clock is the mock's
//! nanoseconds. The arithmetic is quanta's: subtracting an instant saturates
//! at zero, adding or subtracting a duration panics where the result would not
//! fit (as `std::time::Instant`'s), and `Debug` prints the nanoseconds.

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

use crate::{recent, thread_clock};

/// A point in time, in nanoseconds: quanta's `Instant`, read from timehands.
///
/// ```
/// use std::time::Duration;
///
/// let start = quanta::Instant::now();
/// let deadline = start + Duration::from_millis(5);
/// assert_eq!(deadline.duration_since(start), Duration::from_millis(5));
/// assert_eq!(start.duration_since(deadline), Duration::ZERO); // saturates
/// assert_eq!(start.checked_duration_since(deadline), None);
/// ```
///
/// ## Monotonicity
///
/// quanta saturates [`duration_since`](Instant::duration_since),
/// [`elapsed`](Instant::elapsed) and `-` at zero because its TSC reads can go
/// back across CPUs. Here they cannot: [`Instant::now`] never returns an
/// instant earlier than one any thread has seen, so a zero means the two
/// instants were taken in that order, not that the clock went back. The
/// saturation stays, as quanta documents it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Instant(pub(crate) u64);

impl Instant {
    /// Now: [`timehands::now`], or the clock [`with_clock`](crate::with_clock)
    /// set for this thread.
    ///
    /// quanta's first call calibrates its TSC for up to 200 ms; this one
    /// measures nothing before it answers (timehands reads the kernel's clock
    /// until its counter's frequency is known).
    #[inline]
    pub fn now() -> Instant {
        match thread_clock::read(crate::Clock::now) {
            Some(now) => now,
            None => Instant::from(timehands::now()),
        }
    }

    /// The recent time: the one [`set_recent`](crate::set_recent) pinned,
    /// else the [`with_clock`](crate::with_clock) clock's recent time, else
    /// [`timehands::now_coarse`], the kernel's coarse clock (no thread keeps it).
    ///
    /// quanta's is its upkeep thread's last store (as stale as the interval,
    /// and stopped when the thread stops), or `now()` itself until an upkeep
    /// first stores one. timehands' coarse time is the kernel's tick and
    /// 50 µs (six ticks at most; [`timehands::getres`] of `MonotonicCoarse` says) behind
    /// [`Instant::now`], never ahead of it, whether or not an
    /// [`Upkeep`](crate::Upkeep) runs: a program that wants `now()` reads
    /// `now()`.
    #[inline]
    pub fn recent() -> Instant {
        match recent::pinned() {
            Some(pinned) => pinned,
            None => thread_clock::read(crate::Clock::recent).unwrap_or_else(recent::coarse),
        }
    }

    /// The time from `earlier` to this instant; zero if `earlier` is later.
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }

    /// The time from `earlier` to this instant, or `None` if `earlier` is
    /// later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration::from_nanos)
    }

    /// The time from `earlier` to this instant; zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.checked_duration_since(earlier).unwrap_or_default()
    }

    /// The time since this instant, by [`Instant::now`]; zero if it is in
    /// the future.
    pub fn elapsed(&self) -> Duration {
        Instant::now() - *self
    }

    /// This instant plus `duration`, or `None` past `u64::MAX` nanoseconds.
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        let nanos = u64::try_from(duration.as_nanos()).ok()?;
        self.0.checked_add(nanos).map(Instant)
    }

    /// This instant less `duration`, or `None` before zero.
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        let nanos = u64::try_from(duration.as_nanos()).ok()?;
        self.0.checked_sub(nanos).map(Instant)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// Past `u64::MAX` nanoseconds; [`Instant::checked_add`] does not.
    fn add(self, other: Duration) -> Instant {
        self.checked_add(other)
            .expect("overflow when adding duration to instant")
    }
}

impl AddAssign<Duration> for Instant {
    /// # Panics
    /// As `+` does. quanta's wraps around silently in a release build.
    fn add_assign(&mut self, other: Duration) {
        *self = *self + other;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    /// # Panics
    /// Before zero; [`Instant::checked_sub`] does not.
    fn sub(self, other: Duration) -> Instant {
        self.checked_sub(other)
            .expect("overflow when subtracting duration from instant")
    }
}

impl SubAssign<Duration> for Instant {
    /// # Panics
    /// As `-` does. quanta's wraps around silently in a release build.
    fn sub_assign(&mut self, other: Duration) {
        *self = *self - other;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    /// The time from `other` to this instant; zero if `other` is later.
    fn sub(self, other: Instant) -> Duration {
        self.duration_since(other)
    }
}

impl PartialOrd for Instant {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Instant {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

impl fmt::Debug for Instant {
    /// The nanoseconds, as quanta prints them: `Instant(42)` prints `42`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<timehands::Instant> for Instant {
    /// The same nanoseconds: a host clock's instants are timehands'.
    #[inline]
    fn from(t: timehands::Instant) -> Instant {
        Instant(t.as_nanos())
    }
}

impl From<Instant> for timehands::Instant {
    /// The same nanoseconds (a mocked clock's instants are the mock's).
    fn from(t: Instant) -> timehands::Instant {
        timehands::Instant::from_nanos(t.0)
    }
}

#[cfg(feature = "prost")]
impl From<Instant> for prost_types::Timestamp {
    /// The instant's nanoseconds as seconds and nanoseconds (quanta's
    /// conversion: since the clock's origin, not since the Unix epoch).
    fn from(t: Instant) -> prost_types::Timestamp {
        let since_origin = Duration::from_nanos(t.0);
        prost_types::Timestamp {
            // u64 nanoseconds are at most 18 446 744 073 s: they fit an i64.
            seconds: since_origin.as_secs() as i64,
            // Below a billion: they fit an i32.
            nanos: since_origin.subsec_nanos() as i32,
        }
    }
}

#[cfg(all(test, feature = "prost"))]
mod tests {
    use super::Instant;

    #[test]
    fn an_instant_is_a_timestamp_of_its_nanoseconds() {
        let timestamp = prost_types::Timestamp::from(Instant(3_000_000_042));
        assert_eq!((timestamp.seconds, timestamp.nanos), (3, 42));
        let last: prost_types::Timestamp = Instant(u64::MAX).into();
        assert_eq!((last.seconds, last.nanos), (18_446_744_073, 709_551_615));
    }
}
