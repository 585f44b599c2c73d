//! The atomics and the cell of the lock-free hard-timer protocol (`control`,
//! `requests`): std's, or loom's when the crate is built with
//! `RUSTFLAGS="--cfg loom"`, so that the model checker runs every
//! interleaving of the protocol's tests.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering, fence};

/// std's `UnsafeCell` with loom's interface (access through a closure, which
/// loom checks for concurrent use).
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` on a pointer to the value; the caller must have it alone.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
