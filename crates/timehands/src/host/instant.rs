//! `Instant`: a point on the OS's monotonic clock, in nanoseconds.
//!
//! An `Instant` is what [`now`](crate::now) returns: nanoseconds since the
//! origin of the OS's Monotonic ([`KernelClock::Monotonic`](crate::sys::KernelClock::Monotonic),
//! the clock `std::time::Instant` reads there). On Linux that is
//! CLOCK_MONOTONIC (the kernel's boot, less suspend), so an `Instant` can be
//! handed to `clock_nanosleep(TIMER_ABSTIME)` or a timerfd as it is; on
//! macOS CLOCK_UPTIME_RAW, on Windows QueryPerformanceCounter in
//! nanoseconds. On every OS it is stored in 8 bytes and converts to and from
//! `std::time::Instant` exactly.
//!
//! ```
//! use std::time::Duration;
//!
//! let start = timehands::now();
//! let later = start + Duration::from_micros(5);
//! assert_eq!(later.duration_since(start), Duration::from_micros(5));
//! assert_eq!(start.duration_since(later), Duration::ZERO); // saturating
//! let std_start: std::time::Instant = start.into();
//! assert_eq!(timehands::Instant::from(std_start), start);
//! ```

use core::ops::{Add, AddAssign, Sub, SubAssign};
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// A point on the OS's Monotonic (CLOCK_MONOTONIC on Linux), with
/// nanosecond resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct Instant {
    nanos: u64,
}

impl Instant {
    /// Now: the same as [`timehands::now`](crate::now), and as
    /// async-signal-safe.
    #[inline]
    pub fn now() -> Instant {
        crate::now()
    }

    /// The instant `nanos` nanoseconds after CLOCK_MONOTONIC's origin.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant { nanos }
    }

    /// Nanoseconds since CLOCK_MONOTONIC's origin.
    pub const fn as_nanos(&self) -> u64 {
        self.nanos
    }

    /// The time since this instant, zero if it is in the future.
    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    /// The time from `earlier` to this instant, zero if `earlier` is later.
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.nanos.saturating_sub(earlier.nanos))
    }

    /// The time from `earlier` to this instant, or `None` if `earlier` is later.
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.nanos
            .checked_sub(earlier.nanos)
            .map(Duration::from_nanos)
    }

    /// This instant plus `d`, or `None` past 2^64 ns (584 years of uptime).
    pub fn checked_add(&self, d: Duration) -> Option<Instant> {
        let nanos = u64::try_from(d.as_nanos()).ok()?;
        self.nanos.checked_add(nanos).map(Instant::from_nanos)
    }

    /// This instant minus `d`, or `None` before CLOCK_MONOTONIC's origin.
    pub fn checked_sub(&self, d: Duration) -> Option<Instant> {
        let nanos = u64::try_from(d.as_nanos()).ok()?;
        self.nanos.checked_sub(nanos).map(Instant::from_nanos)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// # Panics
    /// Past 2^64 ns, as `std::time::Instant` panics on overflow.
    fn add(self, d: Duration) -> Instant {
        self.checked_add(d)
            .expect("overflow when adding a Duration to an Instant")
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// # Panics
    /// Before CLOCK_MONOTONIC's origin.
    fn sub(self, d: Duration) -> Instant {
        self.checked_sub(d)
            .expect("overflow when subtracting a Duration from an Instant")
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating, as `std::time::Instant`'s.
    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

/// A `std::time::Instant` whose Monotonic nanoseconds are known, so that the
/// two kinds of instant convert exactly: on unix std's `Instant` is a
/// timespec of the clock Monotonic is (CLOCK_MONOTONIC, Apple's
/// CLOCK_UPTIME_RAW), which its `Debug` shows. Where it shows something else
/// (Windows, wasm), the anchor is taken from a tight bracket of two reads of
/// that same clock, and the conversions are exact to within that bracket.
fn anchor() -> (std::time::Instant, u64) {
    static ANCHOR: OnceLock<(std::time::Instant, u64)> = OnceLock::new();
    *ANCHOR.get_or_init(|| {
        // std's instant between two reads of Monotonic: its time is the
        // middle, within half the bracket, where its `Debug` does not say.
        let monotonic = || crate::os::kernel_nanos(crate::os::KernelClock::Monotonic);
        let before = monotonic().unwrap_or(0);
        let std_instant = std::time::Instant::now();
        let after = monotonic().unwrap_or(before);
        let nanos = timespec_nanos(&format!("{std_instant:?}"))
            .unwrap_or(before + after.saturating_sub(before) / 2);
        (std_instant, nanos)
    })
}

/// The nanoseconds of `Instant { tv_sec: S, tv_nsec: N }`.
fn timespec_nanos(debug: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        let rest = &debug[debug.find(name)? + name.len()..];
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let sec = field("tv_sec:")?;
    let nsec = field("tv_nsec:")?;
    sec.checked_mul(1_000_000_000)?.checked_add(nsec)
}

impl From<std::time::Instant> for Instant {
    /// Exact for every `std::time::Instant` from CLOCK_MONOTONIC's origin to
    /// 584 years after it; one outside that range saturates to its end.
    fn from(t: std::time::Instant) -> Instant {
        let (std_anchor, nanos) = anchor();
        let nanos = match t.checked_duration_since(std_anchor) {
            Some(after) => nanos as i128 + after.as_nanos() as i128,
            None => nanos as i128 - (std_anchor - t).as_nanos() as i128,
        };
        Instant::from_nanos(nanos.clamp(0, u64::MAX as i128) as u64)
    }
}

impl From<Instant> for std::time::Instant {
    /// # Panics
    /// Where `std::time::Instant` cannot hold the instant, as its own `+` and
    /// `-` panic.
    fn from(t: Instant) -> std::time::Instant {
        let (std_anchor, nanos) = anchor();
        if t.nanos >= nanos {
            std_anchor + Duration::from_nanos(t.nanos - nanos)
        } else {
            std_anchor - Duration::from_nanos(nanos - t.nanos)
        }
    }
}

/// An [`Instant`] that threads can share: a `u64` of nanoseconds.
#[derive(Debug, Default)]
pub struct AtomicInstant(AtomicU64);

impl AtomicInstant {
    /// An atomic holding `t`.
    pub const fn new(t: Instant) -> AtomicInstant {
        AtomicInstant(AtomicU64::new(t.nanos))
    }

    /// The instant held.
    pub fn load(&self, order: Ordering) -> Instant {
        Instant::from_nanos(self.0.load(order))
    }

    /// Replaces the instant held.
    pub fn store(&self, t: Instant, order: Ordering) {
        self.0.store(t.nanos, order)
    }

    /// Keeps the later of the instant held and `t`; returns the one held before.
    pub fn fetch_max(&self, t: Instant, order: Ordering) -> Instant {
        Instant::from_nanos(self.0.fetch_max(t.nanos, order))
    }

    /// Replaces `current` with `new` if `current` is held, as
    /// `AtomicU64::compare_exchange`.
    pub fn compare_exchange(
        &self,
        current: Instant,
        new: Instant,
        success: Ordering,
        failure: Ordering,
    ) -> Result<Instant, Instant> {
        self.0
            .compare_exchange(current.nanos, new.nanos, success, failure)
            .map(Instant::from_nanos)
            .map_err(Instant::from_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::timespec_nanos;

    #[cfg(feature = "serde")]
    #[test]
    fn serializes_as_nanoseconds() {
        let t = super::Instant::from_nanos(1_234_567_890);
        assert_eq!(serde_json::to_string(&t).unwrap(), "1234567890");
        assert_eq!(
            serde_json::from_str::<super::Instant>("1234567890").unwrap(),
            t
        );
    }

    #[test]
    fn reads_a_timespec_or_nothing() {
        assert_eq!(
            timespec_nanos("Instant { tv_sec: 3970, tv_nsec: 216214414 }"),
            Some(3_970_216_214_414)
        );
        assert_eq!(timespec_nanos("Instant { secs: 1 }"), None);
    }

    // Only unix's std shows a timespec; elsewhere the anchor is a bracket.
    #[cfg(unix)]
    #[test]
    fn reads_the_timespec_of_std_instant() {
        let real = format!("{:?}", std::time::Instant::now());
        assert!(
            timespec_nanos(&real).is_some(),
            "std's Debug changed: {real}"
        );
    }
}
