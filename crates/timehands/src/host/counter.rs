//! The counters the host clock can run on, as one type: the engine is
//! generic, the host picks at run time.

use crate::Counter;
use crate::hw::KernelCounter;

/// The counters the host clock can run on (a clone is the same counter,
/// read the same way).
#[derive(Clone)]
pub(crate) enum HostCounter {
    /// The x86_64 time-stamp counter.
    #[cfg(target_arch = "x86_64")]
    Tsc(crate::hw::Tsc),
    /// The aarch64 generic timer.
    #[cfg(target_arch = "aarch64")]
    Cntvct(crate::hw::Cntvct),
    /// The OS's Monotonic (CLOCK_MONOTONIC through Linux's vDSO).
    Kernel(KernelCounter),
    /// A test's counter: one that misbehaves, or runs through a suspend.
    #[cfg(test)]
    Test(std::sync::Arc<dyn Counter + Send + Sync>),
}

impl Counter for HostCounter {
    #[inline]
    fn read(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.read(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.read(),
            HostCounter::Kernel(c) => c.read(),
            #[cfg(test)]
            HostCounter::Test(c) => c.read(),
        }
    }
    #[inline]
    fn read_unordered(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.read_unordered(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.read_unordered(),
            HostCounter::Kernel(c) => c.read(),
            #[cfg(test)]
            HostCounter::Test(c) => c.read(),
        }
    }
    #[inline]
    fn order_after_read(&self) {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.order_after_read(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.order_after_read(),
            HostCounter::Kernel(c) => c.order_after_read(),
            #[cfg(test)]
            HostCounter::Test(c) => c.order_after_read(),
        }
    }
    fn frequency(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.frequency(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.frequency(),
            HostCounter::Kernel(c) => c.frequency(),
            #[cfg(test)]
            HostCounter::Test(c) => c.frequency(),
        }
    }
    fn name(&self) -> &str {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.name(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.name(),
            HostCounter::Kernel(c) => c.name(),
            #[cfg(test)]
            HostCounter::Test(c) => c.name(),
        }
    }
}

impl HostCounter {
    /// Whether this is the TSC (x86_64's alone), which the cross-CPU
    /// check is of.
    pub(crate) fn is_tsc(&self) -> bool {
        self.kind() == CounterKind::Tsc
    }

    /// Which kind of counter this is.
    pub(crate) fn kind(&self) -> CounterKind {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(_) => CounterKind::Tsc,
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(_) => CounterKind::Cntvct,
            HostCounter::Kernel(_) => CounterKind::Kernel,
            #[cfg(test)]
            HostCounter::Test(_) => CounterKind::Simulated,
        }
    }
}

/// What the host clock runs on, as [`info`](crate::info) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CounterKind {
    /// The x86_64 time-stamp counter.
    Tsc,
    /// The aarch64 generic timer's virtual count, CNTVCT_EL0.
    Cntvct,
    /// The OS's Monotonic (CLOCK_MONOTONIC through Linux's vDSO).
    Kernel,
    /// A test's counter (the crate's own tests).
    #[cfg(test)]
    Simulated,
}

impl CounterKind {
    /// The name tools print: `TSC`, `CNTVCT_EL0`, or the OS's name for its
    /// monotonic clock (`CLOCK_MONOTONIC` on Linux).
    pub fn name(self) -> &'static str {
        match self {
            CounterKind::Tsc => "TSC",
            CounterKind::Cntvct => "CNTVCT_EL0",
            CounterKind::Kernel => crate::os::KernelClock::Monotonic.name(),
            #[cfg(test)]
            CounterKind::Simulated => "a test's counter",
        }
    }
}

impl core::fmt::Display for CounterKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// In JSON, the name (`"TSC"`).
#[cfg(feature = "serde")]
impl serde::Serialize for CounterKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}
