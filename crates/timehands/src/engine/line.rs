//! The timeline a hands describes: time as a function of the counter, in up
//! to three straight pieces (before the switch point, a slew, after it), and
//! the same as nanosecond segments for the fast read.

use super::bintime::BinTime;
use super::discipline::Slew;
use super::nanos::NanoSegment;

/// The timeline a hands describes: what readers of uptime need, and all
/// they load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Line {
    /// The counter value the writer sampled.
    pub(super) base: u64,
    /// Counts from `base` to the switch point.
    pub(super) switch: u64,
    /// Seconds per count (0.64 fixed point) before the switch point.
    pub(super) scale_before: u64,
    /// Seconds per count for `slew_len` counts after the switch point.
    pub(super) scale_after: u64,
    /// Counts after the switch point that run at `scale_after`: a slew's
    /// plan (at least an interval), or `u64::MAX` when there is no slew
    /// (`settled == scale_after`).
    pub(super) slew_len: u64,
    /// Seconds per count after the slew.
    pub(super) settled: u64,
    /// Uptime at the switch point.
    pub(super) at_switch: BinTime,
}

impl Line {
    /// The slew after the switch point, if there is one.
    pub(super) fn slew(&self) -> Option<Slew> {
        (self.slew_len != u64::MAX).then(|| Slew {
            part: self.scale_after.wrapping_sub(self.settled) as i64,
            len: self.slew_len,
        })
    }

    /// Where the slew ends, in counts from `base`, if there is one.
    pub(super) fn slew_end(&self) -> Option<u64> {
        self.slew().map(|slew| self.switch.saturating_add(slew.len))
    }

    /// Whether the slew runs at `delta` counts from `base` (at or past the
    /// switch point).
    pub(super) fn slewing_at(&self, delta: u64) -> bool {
        self.slew_end().is_some_and(|end| delta < end)
    }

    /// Uptime `delta` counts after `base`: the one conversion routine.
    #[inline]
    pub(super) fn uptime_at(&self, delta: u64) -> BinTime {
        if delta >= self.switch {
            let since = delta - self.switch;
            if since <= self.slew_len {
                self.at_switch
                    .saturating_add(BinTime::from_counts(since, self.scale_after))
            } else {
                self.at_switch
                    .saturating_add(BinTime::from_counts(self.slew_len, self.scale_after))
                    .saturating_add(BinTime::from_counts(since - self.slew_len, self.settled))
            }
        } else {
            let until = BinTime::from_counts(self.switch - delta, self.scale_before);
            self.at_switch.saturating_sub(until)
        }
    }

    /// The line from its base up to a windup due (`interval` counts), as
    /// nanosecond segments on a counter of `mask` where realtime (uptime
    /// plus `boottime_nanos`) fits a `u64` too, the longer first: the two
    /// longest of its [`pieces`](Line::pieces) up to there. Counts in a
    /// third piece (a slew that ends in the interval after one that starts:
    /// never, as a plan lasts an interval) take the exact path. Up to the
    /// due point a read needs no promise check: the promise is at least an
    /// interval long.
    pub(super) fn segments(
        &self,
        interval: u64,
        mask: u64,
        boottime_nanos: i64,
    ) -> [NanoSegment; 2] {
        let [first, second, _] = self.pieces(interval, mask, boottime_nanos);
        [first, second]
    }

    /// The line from its base up to `end` counts, as nanosecond segments
    /// (see [`segments`](Line::segments)), every straight piece of it, the
    /// longest first: before the switch point, the slew, after it; empty
    /// pieces left out and neighbours at the same rate joined.
    pub(super) fn pieces(&self, end: u64, mask: u64, boottime_nanos: i64) -> [NanoSegment; 3] {
        let switch = self.switch.min(end);
        let slew_end = self.slew_end().map_or(end, |slew_end| slew_end.min(end));
        let bounds = [0, switch, slew_end, end];
        let scales = [self.scale_before, self.scale_after, self.settled];
        // The pieces (from, to, scale), with the empty ones left out and
        // neighbours at the same rate joined.
        let mut pieces = [(0, 0, 0); 3];
        let mut count = 0;
        for (i, &scale) in scales.iter().enumerate() {
            let (from, to) = (bounds[i], bounds[i + 1]);
            if from == to {
                continue;
            }
            if count > 0 && pieces[count - 1].2 == scale {
                pieces[count - 1].1 = to;
            } else {
                pieces[count] = (from, to, scale);
                count += 1;
            }
        }
        let pieces = &mut pieces[..count];
        pieces.sort_unstable_by_key(|&(from, to, _)| core::cmp::Reverse(to - from));
        let mut segments = [NanoSegment::NONE; 3];
        for (segment, &(from, to, scale)) in segments.iter_mut().zip(pieces.iter()) {
            let start = self.base.wrapping_add(from) & mask;
            *segment = NanoSegment::new(start, to - from, self.uptime_at(from), scale, mask)
                .offset_fits(boottime_nanos);
        }
        segments
    }
}
