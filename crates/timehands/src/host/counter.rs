//! The counters the host clock can run on, as one type: the engine is
//! generic, the host picks at run time.

use crate::Counter;
use crate::hw::{self, KernelCounter};

/// The counters the host clock can run on.
pub(crate) enum HostCounter {
    /// The x86_64 time-stamp counter.
    #[cfg(target_arch = "x86_64")]
    Tsc(hw::Tsc),
    /// The aarch64 generic timer.
    #[cfg(target_arch = "aarch64")]
    Cntvct(hw::Cntvct),
    /// The kernel's CLOCK_MONOTONIC, read through the vDSO.
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
