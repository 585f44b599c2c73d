//! A clock that code takes as a value, so that its tests can move time by hand.
//!
//! Code that reads [`Clock::now`] instead of [`timehands::now`](crate::now)
//! runs on the real clock in production and on a [`Mock`] in tests, with no
//! sleeping and no flakiness:
//!
//! ```
//! use std::time::Duration;
//! use timehands::Clock;
//!
//! struct Lease { clock: Clock, expires: timehands::Instant }
//! impl Lease {
//!     fn expired(&self) -> bool { self.clock.now() >= self.expires }
//! }
//!
//! let (clock, mock) = Clock::mock();
//! let lease = Lease { expires: clock.now() + Duration::from_secs(30), clock };
//! assert!(!lease.expired());
//! mock.advance(Duration::from_secs(30));
//! assert!(lease.expired());
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::Instant;

/// The host clock, or a mock moved by hand.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    mock: Option<Arc<AtomicU64>>,
}

impl Clock {
    /// The host clock: [`now`](Clock::now) is [`timehands::now`](crate::now).
    pub fn new() -> Clock {
        Clock::default()
    }

    /// A clock that stands still until its [`Mock`] moves it. It starts at one
    /// second after CLOCK_MONOTONIC's origin, so that an `Instant` a little
    /// before it can be made.
    pub fn mock() -> (Clock, Mock) {
        let time = Arc::new(AtomicU64::new(1_000_000_000));
        (
            Clock {
                mock: Some(time.clone()),
            },
            Mock(time),
        )
    }

    /// Now, on this clock.
    #[inline]
    pub fn now(&self) -> Instant {
        match &self.mock {
            None => crate::now(),
            Some(time) => Instant::from_nanos(time.load(Ordering::Acquire)),
        }
    }

    /// Now, coarse: [`timehands::now_coarse`](crate::now_coarse), or the mock's
    /// time.
    #[inline]
    pub fn now_coarse(&self) -> Instant {
        match &self.mock {
            None => crate::now_coarse(),
            Some(time) => Instant::from_nanos(time.load(Ordering::Acquire)),
        }
    }

    /// Whether this is a mock.
    pub fn is_mock(&self) -> bool {
        self.mock.is_some()
    }
}

/// The hand that moves a mock [`Clock`] (and every clone of it).
#[derive(Clone, Debug)]
pub struct Mock(Arc<AtomicU64>);

impl Mock {
    /// Moves the clock forward by `d` (saturating at the end of time).
    pub fn advance(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(nanos))
            });
    }

    /// Sets the clock to `t`, forward or back: a test may want time to step.
    pub fn set(&self, t: Instant) {
        self.0.store(t.as_nanos(), Ordering::Release);
    }

    /// The clock's time.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.0.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mock_moves_only_by_hand_and_all_clones_follow() {
        let (clock, mock) = Clock::mock();
        let other = clock.clone();
        let start = clock.now();
        assert_eq!(clock.now(), start);
        mock.advance(Duration::from_millis(3));
        assert_eq!(other.now(), start + Duration::from_millis(3));
        assert_eq!(other.now_coarse(), other.now());
        mock.set(Instant::from_nanos(5));
        assert_eq!(clock.now(), Instant::from_nanos(5));
        mock.advance(Duration::MAX);
        assert_eq!(mock.now(), Instant::from_nanos(u64::MAX));
        assert!(clock.is_mock());
    }

    #[test]
    #[cfg_attr(miri, ignore = "the host clock reads CPUID and the TSC")]
    fn the_default_clock_is_the_host_clock() {
        let clock = Clock::new();
        assert!(!clock.is_mock());
        let a = clock.now();
        assert!(crate::now() >= a);
        assert!(clock.now() >= a);
    }
}
