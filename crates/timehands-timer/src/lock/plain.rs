//! The lock where no priority-inheriting mutex is at hand: std's mutex,
//! which can be made afresh after a fork (see `lock`).

use std::cell::UnsafeCell;
use std::ptr;
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

/// A mutual-exclusion lock around a `T`; it inherits no priority.
pub(crate) struct Lock<T> {
    /// Written only by `reset`, which no other thread overlaps.
    mutex: UnsafeCell<Mutex<T>>,
}

// SAFETY: the cell is written only by `reset`, whose caller keeps every
// other thread away; otherwise it is a `Mutex<T>`, which is `Sync` for a
// `T: Send`.
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    /// A lock around `value`. `inherit` asks for priority inheritance,
    /// which std's mutex has not (see `lock`).
    pub(crate) fn new(value: T, _inherit: bool) -> Lock<T> {
        Lock {
            mutex: UnsafeCell::new(Mutex::new(value)),
        }
    }

    fn mutex(&self) -> &Mutex<T> {
        // SAFETY: only `reset` writes the cell, and no other use overlaps it.
        unsafe { &*self.mutex.get() }
    }

    /// Waits for the lock. No callback runs under a lock, so a panic while
    /// one is held is a bug elsewhere, and poisoning tells nothing more.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.mutex().lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock if it is free now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.mutex().try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Makes the lock afresh around `value`, held by nobody, and forgets
    /// (never drops nor reads) the old mutex and what it guarded: after a
    /// fork, where it may have been held, mid-change, by a thread of the
    /// parent.
    ///
    /// # Safety
    ///
    /// No other thread may use the lock during the call.
    pub(crate) unsafe fn reset(&self, value: T) {
        // SAFETY: the caller keeps every other thread away; the old mutex is
        // overwritten without being dropped.
        unsafe { ptr::write(self.mutex.get(), Mutex::new(value)) };
    }
}
