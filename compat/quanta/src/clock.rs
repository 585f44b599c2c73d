//! `Clock`: the host clock, or a mock moved by hand.
//!
//! quanta's `Clock` holds its TSC calibration; this one holds nothing but
//! whether it is mocked, because timehands keeps one clock per process. Its
//! raw values are nanoseconds (quanta's are TSC ticks on most machines), so
//! [`Clock::scaled`] and [`Clock::delta_as_nanos`] convert nothing, and
//! `delta_as_nanos(0, raw())` is the nanosecond timeline governor builds on it.

use std::time::Duration;

use crate::{Instant, Mock, recent};

/// A clock to take measurements from: quanta's `Clock`, on timehands.
///
/// ```
/// let clock = quanta::Clock::new();
/// let start = clock.raw();
/// let end = clock.raw();
/// assert!(clock.delta_as_nanos(start, end) < 1_000_000_000);
/// assert!(clock.now() >= clock.scaled(end));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Clock {
    source: Source,
}

/// Where a clock's time comes from.
#[derive(Clone, Debug, Default)]
enum Source {
    /// [`timehands::now`] and [`timehands::now_coarse`].
    #[default]
    Host,
    /// The mock's nanoseconds, moved only by hand.
    Mock(Mock),
}

impl Clock {
    /// The host clock. Unlike quanta's, it calibrates nothing and never
    /// blocks: every `Clock` reads the one clock timehands keeps.
    pub fn new() -> Clock {
        Clock::default()
    }

    /// A clock that stands at zero until its [`Mock`] moves it.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (clock, mock) = quanta::Clock::mock();
    /// assert_eq!(clock.now(), clock.recent());
    /// mock.increment(Duration::from_secs(1));
    /// assert_eq!(clock.raw(), 1_000_000_000);
    /// ```
    pub fn mock() -> (Clock, std::sync::Arc<Mock>) {
        let mock = Mock::new();
        let clock = Clock {
            source: Source::Mock(mock.clone()),
        };
        (clock, std::sync::Arc::new(mock))
    }

    /// Now, on this clock: [`timehands::now`], never earlier than any
    /// instant any thread read before.
    #[inline]
    pub fn now(&self) -> Instant {
        Instant(self.raw())
    }

    /// Now, in nanoseconds: the same as [`Clock::now`], as a number.
    #[inline]
    pub fn raw(&self) -> u64 {
        match &self.source {
            Source::Host => timehands::now().as_nanos(),
            Source::Mock(mock) => mock.value(),
        }
    }

    /// The instant of a [`Clock::raw`] value: raw values are nanoseconds
    /// already.
    pub fn scaled(&self, value: u64) -> Instant {
        Instant(value)
    }

    /// The nanoseconds from `start` to `end`, two [`Clock::raw`] values; zero
    /// if `end` is not after `start`.
    #[inline]
    pub fn delta_as_nanos(&self, start: u64, end: u64) -> u64 {
        end.saturating_sub(start)
    }

    /// The time from `start` to `end`, two [`Clock::raw`] values; zero if
    /// `end` is not after `start`.
    pub fn delta(&self, start: u64, end: u64) -> Duration {
        Duration::from_nanos(self.delta_as_nanos(start, end))
    }

    /// The recent time: a mock's time, or the one
    /// [`set_recent`](crate::set_recent) pinned, or
    /// [`timehands::now_coarse`].
    ///
    /// quanta's host clock returns zero here until an
    /// [`Upkeep`](crate::Upkeep) starts, and a stale time after it stops;
    /// this one is the kernel's tick and 50 µs behind (six ticks at most;
    /// [`timehands::getres`] of `MonotonicCoarse` says)
    /// [`Clock::now`], whether or not an upkeep runs and whatever the
    /// scheduler does.
    #[inline]
    pub fn recent(&self) -> Instant {
        match &self.source {
            Source::Host => recent::pinned().unwrap_or_else(recent::coarse),
            Source::Mock(mock) => Instant(mock.value()),
        }
    }

    /// Whether this is a mocked clock.
    pub(crate) fn is_mock(&self) -> bool {
        matches!(self.source, Source::Mock(_))
    }
}
