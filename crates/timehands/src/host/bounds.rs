//! Bounds on real time: the earliest and the latest UTC the true time can
//! be, now.
//!
//! Our Realtime is the kernel's CLOCK_REALTIME to within our own error bound
//! (the one [`getres`](crate::getres) reports). The kernel's Realtime is UTC
//! to within the bound an NTP daemon keeps in the kernel (`adjtimex(2)`'s
//! `maxerror`, which the kernel grows by 500 ppm between the daemon's
//! updates), if a daemon keeps it synchronized at all. The sum bounds our
//! Realtime against UTC, with no daemon of our own: what systems that order
//! events across machines need (an event stamped at `latest` on one machine
//! happened after one stamped at `earliest` on another only if
//! `latest < earliest`).
//!
//! Around a leap second the kernel's Realtime repeats (or skips) a second at
//! midnight UTC: within a second of a midnight with a leap announced, the
//! bounds widen by that second.

use std::time::Duration;

use super::info::leap_margin;
use crate::Error;
pub use crate::os::LeapSecond;
use crate::os::NtpState;

/// Where real time is, and how sure of it the machine is; see
/// [`realtime_bounds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RealtimeBounds {
    /// The earliest UTC the true time can be, since the Unix epoch.
    pub earliest: Duration,
    /// Our Realtime, read for these bounds.
    pub realtime: Duration,
    /// The latest UTC the true time can be.
    pub latest: Duration,
    /// The kernel's bound on its Realtime's error against UTC (`maxerror`).
    pub kernel_max_error: Duration,
    /// The NTP daemon's estimate of that error (`esterror`): not a bound.
    pub kernel_estimated_error: Duration,
    /// Our bound against the kernel's Realtime.
    pub accuracy: Duration,
    /// TAI − UTC, in seconds, as the kernel has it (0 where no daemon set it).
    pub tai_offset_s: i32,
    /// The leap second the kernel announced.
    pub leap: LeapSecond,
}

/// The bounds of `realtime` (ns since the epoch), with our `accuracy` against
/// the kernel's Realtime and the kernel's `ntp` state.
///
/// # Errors
/// [`Error::Unsynchronized`] when no NTP daemon keeps the kernel synchronized.
pub(crate) fn bounds(
    realtime: u64,
    accuracy: Duration,
    ntp: &NtpState,
) -> Result<RealtimeBounds, Error> {
    if !ntp.synchronized {
        return Err(Error::Unsynchronized);
    }
    let kernel_max_error = Duration::from_micros(ntp.maxerror_us);
    // Within a second of midnight UTC with a leap second announced (or
    // under way), the kernel's Realtime may stand a second off.
    let leap = leap_margin(Duration::from_nanos(realtime), ntp.leap);
    let half_width = (kernel_max_error + accuracy + leap).as_nanos() as u64;
    Ok(RealtimeBounds {
        earliest: Duration::from_nanos(realtime.saturating_sub(half_width)),
        realtime: Duration::from_nanos(realtime),
        latest: Duration::from_nanos(realtime.saturating_add(half_width)),
        kernel_max_error,
        kernel_estimated_error: Duration::from_micros(ntp.esterror_us),
        accuracy,
        tai_offset_s: ntp.tai_offset_s,
        leap: ntp.leap,
    })
}

/// The earliest and the latest UTC the true time can be, now: our Realtime,
/// widened by our bound against the kernel's CLOCK_REALTIME and by the
/// kernel's own bound against UTC, which an NTP daemon (chrony, ntpd,
/// systemd-timesyncd) keeps there. See the module docs. Async-signal-safe.
///
/// ```
/// match timehands::realtime_bounds() {
///     Ok(bounds) => assert!(bounds.earliest <= bounds.realtime && bounds.realtime <= bounds.latest),
///     Err(timehands::Error::Unsynchronized) => println!("no NTP daemon keeps this machine's time"),
///     Err(timehands::Error::NoNtpState { os }) => println!("no NTP state is read on {os}"),
///     Err(other) => panic!("{other}"),
/// }
/// ```
///
/// # Errors
/// [`Error::Unsynchronized`] when the kernel is not synchronized (no daemon,
/// or it lost its sources), so that no bound exists; [`Error::Ntp`] when
/// `adjtimex(2)` (or `ntp_gettime(2)`) fails; [`Error::NoNtpState`] on an OS
/// whose NTP state timehands does not read (Android, Windows, OpenBSD, wasm).
pub fn realtime_bounds() -> Result<RealtimeBounds, Error> {
    let ntp = crate::os::ntp().map_err(|e| match e.kind() {
        std::io::ErrorKind::Unsupported => Error::NoNtpState {
            os: std::env::consts::OS,
        },
        _ => Error::Ntp {
            errno: e.raw_os_error().unwrap_or(0),
        },
    })?;
    let realtime = crate::gettime(crate::ClockId::Realtime).as_nanos() as u64;
    bounds(
        realtime,
        crate::getres(crate::ClockId::Realtime).accuracy,
        &ntp,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nanoseconds in a UTC day without a leap second, as Unix time counts it.
    const DAY_NS: u64 = 86_400 * 1_000_000_000;
    /// Nanoseconds in a second.
    const SECOND_NS: u64 = 1_000_000_000;

    fn ntp(synchronized: bool, maxerror_us: u64, leap: LeapSecond) -> NtpState {
        NtpState {
            synchronized,
            maxerror_us,
            esterror_us: maxerror_us / 10,
            tai_offset_s: 37,
            leap,
            rate_ppb: None,
        }
    }

    /// 2026-11-23 12:00:00 UTC, in ns.
    const NOON: u64 = 1_795_435_200 * SECOND_NS;

    #[test]
    fn synchronized_bounds_add_the_two_errors() {
        let b = bounds(
            NOON,
            Duration::from_nanos(300),
            &ntp(true, 5_000, LeapSecond::None),
        )
        .expect("synchronized");
        assert_eq!(b.latest - b.realtime, Duration::from_nanos(5_000_300));
        assert_eq!(b.realtime - b.earliest, Duration::from_nanos(5_000_300));
        assert_eq!(b.kernel_estimated_error, Duration::from_micros(500));
        assert_eq!((b.tai_offset_s, b.leap), (37, LeapSecond::None));
    }

    #[test]
    fn an_unsynchronized_kernel_has_no_bounds() {
        assert_eq!(
            bounds(
                NOON,
                Duration::ZERO,
                &ntp(false, 16_000_000, LeapSecond::None)
            ),
            Err(Error::Unsynchronized)
        );
    }

    /// A leap second announced widens the bounds by a second within a second
    /// of midnight UTC, on either side, and not at noon.
    #[test]
    fn a_pending_leap_second_widens_the_bounds_at_midnight() {
        let leap = ntp(true, 1_000, LeapSecond::Insert);
        let at_noon = bounds(NOON, Duration::ZERO, &leap).expect("synchronized");
        assert_eq!(at_noon.latest - at_noon.realtime, Duration::from_millis(1));
        let midnight = NOON + DAY_NS / 2;
        for t in [midnight - SECOND_NS / 2, midnight, midnight + SECOND_NS / 2] {
            let b = bounds(t, Duration::ZERO, &leap).expect("synchronized");
            assert_eq!(b.latest - b.realtime, Duration::from_millis(1_001), "{t}");
            assert_eq!(b.realtime - b.earliest, Duration::from_millis(1_001), "{t}");
        }
        let no_leap = bounds(
            midnight,
            Duration::ZERO,
            &ntp(true, 1_000, LeapSecond::None),
        )
        .expect("synchronized");
        assert_eq!(no_leap.latest - no_leap.realtime, Duration::from_millis(1));
    }

    /// On this machine: bounds around our Realtime if its kernel is
    /// synchronized, the error that says so if not.
    #[test]
    #[cfg_attr(miri, ignore = "reads the CPU's counter and calls adjtimex")]
    fn the_machine_reports_bounds_or_says_it_is_unsynchronized() {
        match realtime_bounds() {
            Ok(b) => {
                assert!(b.earliest < b.realtime && b.realtime < b.latest, "{b:?}");
                assert!(b.latest - b.realtime >= b.kernel_max_error, "{b:?}");
            }
            Err(Error::NoNtpState { os }) => assert_eq!(os, std::env::consts::OS),
            Err(e) => assert_eq!(e, Error::Unsynchronized),
        }
    }
}
