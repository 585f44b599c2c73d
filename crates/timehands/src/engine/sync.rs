//! The atomics of the reader/writer protocol: core's, or loom's when the crate is
//! built with `--cfg loom` so that the model checker sees every access.
//!
//! The protocol itself needs only word-sized atomics (the state word and the
//! slot tickets are `usize`), so it runs on 32-bit targets without 64-bit
//! atomics, such as Cortex-M4. The 64-bit values of a hands are [`Word`]s: one
//! atomic where the target has 64-bit atomics, two 32-bit halves elsewhere; a
//! torn pair is harmless because the slot's ticket check throws the copy away.
//! `--cfg timehands_split_words` selects the halves on any target, so that the
//! host's tests cover that code too.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
#[cfg(all(loom, feature = "alloc"))]
pub(crate) use loom::sync::{Arc, atomic::AtomicU64};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
#[cfg(all(not(loom), feature = "alloc", target_has_atomic = "64"))]
pub(crate) use {alloc::sync::Arc, core::sync::atomic::AtomicU64};

/// What a thread does while it retries: a CPU hint, or under loom a yield so that
/// the model checker schedules the thread it is waiting for.
#[inline]
pub(crate) fn relax() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

pub(crate) use word::Word;

/// A 64-bit value in one atomic.
#[cfg(all(target_has_atomic = "64", not(timehands_split_words)))]
mod word {
    #[cfg(not(loom))]
    use core::sync::atomic::AtomicU64;
    #[cfg(loom)]
    use loom::sync::atomic::AtomicU64;

    use super::Ordering::Relaxed;

    /// A 64-bit field of a hands, loaded and stored without ordering: the slot's
    /// ticket orders and checks it.
    pub(crate) struct Word(AtomicU64);

    impl Word {
        pub(crate) fn new(value: u64) -> Word {
            Word(AtomicU64::new(value))
        }
        #[inline]
        pub(crate) fn load(&self) -> u64 {
            self.0.load(Relaxed)
        }
        #[inline]
        pub(crate) fn store(&self, value: u64) {
            self.0.store(value, Relaxed)
        }
    }
}

/// A 64-bit value in two 32-bit atomics, for targets without 64-bit atomics.
#[cfg(not(all(target_has_atomic = "64", not(timehands_split_words))))]
mod word {
    #[cfg(not(loom))]
    use core::sync::atomic::AtomicU32;
    #[cfg(loom)]
    use loom::sync::atomic::AtomicU32;

    use super::Ordering::Relaxed;

    /// A 64-bit field of a hands as two halves, loaded and stored without
    /// ordering: the slot's ticket orders them and discards a torn pair.
    pub(crate) struct Word {
        high: AtomicU32,
        low: AtomicU32,
    }

    impl Word {
        pub(crate) fn new(value: u64) -> Word {
            Word {
                high: AtomicU32::new((value >> 32) as u32),
                low: AtomicU32::new(value as u32),
            }
        }
        #[inline]
        pub(crate) fn load(&self) -> u64 {
            (self.high.load(Relaxed) as u64) << 32 | self.low.load(Relaxed) as u64
        }
        #[inline]
        pub(crate) fn store(&self, value: u64) {
            self.high.store((value >> 32) as u32, Relaxed);
            self.low.store(value as u32, Relaxed);
        }
    }
}
