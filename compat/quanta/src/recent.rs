//! The recent time: timehands' coarse clock, unless a program pins its own.
//!
//! quanta's recent time is one global that its upkeep thread (or the
//! program, through [`set_recent`]) stores. Here the coarse clock needs no
//! store: timehands' coarse clock is the kernel's, which the kernel's tick
//! keeps fresh. A program that updates the recent time itself (from an
//! async task, say) still may: what it stores is the recent time until it
//! stores zero, or until an [`Upkeep`](crate::Upkeep) starts or stops (as
//! quanta's upkeep thread overwrites it, and its start stores the time).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Instant;
use crate::padded::Padded;

/// The time [`set_recent`] pinned, in nanoseconds; zero when none is (as in
/// quanta, zero means "not set").
static PINNED: Padded<AtomicU64> = Padded(AtomicU64::new(0));

/// Sets the recent time that [`Clock::recent`](crate::Clock::recent) and
/// [`Instant::recent`] return, until the next call or an
/// [`Upkeep`](crate::Upkeep)'s start or end; `Instant(0)` (an instant of zero
/// nanoseconds) hands the recent time back to timehands' coarse clock.
///
/// ```standalone_crate
/// let clock = quanta::Clock::new();
/// let pinned = clock.now();
/// quanta::set_recent(pinned);
/// assert_eq!(clock.recent(), pinned);
/// # quanta::set_recent(clock.scaled(0));
/// ```
pub fn set_recent(instant: Instant) {
    PINNED.store(instant.0, Ordering::Release);
}

/// The pinned recent time, if there is one.
#[inline]
pub(crate) fn pinned() -> Option<Instant> {
    match PINNED.load(Ordering::Acquire) {
        0 => None,
        nanos => Some(Instant(nanos)),
    }
}

/// Hands the recent time back to the coarse clock.
pub(crate) fn unpin() {
    PINNED.store(0, Ordering::Release);
}

/// timehands' coarse time.
#[inline]
pub(crate) fn coarse() -> Instant {
    Instant::from(timehands::now_coarse())
}
