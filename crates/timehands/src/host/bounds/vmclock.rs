//! The VMClock device (`/dev/vmclock0`, Linux's `ptp_vmclock`): a page the
//! hypervisor writes, laid out as Linux's `include/uapi/linux/vmclock-abi.h`
//! (little-endian, under a sequence count that is odd while it writes). Two
//! things in it count here:
//!
//! - its **disruption marker**, which the hypervisor changes at a live
//!   migration or a snapshot's restore: every clock of the guest (the
//!   counter's rate and offset, the kernel's Realtime, every source's
//!   bound) may have moved. Each state carries the marker seen when it was
//!   taken, and every read compares it with the page's (one load of the
//!   mapped word): a changed marker ends the bound at once, and the sources
//!   give none until they answer anew (see `refresh.rs`);
//! - its **clock**: the time (UTC, when its time type says so) at a counter
//!   value, the counter's period, and their maximum errors, a source of its
//!   own ([`Reading::clock`]).
//!
//! The page is mapped once, the first time a step finds the device, and
//! stays mapped for the process's life (a forked child inherits it), so
//! that a read can load the marker from anywhere, a signal handler too.
//! The first mapping is the process's: a step given another path later
//! (the tests') reads the first.

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use super::mapping::{Mapping, bytes};
use super::ticking::{self, CounterClock};
use super::{BoundsStatus, LeapSecond, q32};

/// Where Linux's driver puts the device.
pub(crate) const DEFAULT_PATH: &CStr = c"/dev/vmclock0";
/// `VMCLOCK_MAGIC`: "VCLK".
const MAGIC: u32 = 0x4B4C_4356;
/// The page's fields read here: 104 bytes, 13 words.
const WORDS: usize = 13;
const LEN: usize = WORDS * 8;
/// `VMCLOCK_COUNTER_ARM_VCNT`, `VMCLOCK_COUNTER_X86_TSC`: the counter this
/// CPU's reads count.
#[cfg(target_arch = "aarch64")]
const OUR_COUNTER: u8 = 0;
#[cfg(target_arch = "x86_64")]
const OUR_COUNTER: u8 = 1;
#[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
const OUR_COUNTER: u8 = 0xff;
/// `VMCLOCK_TIME_UTC`.
const TIME_UTC: u8 = 0;
/// `VMCLOCK_STATUS_SYNCHRONIZED`, `VMCLOCK_STATUS_FREERUNNING`.
const STATUS_SYNCHRONIZED: u8 = 2;
const STATUS_FREERUNNING: u8 = 3;
/// `VMCLOCK_FLAG_PERIOD_MAXERROR_VALID`, `VMCLOCK_FLAG_TIME_MAXERROR_VALID`.
const PERIOD_MAXERROR_VALID: u64 = 1 << 4;
const TIME_MAXERROR_VALID: u64 = 1 << 6;
/// The word of the disruption marker (bytes 16 to 23).
const MARKER_WORD: usize = 2;

/// The device's page, once mapped (its base; null before): an atomic, not
/// a once-cell, which a forked child of a parent caught mapping it would
/// wait on for ever.
static DEVICE: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());

/// The device's mapping, if a step mapped it.
#[inline]
fn device() -> Option<ManuallyDrop<Mapping>> {
    let base = DEVICE.load(Ordering::Acquire);
    // SAFETY: a non-null base is a leaked mapping of WORDS words (`read`).
    (!base.is_null()).then(|| unsafe { Mapping::leaked(base, WORDS) })
}

/// What the page said at one read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    pub marker: u64,
    /// The device's clock, where it gives a bound on UTC on this CPU's
    /// counter, and its status.
    pub clock: Option<(CounterClock, BoundsStatus)>,
    /// TAI − UTC, s, and the leap second announced (the device's).
    pub tai_offset_s: i32,
    pub leap: LeapSecond,
}

/// The fields of a whole page (`bytes`, as the ABI lays them out), or
/// `None` when it is not a VMClock page.
pub(crate) fn parse(page: &[u8; LEN]) -> Option<Reading> {
    let u64_at = |at: usize| u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"));
    let u32_at = |at: usize| u32::from_le_bytes(page[at..at + 4].try_into().expect("4 bytes"));
    if u32_at(0) != MAGIC || (u32_at(4) as usize) < LEN {
        return None;
    }
    let (counter_id, time_type, status, shift) = (page[10], page[11], page[34], page[39]);
    let flags = u64_at(24);
    let status = match status {
        STATUS_SYNCHRONIZED => Some(BoundsStatus::Synchronized),
        STATUS_FREERUNNING => Some(BoundsStatus::FreeRunning),
        _ => None,
    };
    let valid = PERIOD_MAXERROR_VALID | TIME_MAXERROR_VALID;
    let clock = (|| {
        if counter_id != OUR_COUNTER || time_type != TIME_UTC || flags & valid != valid {
            return None;
        }
        let period = u64_at(48);
        // The period's maximum error, in the period's own units: as a
        // fraction of the period, the rate the time's error grows at.
        let rate_ppb =
            u64::try_from((u128::from(u64_at(64)) * 1_000_000_000).div_ceil(u128::from(period)))
                .ok()?;
        let fraction_ns = (u128::from(u64_at(80)) * 1_000_000_000) >> 64;
        let time_ns = u64_at(72)
            .checked_mul(1_000_000_000)?
            .checked_add(fraction_ns as u64)?;
        let clock = CounterClock {
            at: u64_at(40),
            time_ns,
            mult: ticking::mult(period, shift)?,
            shift,
            // The time is truncated to the ns: one more.
            half_ns: u64_at(96).checked_add(1)?,
            rate_q32: (rate_ppb <= super::MAX_RATE_PPB).then(|| q32(rate_ppb))?,
        };
        Some((clock, status?))
    })();
    Some(Reading {
        marker: u64_at(16),
        clock,
        tai_offset_s: i32::from(i16::from_le_bytes([page[36], page[37]])),
        leap: match page[38] {
            1 => LeapSecond::Insert,
            2 => LeapSecond::Delete,
            3 => LeapSecond::InProgress,
            _ => LeapSecond::None,
        },
    })
}

/// The device's page now, mapped from `path` the first time it is found;
/// `None` where there is none, or it is being written at each try.
pub(crate) fn read(path: &CStr) -> Option<Reading> {
    if DEVICE.load(Ordering::Acquire).is_null() {
        let base = Mapping::open(path, WORDS).ok()?.leak();
        // One step maps at a time (the steps' flag): this one is the first.
        let _ = DEVICE.compare_exchange(
            std::ptr::null_mut(),
            base.cast_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
    let device = device()?;
    // The sequence count is the header's last u32 (bytes 12 to 15).
    let stable = |word: u64| (word >> 32) % 2 == 0;
    let words = device.read::<WORDS>(1, stable)?;
    parse(&bytes::<WORDS, LEN>(&words))
}

/// Whether the device's marker is no longer `marker`, the one a state was
/// taken with: one load of the mapped word.
#[inline]
pub(crate) fn moved_from(marker: u64) -> bool {
    device().is_some_and(|device| device.load(MARKER_WORD, Ordering::Relaxed) != marker)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A page as the ABI lays it out, for a UTC clock on this CPU's
    /// counter: at counter `at` the time is `time_ns`, the counter runs at
    /// `hz`, the time's maximum error is `max_error_ns`.
    pub(crate) fn page(marker: u64, at: u64, time_ns: u64, hz: f64, max_error_ns: u64) -> Vec<u8> {
        let mut p = vec![0u8; LEN];
        p[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        p[4..8].copy_from_slice(&(LEN as u32).to_le_bytes());
        p[8..10].copy_from_slice(&1u16.to_le_bytes());
        p[10] = OUR_COUNTER;
        p[11] = TIME_UTC;
        p[16..24].copy_from_slice(&marker.to_le_bytes());
        p[24..32].copy_from_slice(&(PERIOD_MAXERROR_VALID | TIME_MAXERROR_VALID).to_le_bytes());
        p[34] = STATUS_SYNCHRONIZED;
        p[36..38].copy_from_slice(&37i16.to_le_bytes());
        // The kernel's shift for the rate: a period under a ns keeps its
        // digits (as ClockBound's PeriodFrac).
        let shift = 31u8;
        p[39] = shift;
        let scale = 2f64.powi(64 + i32::from(shift));
        let period = (scale / hz) as u64;
        p[40..48].copy_from_slice(&at.to_le_bytes());
        p[48..56].copy_from_slice(&period.to_le_bytes());
        // A maximum error of the period of 1 ppm of it.
        p[64..72].copy_from_slice(&(period / 1_000_000).to_le_bytes());
        p[72..80].copy_from_slice(&(time_ns / 1_000_000_000).to_le_bytes());
        let fraction = ((time_ns % 1_000_000_000) as u128) << 64;
        p[80..88].copy_from_slice(&((fraction / 1_000_000_000) as u64 + 1).to_le_bytes());
        p[96..104].copy_from_slice(&max_error_ns.to_le_bytes());
        p
    }

    #[test]
    #[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
    fn a_page_gives_its_marker_and_its_clock() {
        let page: [u8; LEN] = page(7, 1_000, 1_800_000_000_000_000_000, 3e9, 20_000)
            .try_into()
            .expect("a page");
        let reading = parse(&page).expect("a VMClock page");
        assert_eq!((reading.marker, reading.tai_offset_s), (7, 37));
        let (clock, status) = reading.clock.expect("a clock");
        assert_eq!(status, BoundsStatus::Synchronized);
        assert_eq!(clock.time_ns, 1_800_000_000_000_000_000);
        // A second on: the time a second later, within 20 µs and 1 ppm.
        let (below, above) = clock.around(1_800_000_001_000_000_000, 3_000_001_000);
        assert!((21_000..21_010).contains(&below), "{below}");
        assert!((21_000..21_010).contains(&above), "{above}");
        let mut other = page;
        other[0] = 0;
        assert_eq!(parse(&other), None, "not VMClock's");
        let mut tai = page;
        tai[11] = 1;
        let reading = parse(&tai).expect("a VMClock page");
        assert_eq!((reading.marker, reading.clock), (7, None), "TAI: no clock");
    }
}
