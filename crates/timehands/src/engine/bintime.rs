//! `BinTime`: seconds and a binary fraction of a second.
//!
//! A `BinTime` is `sec + frac / 2^64` seconds, the representation FreeBSD's
//! timecounters keep time in. The fraction is binary so that scaling a counter
//! delta is one multiplication and converting to nanoseconds or microseconds is a
//! multiplication and a shift: nothing on a clock read divides.
//!
//! Negative times are normalized as POSIX `timespec`s are: `sec` carries the sign
//! and `frac` is always a non-negative fraction, so -0.25 s is `sec = -1`,
//! `frac = 0.75 * 2^64`. The derived order (seconds first, then fraction) is
//! therefore the order of the values.
//!
//! ```
//! use timehands::BinTime;
//!
//! let half = BinTime::new(0, 1 << 63);
//! assert_eq!(half.as_nanos(), 500_000_000);
//! assert_eq!((half + half).to_timespec(), (1, 0));
//! assert_eq!(BinTime::from_nanos(-250_000_000), BinTime::new(-1, 3 << 62));
//! assert_eq!(half.to_string(), "0.500000000");
//! ```

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};
use core::time::Duration;

use crate::Error;

const NANOS_PER_SEC: u128 = 1_000_000_000;
const MICROS_PER_SEC: u128 = 1_000_000;

/// A point or span of time: `sec + frac / 2^64` seconds.
///
/// The resolution is 2^-64 s (about 54 zeptoseconds) and the range is the range
/// of an `i64` count of seconds, about ±292 billion years.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BinTime {
    sec: i64,
    frac: u64,
}

impl BinTime {
    /// Zero seconds.
    pub const ZERO: BinTime = BinTime { sec: 0, frac: 0 };
    /// The largest representable time.
    pub const MAX: BinTime = BinTime {
        sec: i64::MAX,
        frac: u64::MAX,
    };
    /// The smallest (most negative) representable time.
    pub const MIN: BinTime = BinTime {
        sec: i64::MIN,
        frac: 0,
    };

    /// `sec + frac / 2^64` seconds.
    pub const fn new(sec: i64, frac: u64) -> BinTime {
        BinTime { sec, frac }
    }

    /// Whole seconds, rounded toward negative infinity.
    pub const fn sec(&self) -> i64 {
        self.sec
    }

    /// The fraction of a second, in units of 2^-64 s.
    pub const fn frac(&self) -> u64 {
        self.frac
    }

    /// The time `counts * scale / 2^64` seconds: a counter delta times a 0.64
    /// fixed-point scale (seconds per count), taken as a full 128-bit product so
    /// that no delta below 2^64 counts loses anything.
    ///
    /// The product is exact whenever it is below 2^63 seconds; beyond that (292
    /// billion years) it saturates at [`BinTime::MAX`].
    ///
    /// ```
    /// use timehands::BinTime;
    ///
    /// // One hour of a 3 GHz counter, at a scale of 2^64 / 3e9 rounded.
    /// let scale = ((1u128 << 64) / 3_000_000_000) as u64;
    /// let hour = BinTime::from_counts(3_000_000_000 * 3600, scale);
    /// assert_eq!(hour.sec(), 3599); // the scale was rounded down: a hair under the hour
    /// ```
    #[inline]
    pub const fn from_counts(counts: u64, scale: u64) -> BinTime {
        let product = counts as u128 * scale as u128;
        let sec = (product >> 64) as u64;
        if sec > i64::MAX as u64 {
            return BinTime::MAX;
        }
        BinTime {
            sec: sec as i64,
            frac: product as u64,
        }
    }

    /// `self + rhs`, or `None` on overflow.
    #[inline]
    pub const fn checked_add(self, rhs: BinTime) -> Option<BinTime> {
        let (frac, carry) = self.frac.overflowing_add(rhs.frac);
        let Some(sec) = self.sec.checked_add(rhs.sec) else {
            return None;
        };
        match sec.checked_add(carry as i64) {
            Some(sec) => Some(BinTime { sec, frac }),
            None => None,
        }
    }

    /// `self - rhs`, or `None` on overflow.
    #[inline]
    pub const fn checked_sub(self, rhs: BinTime) -> Option<BinTime> {
        let (frac, borrow) = self.frac.overflowing_sub(rhs.frac);
        let Some(sec) = self.sec.checked_sub(rhs.sec) else {
            return None;
        };
        match sec.checked_sub(borrow as i64) {
            Some(sec) => Some(BinTime { sec, frac }),
            None => None,
        }
    }

    /// `self + rhs`, clamped to [`BinTime::MIN`]..=[`BinTime::MAX`].
    #[inline]
    pub const fn saturating_add(self, rhs: BinTime) -> BinTime {
        match self.checked_add(rhs) {
            Some(t) => t,
            None if rhs.sec < 0 => BinTime::MIN,
            None => BinTime::MAX,
        }
    }

    /// `self - rhs`, clamped to [`BinTime::MIN`]..=[`BinTime::MAX`].
    #[inline]
    pub const fn saturating_sub(self, rhs: BinTime) -> BinTime {
        match self.checked_sub(rhs) {
            Some(t) => t,
            None if rhs.sec < 0 => BinTime::MAX,
            None => BinTime::MIN,
        }
    }

    /// The time in 2^-64 s units, as one signed integer.
    pub(crate) const fn as_units(self) -> i128 {
        ((self.sec as i128) << 64) | self.frac as i128
    }

    /// The time `units * 2^-64` seconds. `units` must be within the range of
    /// `BinTime`, which every `i128` whose top 64 bits fit an `i64` is: all of them.
    pub(crate) const fn from_units(units: i128) -> BinTime {
        BinTime {
            sec: (units >> 64) as i64,
            frac: units as u64,
        }
    }

    /// Nanoseconds, rounded toward negative infinity.
    #[inline]
    pub const fn as_nanos(&self) -> i128 {
        self.sec as i128 * NANOS_PER_SEC as i128 + fraction_in(self.frac, NANOS_PER_SEC) as i128
    }

    /// The least `BinTime` that is `ns` nanoseconds, so that
    /// `BinTime::from_nanos(n).as_nanos() == n` for every `n` in range.
    /// Saturates at [`BinTime::MIN`] and [`BinTime::MAX`].
    pub const fn from_nanos(ns: i128) -> BinTime {
        match BinTime::checked_from_nanos(ns) {
            Some(t) => t,
            None if ns < 0 => BinTime::MIN,
            None => BinTime::MAX,
        }
    }

    /// As [`BinTime::from_nanos`], or `None` when `ns` is beyond ±2^63 seconds.
    pub const fn checked_from_nanos(ns: i128) -> Option<BinTime> {
        let sec = ns.div_euclid(NANOS_PER_SEC as i128);
        if sec < i64::MIN as i128 || sec > i64::MAX as i128 {
            return None;
        }
        let nsec = ns.rem_euclid(NANOS_PER_SEC as i128) as u128;
        Some(BinTime {
            sec: sec as i64,
            frac: fraction_of(nsec, NANOS_PER_SEC),
        })
    }

    /// The POSIX `timespec` pair `(tv_sec, tv_nsec)`, nanoseconds rounded toward
    /// negative infinity (so `tv_nsec` is in `0..1_000_000_000`).
    #[inline]
    pub const fn to_timespec(&self) -> (i64, u32) {
        (self.sec, fraction_in(self.frac, NANOS_PER_SEC) as u32)
    }

    /// The least `BinTime` that is the `timespec` `(sec, nsec)`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when `nsec` is not below 1 000 000 000.
    pub const fn from_timespec(sec: i64, nsec: u32) -> Result<BinTime, Error> {
        BinTime::from_parts(
            sec,
            nsec,
            NANOS_PER_SEC,
            "timespec nanoseconds must be below 1_000_000_000",
        )
    }

    /// The POSIX `timeval` pair `(tv_sec, tv_usec)`, microseconds rounded toward
    /// negative infinity (so `tv_usec` is in `0..1_000_000`).
    #[inline]
    pub const fn to_timeval(&self) -> (i64, u32) {
        (self.sec, fraction_in(self.frac, MICROS_PER_SEC) as u32)
    }

    /// The least `BinTime` that is the `timeval` `(sec, usec)`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] when `usec` is not below 1 000 000.
    pub const fn from_timeval(sec: i64, usec: u32) -> Result<BinTime, Error> {
        BinTime::from_parts(
            sec,
            usec,
            MICROS_PER_SEC,
            "timeval microseconds must be below 1_000_000",
        )
    }

    /// `sec` seconds and `part / per_sec` of a second, or `too_big` when the
    /// part is not below `per_sec`.
    const fn from_parts(
        sec: i64,
        part: u32,
        per_sec: u128,
        too_big: &'static str,
    ) -> Result<BinTime, Error> {
        if part as u128 >= per_sec {
            return Err(Error::OutOfRange(too_big));
        }
        Ok(BinTime {
            sec,
            frac: fraction_of(part as u128, per_sec),
        })
    }
}

/// `frac / 2^64` of a second in units of `1 / per_sec` s, rounded down: a
/// multiplication and a shift, never a division.
#[inline]
const fn fraction_in(frac: u64, per_sec: u128) -> u64 {
    ((frac as u128 * per_sec) >> 64) as u64
}

/// The least binary fraction that is `part / per_sec` of a second (for
/// `part < per_sec`), so that `fraction_in` gives `part` back exactly.
const fn fraction_of(part: u128, per_sec: u128) -> u64 {
    ((part << 64).div_ceil(per_sec)) as u64
}

impl TryFrom<Duration> for BinTime {
    type Error = Error;

    /// The least `BinTime` that is `d`; exact for every `Duration` below 2^63 s.
    fn try_from(d: Duration) -> Result<BinTime, Error> {
        let Ok(sec) = i64::try_from(d.as_secs()) else {
            return Err(Error::OutOfRange(
                "Duration longer than 2^63 seconds does not fit a BinTime",
            ));
        };
        Ok(BinTime {
            sec,
            frac: fraction_of(d.subsec_nanos() as u128, NANOS_PER_SEC),
        })
    }
}

impl TryFrom<BinTime> for Duration {
    type Error = Error;

    /// The `Duration` of a non-negative `BinTime`, nanoseconds rounded down.
    fn try_from(t: BinTime) -> Result<Duration, Error> {
        if t.sec < 0 {
            return Err(Error::OutOfRange("a negative BinTime is not a Duration"));
        }
        let (sec, nsec) = t.to_timespec();
        Ok(Duration::new(sec as u64, nsec))
    }
}

impl Add for BinTime {
    type Output = BinTime;

    /// # Panics
    /// On overflow, in every build (as `Duration`'s `+` does); use
    /// [`BinTime::checked_add`] or [`BinTime::saturating_add`] where that can happen.
    fn add(self, rhs: BinTime) -> BinTime {
        self.checked_add(rhs)
            .expect("overflow when adding BinTimes")
    }
}

impl Sub for BinTime {
    type Output = BinTime;

    /// # Panics
    /// On overflow; use [`BinTime::checked_sub`] or [`BinTime::saturating_sub`]
    /// where that can happen.
    fn sub(self, rhs: BinTime) -> BinTime {
        self.checked_sub(rhs)
            .expect("overflow when subtracting BinTimes")
    }
}

impl AddAssign for BinTime {
    fn add_assign(&mut self, rhs: BinTime) {
        *self = *self + rhs;
    }
}

impl SubAssign for BinTime {
    fn sub_assign(&mut self, rhs: BinTime) {
        *self = *self - rhs;
    }
}

impl fmt::Display for BinTime {
    /// Seconds with nine decimals, rounded toward negative infinity:
    /// `-1.250000000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.as_nanos();
        let sign = if ns < 0 { "-" } else { "" };
        let abs = ns.unsigned_abs();
        write!(
            f,
            "{sign}{}.{:09}",
            abs / NANOS_PER_SEC,
            abs % NANOS_PER_SEC
        )
    }
}
