//! `Mock`: the hand that moves a mocked [`Clock`](crate::Clock).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// An amount of time a [`Mock`] can move by: nanoseconds as a `u64`, or a
/// [`Duration`].
pub trait IntoNanoseconds {
    /// The amount in nanoseconds.
    fn into_nanos(self) -> u64;
}

impl IntoNanoseconds for u64 {
    fn into_nanos(self) -> u64 {
        self
    }
}

impl IntoNanoseconds for Duration {
    /// The duration's nanoseconds, `u64::MAX` for one of 584 years or more
    /// (quanta's keeps the low 64 bits of the count).
    fn into_nanos(self) -> u64 {
        u64::try_from(self.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The time of a mocked [`Clock`](crate::Clock), moved by hand, forwards or
/// back: a mocked clock promises no monotonicity.
///
/// Clones move the same time. It saturates at zero and at `u64::MAX`
/// nanoseconds, where quanta's panics in a debug build and wraps around in a
/// release one.
///
/// ```
/// let (clock, mock) = quanta::Clock::mock();
/// mock.increment(42u64);
/// mock.decrement(100u64);
/// assert_eq!(mock.value(), 0);
/// assert_eq!(clock.raw(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct Mock {
    nanos: Arc<AtomicU64>,
}

impl Mock {
    /// A mock at zero.
    pub(crate) fn new() -> Mock {
        Mock {
            nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Moves the time forwards by `amount`.
    pub fn increment<N: IntoNanoseconds>(&self, amount: N) {
        let amount = amount.into_nanos();
        self.moved(|nanos| nanos.saturating_add(amount));
    }

    /// Moves the time back by `amount`.
    pub fn decrement<N: IntoNanoseconds>(&self, amount: N) {
        let amount = amount.into_nanos();
        self.moved(|nanos| nanos.saturating_sub(amount));
    }

    /// The time, in nanoseconds.
    pub fn value(&self) -> u64 {
        self.nanos.load(Ordering::Acquire)
    }

    /// Moves the time as `step` says, as one step however many threads move
    /// it at once.
    fn moved(&self, step: impl Fn(u64) -> u64) {
        // `step` always answers, so the update always happens.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |nanos| {
                Some(step(nanos))
            });
    }
}
