//! The writer lock: one writer at a time, and the state only writers touch.
//!
//! Readers never come here. Writers (windups, slews, frequency and realtime
//! changes) take turns: `windup` tries once and leaves the work to the writer
//! that holds the lock; the others wait for it, as writers may.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};

use crate::engine::sync::{AtomicBool, Ordering, relax};

/// A spin lock around `T`: the smallest lock that works without an OS.
pub(crate) struct WriterLock<T> {
    locked: AtomicBool,
    state: UnsafeCell<T>,
}

// SAFETY: the state is reached only through a `WriterGuard`, and at most one
// guard exists at a time (see `try_lock`), so sharing the lock between threads
// shares the state with one thread at a time: `T: Send` is all that needs.
unsafe impl<T: Send> Sync for WriterLock<T> {}

/// Access to the writer state, for as long as the lock is held.
pub(crate) struct WriterGuard<'a, T> {
    lock: &'a WriterLock<T>,
}

impl<T> WriterLock<T> {
    pub(crate) fn new(state: T) -> WriterLock<T> {
        WriterLock {
            locked: AtomicBool::new(false),
            state: UnsafeCell::new(state),
        }
    }

    /// The lock, if no other writer holds it.
    pub(crate) fn try_lock(&self) -> Option<WriterGuard<'_, T>> {
        // The guard is made only on success: dropping one unlocks.
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| WriterGuard { lock: self })
    }

    /// Lets go of a lock whose holder no longer exists: in a `fork()`ed
    /// child, where only the forking thread goes on. The state is as the
    /// holder left it (a writer publishes first and updates its state after,
    /// so at worst it lacks the last windup's accounting).
    ///
    /// # Safety
    /// No thread of this process may hold a guard.
    #[cfg(feature = "std")]
    pub(crate) unsafe fn release_after_fork(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// The lock, once the writer that holds it lets go.
    pub(crate) fn lock(&self) -> WriterGuard<'_, T> {
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            relax();
        }
    }
}

impl<T> Deref for WriterGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (acquired in `try_lock`, released in
        // `drop`), so no other guard, and no other reference to the state, exists.
        unsafe { &*self.lock.state.get() }
    }
}

impl<T> DerefMut for WriterGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.lock.state.get() }
    }
}

impl<T> Drop for WriterGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}
