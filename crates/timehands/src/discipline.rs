//! Frequency and phase control: the scale of each segment of the timeline.
//!
//! The scale is seconds per count as a 0.64 fixed-point number. It is the
//! nominal `2^64 / frequency` plus two corrections, each a part of the nominal
//! scale:
//!
//! - the frequency adjustment, in parts per billion, bounded to ±500 ppm;
//! - the slew of `adjtime`: while an amount remains, time runs up to 500 ppm
//!   fast (or slow) until the amount is used up.
//!
//! A slew runs for one windup interval's counts after a switch point and then
//! stops (the hands' `slew_len`), however late the next windup comes: a clock
//! wound up only by readers seconds apart never runs a slew past its amount.
//! It is accounted exactly: a slew segment of `n` counts gains `n * slew_part`
//! units of 2^-64 s, and that product is what is taken off the remainder. So
//! the total correction equals the request to within one unit per count of the
//! last segment, whatever the windups' timing.

use crate::{BinTime, Error};

/// The largest frequency adjustment, and the slew rate: 500 ppm, in ppb.
pub(crate) const MAX_PPB: i64 = 500_000;

/// `2^64 / frequency`, rounded to nearest. `frequency` is at least 2, so the
/// result fits (2^63 at most).
pub(crate) fn nominal_scale(frequency: u64) -> u64 {
    let f = frequency as u128;
    (((1u128 << 64) + f / 2) / f) as u64
}

/// `ppb` parts per billion of `scale`, rounded toward zero.
fn part_of(scale: u64, ppb: i64) -> i64 {
    (scale as i128 * ppb as i128 / 1_000_000_000) as i64
}

/// The writer's rate state, kept behind the writer lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Discipline {
    /// `2^64 / frequency`.
    pub nominal: u64,
    /// Counts in one windup interval: the horizon over which a slew's last
    /// part is spread.
    pub interval: u64,
    /// The frequency adjustment, ppb.
    pub frequency_ppb: i64,
    /// What the slew still has to add, in 2^-64 s units (negative: take away).
    pub slew_remaining: i128,
    /// The slew's part of the scale in the current slew segment.
    pub slew_part: i64,
}

impl Discipline {
    /// No adjustment, no slew: the nominal rate.
    pub fn new(nominal: u64, interval: u64) -> Discipline {
        Discipline {
            nominal,
            interval,
            frequency_ppb: 0,
            slew_remaining: 0,
            slew_part: 0,
        }
    }

    /// The scale of the current slew segment.
    pub fn scale(&self) -> u64 {
        (self.settled() as i128 + self.slew_part as i128) as u64
    }

    /// The scale without the slew: the nominal one and the frequency adjustment.
    pub fn settled(&self) -> u64 {
        (self.nominal as i128 + part_of(self.nominal, self.frequency_ppb) as i128) as u64
    }

    /// Takes the slew of `counts` counts of the current slew segment off the
    /// remainder.
    pub fn charge(&mut self, counts: u64) {
        self.slew_remaining -= counts as i128 * self.slew_part as i128;
    }

    /// The current slew segment is over (and charged).
    pub fn end_slew(&mut self) {
        self.slew_part = 0;
    }

    /// Chooses the slew for the next slew segment (one interval long): 500 ppm
    /// toward zero, or, when less than one interval at 500 ppm remains, exactly
    /// what one interval needs. Returns that segment's scale.
    pub fn retune(&mut self) -> u64 {
        let max = part_of(self.nominal, MAX_PPB) as i128;
        let part = self.slew_remaining / self.interval as i128;
        self.slew_part = part.clamp(-max, max) as i64;
        self.scale()
    }

    /// Replaces the slew remainder with `ns` nanoseconds; returns the old
    /// remainder in nanoseconds, rounded toward zero.
    pub fn adjtime(&mut self, ns: i64) -> i64 {
        let old = self.slew_remaining;
        self.slew_remaining = BinTime::from_nanos(ns as i128).as_units();
        let old_ns = BinTime::from_units(old.abs()).as_nanos() as i64;
        if old < 0 { -old_ns } else { old_ns }
    }

    /// Sets the frequency adjustment.
    pub fn set_frequency_adjustment(&mut self, ppb: i64) -> Result<(), Error> {
        if !(-MAX_PPB..=MAX_PPB).contains(&ppb) {
            return Err(Error::FrequencyAdjustment { ppb });
        }
        self.frequency_ppb = ppb;
        Ok(())
    }
}
