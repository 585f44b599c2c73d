//! The host's clocks: the counters a [`Timekeeper`](crate::Timekeeper) runs on
//! in user space.
//!
//! - `Tsc` (x86_64): the time-stamp counter, a 64-bit register the CPU
//!   increments at a fixed rate. A fenced read costs some nanoseconds (tens
//!   under some hypervisors) and no system call. It is a good clock only when
//!   it is *invariant* (it runs at the same rate in every P-, C- and T-state)
//!   and the kernel keeps the CPUs' TSCs in step, which `TscFacts` and
//!   [`kernel_clocksource`] tell: Linux picks `tsc` as its clocksource only
//!   when both hold. The TSC does not say its own frequency reliably;
//!   `TscFacts::stated_frequency` gives what CPUID states, if anything.
//! - `Cntvct` (aarch64): CNTVCT_EL0, the virtual count of the generic timer.
//!   Every aarch64 system has it, it runs at the fixed rate CNTFRQ_EL0 gives, and
//!   Linux lets user space read it. It is the aarch64 counterpart of an
//!   invariant TSC.
//! - [`KernelCounter`] (every OS): the OS's own clock (`clock_gettime`,
//!   QueryPerformanceCounter) as a 1 GHz counter. It is right everywhere the
//!   OS is, but each read is a call (tens of nanoseconds, through Linux's
//!   vDSO) that itself reads one of the counters above, or a system call
//!   when the kernel's clocksource cannot be read from user space.
//!   `CLOCK_MONOTONIC` is slewed by NTP; `CLOCK_MONOTONIC_RAW` is not.
//! - `tsc_sync` (x86_64): how far apart the CPUs' TSCs are, the check the
//!   host clock runs before it trusts the TSC across CPUs.
//!
//! Each is compiled only where it exists: `Tsc`, `TscFacts` and `tsc_sync`
//! on x86_64, `Cntvct` on aarch64, the OS's clock everywhere.
//!
//! Which to use: the hardware counter when it is trustworthy (an invariant TSC
//! with the kernel on `tsc`; CNTVCT_EL0 always), the kernel's clock otherwise,
//! and `CLOCK_MONOTONIC_RAW` over `CLOCK_MONOTONIC` when the timekeeper is
//! disciplined itself, so that two disciplines do not fight.
//!
//! The hardware counters follow the ordering contract of [`Counter`](crate::Counter):
//! `read` is fenced before, `order_after_read` after. Each also has a bare
//! `read_unordered` for timing an interval on one thread, where the fences only
//! add cost.

#[cfg(target_arch = "aarch64")]
mod cntvct;
mod kernel;
#[cfg(target_arch = "x86_64")]
mod tsc;
#[cfg(target_arch = "x86_64")]
pub mod tsc_sync;

#[cfg(target_arch = "aarch64")]
pub use cntvct::Cntvct;
#[cfg(target_arch = "x86_64")]
pub(crate) use kernel::{CLOCKSOURCE_NAME, kernel_clocksource_in};
pub use kernel::{KernelCounter, available_clocksources, kernel_clocksource};
#[cfg(target_arch = "x86_64")]
pub use tsc::{
    CrystalRatio, FrequencySource, OrderedRead, ReadCost, StatedFrequency, Tsc, TscFacts, Vendor,
};
#[cfg(target_arch = "x86_64")]
pub(crate) use tsc::{rdtsc, read_ordered as read_tsc_ordered};
