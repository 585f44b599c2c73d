//! The timeline in whole nanoseconds: what a read of `now()` computes after
//! its counter read.
//!
//! The exact timeline ([`BinTime`], 2^-64 s) is the reference. A reader that
//! wants nanoseconds does not evaluate it and then convert (a 128-bit product,
//! a carry, a second 128-bit product for the nanoseconds): each hands also
//! keeps its timeline as up to two [`NanoSegment`]s, straight pieces in units
//! of 2^-64 ns, from which the floor of the exact time in nanoseconds is one
//! 64x128-bit multiply-add.
//!
//! # Why it is exact
//!
//! A piece of the timeline that starts at count `s` with uptime `U` (in 2^-64 s
//! units, an integer) and runs at `scale` (2^-64 s per count) is, at count
//! `c`, `U + (c - s) * scale` units. Multiplied by 10^9 that is an integer
//! number of 2^-64 ns units, `X(c) = U*10^9 + (c - s) * scale*10^9`, with no
//! rounding anywhere. A segment stores the slope `scale*10^9` (up to 94 bits)
//! and `X` extended back to count 0, `origin = X(s) - s * slope`, both modulo
//! 2^128. Then `X(c) = origin + c * slope (mod 2^128)`, and as `X(c) / 2^64`
//! (the nanoseconds) is below 2^64 for every count the segment covers, its
//! floor is the high 64 bits of that sum, computed modulo 2^64:
//!
//! ```text
//! ns = origin_hi + c * slope_hi + high64(c * slope_lo + origin_lo)   (mod 2^64)
//! ```
//!
//! So a read through a segment is *equal* to the floor of the exact time in
//! nanoseconds, not within a bound of it. Monotonic reads follow: the floor is
//! monotonic, and the exact timeline never decreases (the ring's protocol).
//!
//! A segment covers counts `start .. start + len`; a count outside (before the
//! hands' base, past a windup due, across the counter's wrap) is left to the
//! exact timeline, which clamps and winds up.

use crate::BinTime;

/// Nanoseconds in a second.
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// A straight piece of the timeline in units of 2^-64 ns; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NanoSegment {
    /// The first count the segment covers.
    pub start: u64,
    /// How many counts it covers (0: none). `start + len` never passes the
    /// counter's wrap, so a count before `start` is never taken for one in it.
    pub len: u64,
    /// 2^-64 ns per count: the high and low 64 bits.
    pub slope_hi: u64,
    /// See `slope_hi`.
    pub slope_lo: u64,
    /// The segment's line at count 0, modulo 2^128: the high and low 64 bits.
    pub origin_hi: u64,
    /// See `origin_hi`.
    pub origin_lo: u64,
}

impl NanoSegment {
    /// The segment that covers nothing.
    pub const NONE: NanoSegment = NanoSegment {
        start: 0,
        len: 0,
        slope_hi: 0,
        slope_lo: 0,
        origin_hi: 0,
        origin_lo: 0,
    };

    /// The piece of the timeline that starts at count `start` at `uptime` and
    /// runs at `scale` for `len` counts, on a counter of `mask`. Covers
    /// nothing where the nanoseconds would not fit a `u64` (a negative uptime,
    /// or past 584 years), and stops at the counter's wrap.
    pub fn new(start: u64, len: u64, uptime: BinTime, scale: u64, mask: u64) -> NanoSegment {
        let len = len.min((mask - start).saturating_add(1));
        let slope = scale as u128 * NANOS_PER_SEC;
        let (Some(at_start), Some(span)) = (units_of(uptime), slope.checked_mul(len as u128))
        else {
            return NanoSegment::NONE;
        };
        // The last count covered must still be a u64 of nanoseconds.
        let fits = at_start
            .checked_add(span)
            .is_some_and(|end| end >> 64 <= u64::MAX as u128);
        if len == 0 || !fits {
            return NanoSegment::NONE;
        }
        let origin = at_start.wrapping_sub((start as u128).wrapping_mul(slope));
        NanoSegment {
            start,
            len,
            slope_hi: (slope >> 64) as u64,
            slope_lo: slope as u64,
            origin_hi: (origin >> 64) as u64,
            origin_lo: origin as u64,
        }
    }

    /// The segment, if the time plus `offset` ns (a realtime read's) stays
    /// within a `u64` over all of it; else the segment that covers nothing.
    /// Reads through a segment then add the offset without a check.
    pub fn offset_fits(self, offset: i64) -> NanoSegment {
        let ends = [
            self.start,
            self.start.wrapping_add(self.len.saturating_sub(1)),
        ];
        let fits = ends.iter().all(|&count| {
            self.nanos_at(count)
                .is_some_and(|ns| ns.checked_add_signed(offset).is_some())
        });
        if fits { self } else { NanoSegment::NONE }
    }

    /// The floor of the time at `count` in nanoseconds, if the segment covers
    /// it: one multiply-add after the range check (which does not hold the
    /// result up: it is a predicted branch).
    #[inline(always)]
    pub fn nanos_at(&self, count: u64) -> Option<u64> {
        if count.wrapping_sub(self.start) >= self.len {
            return None;
        }
        Some(self.line_at(count))
    }

    /// The segment's line at `count`, covered or not, modulo 2^64 ns: the
    /// multiply-add alone.
    #[inline(always)]
    pub fn line_at(&self, count: u64) -> u64 {
        // Below 2^128: (2^64 - 1)^2 + 2^64 - 1 < 2^128.
        let low = count as u128 * self.slope_lo as u128 + self.origin_lo as u128;
        self.origin_hi
            .wrapping_add(count.wrapping_mul(self.slope_hi))
            .wrapping_add((low >> 64) as u64)
    }
}

/// `t` in 2^-64 ns units, if it is not negative and below 2^64 ns.
fn units_of(t: BinTime) -> Option<u128> {
    let sec = u64::try_from(t.sec()).ok()?;
    let whole = u64::try_from(sec as u128 * NANOS_PER_SEC).ok()?;
    ((whole as u128) << 64).checked_add(t.frac() as u128 * NANOS_PER_SEC)
}

/// The floor of `t` in nanoseconds, saturating at 0 and `u64::MAX`: what a
/// segment gives, for the reads no segment covers.
#[inline]
pub(crate) fn floor_nanos(t: BinTime) -> u64 {
    let ns = t.as_nanos();
    if ns <= 0 {
        0
    } else {
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// The floor of `t` in nanoseconds as an `i64`, if it fits (292 years
/// either way): the boottime offset that realtime reads through a segment add.
pub(crate) fn floor_nanos_signed(t: BinTime) -> Option<i64> {
    i64::try_from(t.as_nanos()).ok()
}

/// Realtime in nanoseconds from uptime's and the boottime offset: the floor
/// of uptime plus the floor of the offset, held to what a `u64` holds.
pub(crate) fn realtime_nanos(uptime_nanos: u64, boottime: BinTime) -> u64 {
    (uptime_nanos as i128 + boottime.as_nanos()).clamp(0, u64::MAX as i128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_is_the_floor_of_the_exact_time() {
        // 3 GHz, starting at 1.5 s plus a little, from count 10^12.
        let scale = ((1u128 << 64) / 3_000_000_000) as u64;
        let uptime = BinTime::new(1, 1 << 63).saturating_add(BinTime::new(0, 12_345));
        let seg = NanoSegment::new(1_000_000_000_000, 3_000_000, uptime, scale, u64::MAX);
        for d in [0u64, 1, 2, 3, 999, 1_000_000, 2_999_999] {
            let exact = uptime.saturating_add(BinTime::from_counts(d, scale));
            assert_eq!(
                seg.nanos_at(1_000_000_000_000 + d),
                Some(floor_nanos(exact)),
                "at {d}"
            );
        }
        assert_eq!(seg.nanos_at(1_000_000_000_000 + 3_000_000), None);
        assert_eq!(seg.nanos_at(999_999_999_999), None);
    }

    #[test]
    fn slow_counters_have_whole_nanoseconds_per_count() {
        // 24 MHz: 41.67 ns per count, a slope above 2^64.
        let scale = ((1u128 << 64) / 24_000_000) as u64;
        let seg = NanoSegment::new(5, 1_000, BinTime::ZERO, scale, u64::MAX);
        assert!(seg.slope_hi == 41);
        let exact = BinTime::from_counts(999, scale);
        assert_eq!(seg.nanos_at(5 + 999), Some(floor_nanos(exact)));
    }

    #[test]
    fn a_segment_stops_at_the_wrap_and_refuses_what_does_not_fit() {
        let seg = NanoSegment::new(0xfff0, 0x100, BinTime::ZERO, 1 << 44, 0xffff);
        assert_eq!(seg.len, 0x10);
        assert_eq!(seg.nanos_at(0x0001), None);
        let seg = NanoSegment::new(0, 10, BinTime::new(5, 0), 1 << 44, u64::MAX);
        assert_eq!(seg.offset_fits(-5_000_000_000), seg);
        assert_eq!(seg.offset_fits(-5_000_000_001), NanoSegment::NONE);
        assert_eq!(seg.offset_fits(i64::MAX), seg);
        let negative = NanoSegment::new(0, 10, BinTime::new(-1, 0), 1 << 44, u64::MAX);
        assert_eq!(negative, NanoSegment::NONE);
        let too_late = NanoSegment::new(0, 10, BinTime::new(1 << 40, 0), 1 << 44, u64::MAX);
        assert_eq!(too_late, NanoSegment::NONE);
        assert_eq!(NanoSegment::NONE.nanos_at(0), None);
    }
}
