//! AWS ClockBound 3's page (`/var/run/clockbound/shm1`, layout version 3,
//! written by `clockbound` 3.x, in the CPU's byte order): a clock of the
//! daemon's own on the CPU's counter (`as_of_tsc`, the time at it, the
//! counter's period and its error), its bound at that counter value, the
//! rate it grows at, the status, the VMClock disruption marker the daemon
//! last saw and whether it watches the device at all. The layout is
//! `ClockErrorBoundV3` of the `clock-bound` crate (3.0.0-rc.0), behind the
//! 16-byte header version 2 had (magic, size, version, generation); the
//! daemon's writer keeps the generation odd while it writes.
//!
//! As its client does: the time and the bound are computed from a counter
//! read of the reader's own; a status of unknown or disrupted gives none,
//! nor does a page past its `void_after`, and one not updated for 60 s is
//! free-running; where the daemon watches VMClock, its marker must be the
//! device's (a migration it has not recovered from gives none).

use std::ffi::CStr;

use super::BoundsStatus;
use super::mapping::{Page, bytes, clockbound_written};
use super::ticking::{self, CounterClock};

/// Where clockbound 3.x writes its page.
pub(crate) const DEFAULT_PATH: &CStr = c"/var/run/clockbound/shm1";
/// ClockBound's magic number (the same as version 2's).
const MAGIC: [u32; 2] = [0x414D_5A4E, 0x4342_0200];
/// The version word: the minimum version (3) over the current one (3).
const VERSION: u16 = 0x0303;
/// The header and `ClockErrorBoundV3`: 104 bytes, 13 words.
const WORDS: usize = 13;
const LEN: usize = WORDS * 8;
/// ClockBound's client calls a page not updated for this long
/// free-running (`FREE_RUNNING_GRACE_PERIOD`).
pub(crate) const FREE_RUNNING_AFTER_NS: u64 = 60_000_000_000;

/// What the page said at one read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The daemon's clock and bound (`None` where its fields do not fit).
    pub clock: Option<CounterClock>,
    /// Its status (`None`: unknown or disrupted, no bound).
    pub status: Option<BoundsStatus>,
    /// The daemon's time (ns, UTC) of the update, and after which it is void.
    pub as_of_ns: u64,
    pub void_after_ns: u64,
    /// The VMClock marker the daemon last saw, and whether it watches the
    /// device.
    pub marker: u64,
    pub watches_vmclock: bool,
}

impl Reading {
    /// The bound's state at the daemon's time `now_ns`: the status as its
    /// client gives it then (none past `void_after`, free-running 60 s
    /// after `as_of`), and none where the daemon watches VMClock and
    /// `device_marker` (the device's, if there is one) is not its marker.
    pub(crate) fn status_at(
        &self,
        now_ns: u64,
        device_marker: Option<u64>,
    ) -> Option<BoundsStatus> {
        let disrupted = match (self.watches_vmclock, device_marker) {
            (true, Some(marker)) => marker != self.marker,
            // Watching a device this process cannot read: its client gives
            // up there too.
            (true, None) => true,
            (false, _) => false,
        };
        if disrupted || now_ns > self.void_after_ns {
            return None;
        }
        match self.status? {
            _ if now_ns > self.as_of_ns.saturating_add(FREE_RUNNING_AFTER_NS) => {
                Some(BoundsStatus::FreeRunning)
            }
            status => Some(status),
        }
    }
}

/// A timespec (two i64s) at `at`, ns (negative ones as 0).
fn timespec_ns(page: &[u8], at: usize) -> u64 {
    let seconds = i64::from_ne_bytes(page[at..at + 8].try_into().expect("8 bytes"));
    let nanos = i64::from_ne_bytes(page[at + 8..at + 16].try_into().expect("8 bytes"));
    u64::try_from(seconds)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(nanos.clamp(0, 999_999_999)).unwrap_or(0))
}

/// The reading in a whole page, or `None` where it is not a version-3
/// page, or is being written (or never was).
pub(crate) fn parse(page: &[u8; LEN]) -> Option<Reading> {
    let u64_at = |at: usize| u64::from_ne_bytes(page[at..at + 8].try_into().expect("8 bytes"));
    let u32_at = |at: usize| u32::from_ne_bytes(page[at..at + 4].try_into().expect("4 bytes"));
    let u16_at = |at: usize| u16::from_ne_bytes([page[at], page[at + 1]]);
    let generation = u16_at(14);
    if [u32_at(0), u32_at(4)] != MAGIC
        || (u32_at(8) as usize) < LEN
        || u16_at(12) != VERSION
        || generation % 2 == 1
        || generation == 0
    {
        return None;
    }
    let (period_shift, err_shift) = (page[97], page[98]);
    let max_drift_ppb = u64::from(u32_at(88));
    let clock = (|| {
        let rate_ppb = max_drift_ppb.checked_add(ticking::ppb(u64_at(64), err_shift)?)?;
        Some(CounterClock {
            at: u64_at(16),
            time_ns: timespec_ns(page, 24),
            mult: ticking::mult(u64_at(56), period_shift)?,
            shift: period_shift,
            half_ns: u64::try_from(i64::from_ne_bytes(page[72..80].try_into().ok()?)).ok()?,
            // As the client, which refuses a drift of 10^9 ppb or more.
            rate_q32: (rate_ppb <= super::MAX_RATE_PPB).then(|| super::q32(rate_ppb))?,
        })
    })();
    Some(Reading {
        clock,
        status: match i32::from_ne_bytes(page[92..96].try_into().expect("4 bytes")) {
            1 => Some(BoundsStatus::Synchronized),
            2 => Some(BoundsStatus::FreeRunning),
            _ => None,
        },
        as_of_ns: timespec_ns(page, 24),
        void_after_ns: timespec_ns(page, 40),
        marker: u64_at(80),
        watches_vmclock: page[96] != 0,
    })
}

/// The reading in the page `page` maps, now; `None` where there is no
/// page or it holds none.
pub(crate) fn look(page: &mut Page) -> Option<Reading> {
    page.look::<WORDS, _>(1, clockbound_written, |words| {
        parse(&bytes::<WORDS, LEN>(words))
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A page as clockbound 3 writes it: at counter `at` its time is
    /// `time_ns` within `bound_ns`, on a counter of `hz`, void 1000 s
    /// after, its status `status`, VMClock marker 5, not watched.
    pub(crate) fn page(at: u64, time_ns: u64, hz: f64, bound_ns: i64, status: i32) -> Vec<u8> {
        let mut p = vec![0u8; LEN];
        p[0..4].copy_from_slice(&MAGIC[0].to_ne_bytes());
        p[4..8].copy_from_slice(&MAGIC[1].to_ne_bytes());
        p[8..12].copy_from_slice(&(LEN as u32).to_ne_bytes());
        p[12..14].copy_from_slice(&VERSION.to_ne_bytes());
        p[14..16].copy_from_slice(&2u16.to_ne_bytes());
        p[16..24].copy_from_slice(&at.to_ne_bytes());
        let timespec = |ns: u64| {
            let mut t = [0u8; 16];
            t[..8].copy_from_slice(&((ns / 1_000_000_000) as i64).to_ne_bytes());
            t[8..].copy_from_slice(&((ns % 1_000_000_000) as i64).to_ne_bytes());
            t
        };
        p[24..40].copy_from_slice(&timespec(time_ns));
        p[40..56].copy_from_slice(&timespec(time_ns + 1_000_000_000_000));
        // ClockBound's PeriodFrac: the shift from the frequency's bits.
        let shift = 63 - (hz as u64).leading_zeros() as u8;
        let scale = 2f64.powi(64 + i32::from(shift));
        p[56..64].copy_from_slice(&((scale / hz) as u64).to_ne_bytes());
        // A period's error of 2^-30 (some 0.93 ppb), unshifted.
        p[64..72].copy_from_slice(&(1u64 << 34).to_ne_bytes());
        p[72..80].copy_from_slice(&bound_ns.to_ne_bytes());
        p[80..88].copy_from_slice(&5u64.to_ne_bytes());
        p[88..92].copy_from_slice(&1_000u32.to_ne_bytes());
        p[92..96].copy_from_slice(&status.to_ne_bytes());
        p[97] = shift;
        p
    }

    #[test]
    fn a_page_gives_the_daemon_s_clock_its_bound_and_status() {
        let page: [u8; LEN] = page(1_000, 1_800_000_000_000_000_000, 3e9, 40_000, 1)
            .try_into()
            .expect("a page");
        let reading = parse(&page).expect("a version-3 page");
        let clock = reading.clock.expect("a clock");
        assert_eq!((clock.at, clock.half_ns), (1_000, 40_000));
        // 1 ppm of drift and the period's 1 ppb: 1.001 µs a second.
        let (below, above) = clock.around(1_800_000_001_000_000_000, 3_000_001_000);
        assert!((41_000..41_010).contains(&below), "{below}");
        assert!((41_000..41_010).contains(&above), "{above}");
        let now = reading.as_of_ns;
        assert_eq!(
            reading.status_at(now, None),
            Some(BoundsStatus::Synchronized)
        );
        assert_eq!(
            reading.status_at(now + 61_000_000_000, None),
            Some(BoundsStatus::FreeRunning)
        );
        assert_eq!(reading.status_at(reading.void_after_ns + 1, None), None);
        let watching = Reading {
            watches_vmclock: true,
            ..reading
        };
        assert_eq!(
            watching.status_at(now, Some(5)),
            Some(BoundsStatus::Synchronized)
        );
        assert_eq!(watching.status_at(now, Some(6)), None, "a migration");
        assert_eq!(watching.status_at(now, None), None, "no device to watch");
        for (at, value) in [(14, 3u8), (12, 2), (0, 0)] {
            let mut bad = page;
            bad[at] = value;
            assert_eq!(parse(&bad), None, "byte {at} = {value}");
        }
        let mut disrupted = page;
        disrupted[92..96].copy_from_slice(&3i32.to_ne_bytes());
        let reading = parse(&disrupted).expect("a page");
        assert_eq!(reading.status_at(now, None), None, "disrupted");
    }
}
