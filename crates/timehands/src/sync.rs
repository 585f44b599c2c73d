//! The atomics of the reader/writer protocol, swapped for loom's when the crate is
//! built with `--cfg loom` so that the model checker sees every access.

#[cfg(all(loom, feature = "alloc"))]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

#[cfg(all(not(loom), feature = "alloc"))]
pub(crate) use alloc::sync::Arc;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

/// What a thread does while it retries: a CPU hint, or under loom a yield so that
/// the model checker schedules the thread it is waiting for.
#[inline]
pub(crate) fn relax() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
