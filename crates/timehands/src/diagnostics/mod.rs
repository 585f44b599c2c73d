//! Below the clock: what the `timehands` command and the tests look at to
//! say why the clock runs on what it runs on. Reading the clock needs none
//! of it.
//!
//! - [`hw`]: the hardware counters the host clock can run on (the TSC,
//!   CNTVCT_EL0, the OS's clock as a counter), CPUID's facts about the
//!   TSC, and Linux's clocksource. Each is a [`Counter`](crate::Counter)
//!   a [`Timekeeper`](crate::Timekeeper) of your own can run on.
//! - `tsc_sync` (x86_64): bounds on every CPU pair's TSC offset, by
//!   ping-pong between pinned threads, as Linux checks at boot.
//! - `readers` (Linux): the kinds of thread that read a clock (one that
//!   blocks every signal, a daemon's, a SCHED_FIFO one, a SIGPROF handler),
//!   to run one kind in a process.

#[cfg(target_os = "linux")]
pub mod readers;
#[cfg(target_arch = "x86_64")]
pub use crate::hw::tsc_sync;

/// The hardware counters and their facts; see the [module](self) docs.
pub mod hw {
    #[cfg(target_arch = "aarch64")]
    pub use crate::hw::Cntvct;
    #[cfg(target_arch = "x86_64")]
    pub use crate::hw::{
        CrystalRatio, FrequencySource, OrderedRead, ReadCost, StatedFrequency, Tsc, TscFacts,
        Vendor,
    };
    pub use crate::hw::{KernelCounter, available_clocksources, kernel_clocksource};
}
