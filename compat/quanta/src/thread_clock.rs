//! The clock [`with_clock`] sets for one thread's [`Instant`](crate::Instant)s.
//!
//! quanta looks in a thread-local on every `Instant::now`. Here a count of
//! the closures running under [`with_clock`], in any thread, comes first:
//! while it is zero, as it is in a program that never mocks, `Instant::now`
//! is one load and a branch away from [`timehands::now`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::Clock;
use crate::padded::Padded;

/// The closures running under [`with_clock`] now, in all threads. A thread
/// that runs one counted it before it set its clock (program order is all
/// it needs to see its own count: `Relaxed`), and a thread that does not
/// finds its own clock unset however it reads the count.
static RUNNING: Padded<AtomicUsize> = Padded(AtomicUsize::new(0));

thread_local! {
    /// This thread's clock, while a closure runs under [`with_clock`].
    static THREAD_CLOCK: RefCell<Option<Clock>> = const { RefCell::new(None) };
}

/// Runs `f` with `clock` as this thread's clock: [`Instant::now`],
/// [`Instant::recent`] and [`Instant::elapsed`] read it until `f` returns or
/// unwinds. [`Clock`]s themselves are not affected.
///
/// ```
/// let (clock, mock) = quanta::Clock::mock();
/// quanta::with_clock(&clock, || {
///     let start = quanta::Instant::now();
///     mock.increment(5_000u64);
///     assert_eq!(start.elapsed().as_nanos(), 5_000);
/// });
/// ```
///
/// [`Instant::now`]: crate::Instant::now
/// [`Instant::recent`]: crate::Instant::recent
/// [`Instant::elapsed`]: crate::Instant::elapsed
pub fn with_clock<T>(clock: &Clock, f: impl FnOnce() -> T) -> T {
    let _restore = Restore::set(clock.clone());
    f()
}

/// The earlier clock of this thread, set back on drop: on return and on
/// unwinding, where quanta leaves the closure's clock set.
struct Restore {
    earlier: Option<Clock>,
}

impl Restore {
    fn set(clock: Clock) -> Restore {
        RUNNING.fetch_add(1, Ordering::Relaxed);
        let earlier = THREAD_CLOCK.with(|current| current.replace(Some(clock)));
        Restore { earlier }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        let earlier = self.earlier.take();
        THREAD_CLOCK.with(|current| current.replace(earlier));
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `read` of this thread's clock, if [`with_clock`] set one.
#[inline]
pub(crate) fn read<T>(read: impl FnOnce(&Clock) -> T) -> Option<T> {
    if RUNNING.load(Ordering::Relaxed) == 0 {
        return None;
    }
    read_thread_clock(read)
}

#[cold]
fn read_thread_clock<T>(read: impl FnOnce(&Clock) -> T) -> Option<T> {
    THREAD_CLOCK
        .try_with(|clock| clock.borrow().as_ref().map(read))
        .ok()
        .flatten()
}
