//! Frequency and phase control: the scale of each segment of the timeline.
//!
//! The scale is seconds per count as a 0.64 fixed-point number. It is the
//! nominal `2^64 / frequency` plus two corrections, each a part of the nominal
//! scale:
//!
//! - the frequency adjustment, in parts per billion, bounded to ±500 ppm;
//! - the slew of `adjtime`: time runs 500 ppm fast (or slow) from a switch
//!   point until the amount is used up, as BSD `adjtime(2)` defines it; or
//!   at the rate [`set_slew_rate`](crate::Timekeeper::set_slew_rate) set, for
//!   a caller that follows a clock already steered (the host clock follows
//!   the kernel's), where a phase error is closed as fast as monotonicity
//!   allows: running fast at any rate, running slow as far as standing still.
//!
//! A slew is *planned* whole when a windup schedules it: its part of the scale
//! and its length in counts, `part * len` never more than what remains (the
//! same sign, rounded toward zero). The plan is part of the timeline, so it
//! runs at its rate however far apart windups come: a clock wound up by a
//! 100 Hz tick, or by readers seconds apart, slews as fast as one wound up
//! every interval. The last piece of an amount, less than an interval at 500
//! ppm, is spread over one interval at a lower rate, so that a plan always
//! lasts at least an interval (the hands' segments rely on it).
//!
//! Slew is accounted exactly, in units of 2^-64 s: the remainder is what has
//! not run before the current hands' switch point, and a windup takes off the
//! part of the plan that runs up to the next one. `adjtime` returns what has
//! not run at the moment it is called.

use crate::{BinTime, Error};

/// The largest frequency adjustment, and the slew rate unless set: 500 ppm,
/// in ppb.
pub(crate) const MAX_PPB: i64 = 500_000;

/// The fastest slew rate, in ppb: time twice as fast, or, slowing down,
/// standing still.
pub(crate) const MAX_SLEW_PPB: i64 = 1_000_000_000;

/// `2^64 / frequency`, rounded to nearest. `frequency` is at least 2, so the
/// result fits (2^63 at most).
pub(crate) fn nominal_scale(frequency: u64) -> u64 {
    let f = frequency as u128;
    (((1u128 << 64) + f / 2) / f) as u64
}

/// `ppt` parts per trillion of `scale`, rounded toward zero.
fn part_of(scale: u64, ppt: i64) -> i64 {
    (scale as i128 * ppt as i128 / 1_000_000_000_000) as i64
}

/// The longest slew plan, in counts: no timeline reaches it.
const MAX_LEN: u64 = u64::MAX / 2;

/// A slew in a timeline: `part` of the scale (2^-64 s per count, negative to
/// slow down) for `len` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slew {
    pub part: i64,
    pub len: u64,
}

impl Slew {
    /// What the slew adds over `counts` of its counts, in 2^-64 s units.
    pub fn over(&self, counts: u64) -> i128 {
        counts.min(self.len) as i128 * self.part as i128
    }

    /// Whether this plan, from where it stands, delivers `target` to within
    /// one count of its part: a slew in progress that still fits is kept,
    /// rather than re-planned (a rate change) at every windup.
    pub fn delivers(&self, target: i128) -> bool {
        (target - self.over(self.len)).abs() < (self.part as i128).abs()
    }
}

/// The writer's rate state, kept behind the writer lock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Discipline {
    /// `2^64 / frequency`.
    pub nominal: u64,
    /// Counts in one windup interval: the shortest slew plan.
    pub interval: u64,
    /// The frequency adjustment, ppt (thousandths of a ppb): a held
    /// frequency's error grows a phase error without bound, and a ppb is
    /// 300 ns over a five-minute holdover.
    pub frequency_ppt: i64,
    /// What remains to slew after the current hands' switch point, in 2^-64 s
    /// units (negative: take away).
    pub slew_remaining: i128,
    /// The slew's part of the current hands' scale before its switch point
    /// (what runs there was taken off the remainder already).
    pub slew_before: i64,
    /// The slew rate, ppb: [`MAX_PPB`] unless set.
    pub slew_ppb: i64,
}

impl Discipline {
    /// No adjustment, no slew: the nominal rate.
    pub fn new(nominal: u64, interval: u64) -> Discipline {
        Discipline {
            nominal,
            interval,
            frequency_ppt: 0,
            slew_remaining: 0,
            slew_before: 0,
            slew_ppb: MAX_PPB,
        }
    }

    /// The scale without the slew: the nominal one and the frequency adjustment.
    pub fn settled(&self) -> u64 {
        (self.nominal as i128 + part_of(self.nominal, self.frequency_ppt) as i128) as u64
    }

    /// The slew for `target` units from a switch point: the slew rate (500
    /// ppm unless set) toward zero until it is used up, or, when less than
    /// an interval at that rate remains, the rate that uses it up over one
    /// interval. The rate's part is at least one unit a count (a slow
    /// counter's 1 ppb rounds to none); a slow-down never takes more than
    /// the settled scale (time stands still at the most), a speed-up never
    /// more than a scale holds. `None` when not even one unit a count
    /// remains to slew over an interval.
    pub fn plan(&self, target: i128) -> Option<Slew> {
        let rate = self.nominal as i128 * self.slew_ppb as i128 / 1_000_000_000;
        let settled = self.settled() as i128;
        let room = if target < 0 {
            settled
        } else {
            u64::MAX as i128 - settled
        };
        let max = rate.max(1).min(room).min(i64::MAX as i128);
        if max == 0 {
            return None;
        }
        let part = if target.abs() >= max * self.interval as i128 {
            max * target.signum()
        } else {
            target / self.interval as i128
        };
        // |part * len| <= |target|, so len >= interval. A plan longer than
        // half the u64 range (centuries of slew) is cut: the rest remains.
        (part != 0).then(|| Slew {
            part: part as i64,
            len: (target / part).min(MAX_LEN as i128) as u64,
        })
    }

    /// Replaces the remainder with `ns` nanoseconds, where `unaccounted` is
    /// the slew that has run since the current switch point (negative: the
    /// slew before it that has yet to run); returns what had not run, in
    /// nanoseconds rounded to nearest.
    pub fn adjtime(&mut self, ns: i64, unaccounted: i128) -> i64 {
        let left = self.slew_remaining - unaccounted;
        self.slew_remaining = BinTime::from_nanos(ns as i128).as_units() + unaccounted;
        // Rounded to the nearest nanosecond: a request returned untouched
        // comes back as it was asked, a plan's last fraction of a unit as 0.
        let half_nano = BinTime::from_nanos(1).as_units() / 2;
        BinTime::from_units(left + half_nano).as_nanos() as i64
    }

    /// Sets the slew rate.
    pub fn set_slew_rate(&mut self, ppb: i64) -> Result<(), Error> {
        if !(1..=MAX_SLEW_PPB).contains(&ppb) {
            return Err(Error::SlewRate { ppb });
        }
        self.slew_ppb = ppb;
        Ok(())
    }

    /// Sets the frequency adjustment, in ppt.
    pub fn set_frequency_adjustment_ppt(&mut self, ppt: i64) -> Result<(), Error> {
        if !(-MAX_PPB * 1000..=MAX_PPB * 1000).contains(&ppt) {
            // The whole ppb beyond it, rounded away from zero: never a
            // figure within the range.
            let ppb = (ppt as i128 + 999 * ppt.signum() as i128) / 1000;
            return Err(Error::FrequencyAdjustment {
                ppb: ppb.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            });
        }
        self.frequency_ppt = ppt;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan never slews more than asked, runs at 500 ppm while at least an
    /// interval of it remains, and lasts at least an interval.
    #[test]
    fn a_plan_never_exceeds_its_target() {
        let d = Discipline::new(nominal_scale(1_000_000_000), 1_000_000);
        let max = part_of(d.nominal, MAX_PPB * 1000);
        for target in [
            1i128,
            999_999,
            1_000_000,
            7_777_777_777,
            max as i128 * 1_000_000,
            max as i128 * 1_000_000 - 1,
            BinTime::from_nanos(3_600_000_000_000).as_units(),
        ] {
            for target in [target, -target] {
                let Some(slew) = d.plan(target) else {
                    assert!(target.abs() < 1_000_000, "{target}");
                    continue;
                };
                let total = slew.over(slew.len);
                assert_eq!(total.signum(), target.signum(), "{target}");
                assert!(total.abs() <= target.abs(), "{target}: {slew:?}");
                assert!(slew.delivers(target), "{target}: {slew:?}");
                assert!(slew.len >= d.interval, "{target}: {slew:?}");
                assert!(slew.part.abs() <= max, "{target}: {slew:?}");
                if target.abs() >= max as i128 * 1_000_000 {
                    assert_eq!(slew.part.abs(), max, "{target}");
                }
            }
        }
    }

    /// At a slew rate up to standing still, a plan slows time down to 0 at
    /// the most and speeds it up to twice its rate, and still never slews
    /// more than asked; on a 2 Hz counter (a scale of 2^63, whose double no
    /// scale holds) a speed-up stops at the largest scale, and on a 2^40 Hz
    /// one 1 ppb, which rounds to nothing, still slews a unit a count.
    #[test]
    fn a_fast_plan_stands_still_at_the_most() {
        let mut d = Discipline::new(nominal_scale(1_000_000_000), 1_000_000);
        d.frequency_ppt = -400_000_000;
        d.set_slew_rate(MAX_SLEW_PPB).unwrap();
        let ahead = BinTime::from_nanos(-20_000_000).as_units();
        let slow = d.plan(ahead).expect("a slew");
        assert_eq!(d.settled() as i128 + slow.part as i128, 0, "{slow:?}");
        assert!(slow.over(slow.len).abs() <= ahead.abs());
        let behind = -ahead;
        let fast = d.plan(behind).expect("a slew");
        assert_eq!(fast.part, part_of(d.nominal, MAX_SLEW_PPB * 1000));
        assert!(fast.over(fast.len) <= behind && fast.delivers(behind));
        assert_eq!(d.set_slew_rate(0), Err(Error::SlewRate { ppb: 0 }));
        let mut slow = Discipline::new(nominal_scale(2), 4);
        slow.set_slew_rate(MAX_SLEW_PPB).unwrap();
        let far = BinTime::from_nanos(3_600_000_000_000_000).as_units();
        let fast = slow.plan(far).expect("a slew");
        assert_eq!(
            slow.settled() as i128 + fast.part as i128,
            u64::MAX as i128,
            "{fast:?}"
        );
        assert!(fast.over(fast.len) <= far);
        let mut fast_counter = Discipline::new(nominal_scale(1 << 40), 4);
        fast_counter.set_slew_rate(1).unwrap();
        assert_eq!(fast_counter.plan(far).map(|s| s.part), Some(1));
        assert_eq!(
            d.set_slew_rate(MAX_SLEW_PPB + 1),
            Err(Error::SlewRate {
                ppb: MAX_SLEW_PPB + 1
            })
        );
    }

    /// `adjtime` returns exactly what had not run, and the remainder it
    /// leaves counts the slew already run (or scheduled) against the new
    /// request.
    #[test]
    fn adjtime_returns_what_has_not_run() {
        let mut d = Discipline::new(nominal_scale(1_000_000_000), 1_000_000);
        assert_eq!(d.adjtime(1_000, 0), 0);
        let ran = BinTime::from_nanos(400).as_units();
        assert_eq!(d.adjtime(-5, ran), 600);
        assert_eq!(d.slew_remaining - ran, BinTime::from_nanos(-5).as_units());
        assert_eq!(d.adjtime(0, ran), -5);
    }
}
