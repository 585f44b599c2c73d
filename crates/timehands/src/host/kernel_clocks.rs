//! The kernel's clocks as the host clock reads them: the references it
//! follows, behind a trait so that a test can make them do what no machine
//! here can (suspend for an hour, lose NTP synchronization).
//!
//! - CLOCK_MONOTONIC: what the host clock follows (its origin, its rate, and
//!   where it stands after a suspend);
//! - CLOCK_MONOTONIC_RAW and CLOCK_BOOTTIME: the watchdog's reference (no NTP
//!   slew, plus the time suspended, which a counter that runs through suspend
//!   counts);
//! - CLOCK_REALTIME and CLOCK_BOOTTIME: the offsets Realtime and Boottime add;
//! - the NTP state of `adjtimex(2)`: how far the kernel's Realtime may be
//!   from UTC, the TAI offset and the leap second it announced.

use std::io;

/// A kernel clock the host clock reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelClock {
    Monotonic,
    MonotonicRaw,
    Boottime,
    Realtime,
}

impl KernelClock {
    /// The clock's id for `clock_gettime(2)`.
    pub(crate) fn id(self) -> libc::clockid_t {
        match self {
            KernelClock::Monotonic => libc::CLOCK_MONOTONIC,
            KernelClock::MonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
            KernelClock::Boottime => libc::CLOCK_BOOTTIME,
            KernelClock::Realtime => libc::CLOCK_REALTIME,
        }
    }
}

/// The leap second the kernel has announced for the end of the UTC day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum LeapSecond {
    /// None announced.
    None,
    /// 23:59:60 will be inserted: the kernel's Realtime repeats a second.
    Insert,
    /// 23:59:59 will be deleted: the kernel's Realtime skips a second.
    Delete,
    /// A leap second is being inserted now.
    InProgress,
}

/// What `adjtimex(2)` says of the kernel's synchronization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NtpState {
    /// Whether an NTP daemon keeps the kernel synchronized (not STA_UNSYNC,
    /// not TIME_ERROR).
    pub synchronized: bool,
    /// The kernel's bound on |Realtime − UTC|, in µs, growing at 500 ppm
    /// between the daemon's updates.
    pub maxerror_us: u64,
    /// The daemon's estimate of that error, in µs.
    pub esterror_us: u64,
    /// TAI − UTC in seconds (0 where no daemon set it).
    pub tai_offset_s: i32,
    /// The leap second announced.
    pub leap: LeapSecond,
}

impl NtpState {
    /// The state from `adjtimex`'s return `state` and its `status` bits.
    pub(crate) fn from_timex(
        state: i32,
        status: i32,
        maxerror: i64,
        esterror: i64,
        tai: i32,
    ) -> Self {
        let leap = match state {
            libc::TIME_OOP => LeapSecond::InProgress,
            _ if status & libc::STA_INS != 0 => LeapSecond::Insert,
            _ if status & libc::STA_DEL != 0 => LeapSecond::Delete,
            _ => LeapSecond::None,
        };
        NtpState {
            synchronized: status & libc::STA_UNSYNC == 0 && state != libc::TIME_ERROR,
            maxerror_us: maxerror.max(0) as u64,
            esterror_us: esterror.max(0) as u64,
            tai_offset_s: tai,
            leap,
        }
    }
}

/// The kernel's clocks: the machine's ([`SystemClocks`]), or a test's.
pub(crate) trait KernelClocks: Send + Sync {
    /// `clock` in nanoseconds since its origin.
    fn nanos(&self, clock: KernelClock) -> u64;
    /// The kernel's NTP state.
    fn ntp(&self) -> io::Result<NtpState>;
}

/// The kernel's clocks on this machine.
pub(crate) struct SystemClocks;

impl KernelClocks for SystemClocks {
    fn nanos(&self, clock: KernelClock) -> u64 {
        // The ids of `KernelClock` exist on every Linux this builds for.
        crate::sys::clock_nanos(clock.id()).unwrap_or(0)
    }

    fn ntp(&self) -> io::Result<NtpState> {
        // SAFETY: a zeroed timex is a valid argument (modes 0: read only);
        // the kernel fills it in.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        // SAFETY: `tx` is a valid timex to write; modes 0 changes nothing,
        // so no privilege is needed.
        let state = unsafe { libc::adjtimex(&mut tx) };
        if state < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(NtpState::from_timex(
            state,
            tx.status,
            tx.maxerror as i64,
            tx.esterror as i64,
            tx.tai,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine's NTP state reads (no privilege needed), and its error
    /// bounds are what the kernel keeps: at most 16 s (NTP_PHASE_LIMIT's
    /// MAXPHASE-based cap of the kernel, 16 000 000 µs).
    #[test]
    #[cfg_attr(miri, ignore = "calls adjtimex")]
    fn the_kernel_ntp_state_reads() {
        let ntp = SystemClocks
            .ntp()
            .expect("adjtimex with modes 0 needs no privilege");
        assert!(ntp.maxerror_us <= 16_000_000, "{ntp:?}");
        assert!(ntp.esterror_us <= 16_000_000, "{ntp:?}");
    }

    #[test]
    fn timex_states() {
        let ok = NtpState::from_timex(libc::TIME_OK, 0, 5_000, 100, 37);
        assert!(ok.synchronized);
        assert_eq!(
            (ok.maxerror_us, ok.esterror_us, ok.tai_offset_s),
            (5_000, 100, 37)
        );
        assert_eq!(ok.leap, LeapSecond::None);
        assert!(!NtpState::from_timex(libc::TIME_OK, libc::STA_UNSYNC, 0, 0, 0).synchronized);
        assert!(!NtpState::from_timex(libc::TIME_ERROR, 0, 0, 0, 0).synchronized);
        assert_eq!(
            NtpState::from_timex(libc::TIME_INS, libc::STA_INS, 0, 0, 0).leap,
            LeapSecond::Insert
        );
        assert_eq!(
            NtpState::from_timex(libc::TIME_DEL, libc::STA_DEL, 0, 0, 0).leap,
            LeapSecond::Delete
        );
        assert_eq!(
            NtpState::from_timex(libc::TIME_OOP, libc::STA_INS, 0, 0, 0).leap,
            LeapSecond::InProgress
        );
    }
}
