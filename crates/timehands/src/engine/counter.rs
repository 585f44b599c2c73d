//! Counters: the free-running hardware the engine reads.
//!
//! A [`Counter`] is anything that counts at a known rate: the TSC, CNTVCT_EL0, an
//! RTOS's timer register, the kernel's clock, or a [`SimCounter`] that a test
//! drives by hand. The engine only ever asks it for its current value, its
//! frequency and how many bits it has ([`Counter::mask`]).

/// A free-running counter.
///
/// The counter must count up at [`frequency`](Counter::frequency) Hz and wrap at
/// [`mask`](Counter::mask) + 1; every value [`read`](Counter::read) returns is
/// already masked.
///
/// # Ordering
///
/// The engine's cross-thread guarantees (time never goes backwards between a read
/// on one thread and a later read on another) assume that [`read`](Counter::read)
/// observes the counter no earlier than every memory access that precedes it in
/// program order, and that after
/// [`order_after_read`](Counter::order_after_read) no later memory access is
/// performed before the read. An atomic load does both by itself; a hardware
/// counter needs fences: `lfence; rdtsc` (or `rdtscp`) to read and an `lfence`
/// after it on x86_64, `isb` before and after `mrs cntvct_el0` on aarch64. The
/// engine asks for the second fence only on its slow path, so the common read
/// pays for one.
///
/// The trait is object-safe: `Timekeeper<&dyn Counter>` works.
pub trait Counter {
    /// The counter's current value, masked to [`mask`](Counter::mask).
    fn read(&self) -> u64;

    /// Counts per second. Must not be below 2.
    fn frequency(&self) -> u64;

    /// The counter's width: its largest value, `2^bits - 1`. The counter wraps
    /// from `mask` to 0.
    fn mask(&self) -> u64 {
        u64::MAX
    }

    /// A short name for reports, such as `"TSC"`.
    fn name(&self) -> &str {
        "counter"
    }

    /// The counter's value read with no ordering against the memory accesses
    /// around it (a bare `rdtsc`): cheaper, and right only for timing intervals
    /// on one thread. The default is the ordered [`read`](Counter::read).
    #[inline]
    fn read_unordered(&self) -> u64 {
        self.read()
    }

    /// Keeps the memory accesses that follow from being performed before the
    /// last [`read`](Counter::read) on this thread (see "Ordering" above). The
    /// default does nothing, which is right for a counter read by a memory load.
    #[inline]
    fn order_after_read(&self) {}
}

impl<C: Counter + ?Sized> Counter for &C {
    fn read(&self) -> u64 {
        (**self).read()
    }
    fn frequency(&self) -> u64 {
        (**self).frequency()
    }
    fn mask(&self) -> u64 {
        (**self).mask()
    }
    fn name(&self) -> &str {
        (**self).name()
    }
    fn read_unordered(&self) -> u64 {
        (**self).read_unordered()
    }
    fn order_after_read(&self) {
        (**self).order_after_read()
    }
}

#[cfg(all(feature = "alloc", target_has_atomic = "64"))]
pub use sim::SimCounter;

#[cfg(all(feature = "alloc", target_has_atomic = "64"))]
mod sim {
    use super::Counter;
    use crate::engine::sync::{Arc, AtomicU64, Ordering};

    /// A deterministic counter for tests and demonstrations: it moves only when
    /// told to, and its clones share one value.
    ///
    /// ```
    /// use timehands::{SimCounter, Timekeeper};
    ///
    /// let counter = SimCounter::new(1_000_000_000); // 1 GHz: one count per ns
    /// let tk = Timekeeper::new(counter.clone())?;
    /// counter.advance(1_500_000_000);
    /// assert_eq!(tk.uptime().as_nanos(), 1_500_000_000);
    /// # Ok::<(), timehands::Error>(())
    /// ```
    #[derive(Clone, Debug)]
    pub struct SimCounter {
        value: Arc<AtomicU64>,
        frequency: u64,
        mask: u64,
    }

    impl SimCounter {
        /// A 64-bit counter at `frequency_hz`, starting at 0.
        pub fn new(frequency_hz: u64) -> SimCounter {
            SimCounter::with_mask(frequency_hz, u64::MAX)
        }

        /// A counter of width `mask` (`2^bits - 1`) at `frequency_hz`, starting at 0.
        /// Values are accepted as given; [`Timekeeper::new`](crate::Timekeeper::new)
        /// says what is wrong with a bad frequency or mask.
        pub fn with_mask(frequency_hz: u64, mask: u64) -> SimCounter {
            SimCounter {
                value: Arc::new(AtomicU64::new(0)),
                frequency: frequency_hz,
                mask,
            }
        }

        /// Moves the counter forward by `counts`, wrapping at the mask.
        pub fn advance(&self, counts: u64) {
            self.value.fetch_add(counts, Ordering::SeqCst);
        }

        /// Sets the counter to `value` (masked), forward or back.
        pub fn set(&self, value: u64) {
            self.value.store(value, Ordering::SeqCst);
        }

        /// The counter's value, masked: what [`Counter::read`] returns.
        #[inline]
        pub fn value(&self) -> u64 {
            self.value.load(Ordering::SeqCst) & self.mask
        }
    }

    impl Counter for SimCounter {
        #[inline]
        fn read(&self) -> u64 {
            self.value()
        }
        fn frequency(&self) -> u64 {
            self.frequency
        }
        fn mask(&self) -> u64 {
            self.mask
        }
        fn name(&self) -> &str {
            "simulated"
        }
    }
}
