//! The kernel's clocks as the host clock reads them: the references it
//! follows, behind a trait so that a test can make them do what no machine
//! here can (suspend for an hour, lose NTP synchronization). Named as on
//! Linux; what each is on other OSes is in [`KernelClock`]:
//!
//! - CLOCK_MONOTONIC: what the host clock follows (its origin, its rate, and
//!   where it stands after a suspend);
//! - CLOCK_MONOTONIC_RAW and CLOCK_BOOTTIME: the watchdog's reference (no NTP
//!   slew, plus the time suspended, which a counter that runs through suspend
//!   counts);
//! - CLOCK_REALTIME and CLOCK_BOOTTIME: the offsets Realtime and Boottime add;
//! - CLOCK_MONOTONIC_COARSE and CLOCK_REALTIME_COARSE: the coarse clocks
//!   where no thread of ours may keep ours fresh (a sandbox);
//! - the kernel's NTP state (`adjtimex(2)`, `ntp_gettime(2)`): how far the
//!   kernel's Realtime may be from UTC, the TAI offset and the leap second
//!   it announced.

use std::io;

use crate::BinTime;
use crate::host::counter::HostCounter;
use crate::hw::KernelCounter;

pub(crate) use crate::os::{KernelClock, NtpState};

/// The kernel's clocks: the machine's ([`SystemClocks`]), or a test's.
pub(crate) trait KernelClocks: Send + Sync {
    /// `clock` in nanoseconds since its origin.
    fn nanos(&self, clock: KernelClock) -> u64;
    /// The kernel's NTP state.
    fn ntp(&self) -> io::Result<NtpState>;

    /// TAI − UTC as the kernel's clocks read it, where they say, in step
    /// with Realtime (the NTP state's may move before Realtime does).
    fn tai_minus_utc(&self) -> Option<i32> {
        None
    }

    /// CLOCK_MONOTONIC, our uptime's reference (a counter that ran through
    /// a suspend it did not count resumes from it): what windups follow.
    fn reference(&self) -> BinTime {
        BinTime::from_nanos(self.nanos(KernelClock::Monotonic) as i128)
    }

    /// CLOCK_MONOTONIC as a counter: what a failover hands the clock to.
    /// A test's kernel hands over to its own.
    fn monotonic_counter(&'static self) -> HostCounter {
        HostCounter::Kernel(KernelCounter::monotonic())
    }
}

/// The kernel's clocks on this machine.
pub(crate) struct SystemClocks;

impl KernelClocks for SystemClocks {
    fn nanos(&self, clock: KernelClock) -> u64 {
        // No OS this builds for refuses one of its clocks (see `os`).
        crate::os::kernel_nanos(clock).unwrap_or(0)
    }

    fn ntp(&self) -> io::Result<NtpState> {
        // A refusal as the bare errno where the OS gives one, so that a
        // read's windup (in a signal handler, maybe) allocates nothing;
        // `info` says what was refused.
        crate::os::ntp_quietly()
    }

    fn tai_minus_utc(&self) -> Option<i32> {
        crate::os::tai_minus_utc()
    }
}
