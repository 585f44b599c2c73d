//! The PPS filter's robust start: the pulses since its line began, taken or
//! not, and the line through most of them.
//!
//! The gate needs a line to hold pulses to, and a line needs two pulses: an
//! outlier among the first two is the line's, and the gate then rejects the
//! good pulses after it. So while they are few, whenever the gate keeps
//! one out, all of them and all but one are tried, and the filter follows
//! the most that lie on a line. Of as many, those whose others are all
//! late of their line (an interrupt or a receiver delays an edge, never
//! advances it) are preferred, then the filter's own: with three pulses
//! one of which is 20 µs late, a late middle one is found at once, while a
//! late first one and a late third one look alike (either way, two lie on
//! a line the other is late of) until the fourth. (Two outliers among a
//! line's first ten pulses are left to the gate: trying all but two costs
//! five times as much, in an interrupt handler.)

use super::pulse::{Pulse, collinear};

/// Pulses kept from a line's start: the robust start lasts this many.
pub(super) const START_PULSES: usize = 10;

/// The pulses since the filter's line began (the oldest first), while
/// fewer than [`START_PULSES`], and which of them it took.
#[derive(Clone, Copy, Debug)]
pub(super) struct Start {
    pulses: [Pulse; START_PULSES],
    len: usize,
    /// The pulses the filter took, a bit each by index.
    pub(super) taken: u16,
}

/// How well a line fits the start's pulses: how many lie on it, and
/// whether all the others are late of it. Compared in that order.
type Fit = (u32, bool);

impl Start {
    /// A start of the pulses `taken`, all taken (the oldest first; at most
    /// [`START_PULSES`]).
    pub(super) fn new(taken: &[Pulse]) -> Start {
        let mut start = Start {
            pulses: [taken[0]; START_PULSES],
            len: taken.len(),
            taken: (1 << taken.len()) - 1,
        };
        start.pulses[..taken.len()].copy_from_slice(taken);
        start
    }

    /// Whether the start is over: as many pulses as it keeps.
    pub(super) fn is_over(&self) -> bool {
        self.len == START_PULSES
    }

    /// Adds the newest pulse, taken by the filter or not.
    pub(super) fn push(&mut self, pulse: Pulse, taken: bool) {
        self.pulses[self.len] = pulse;
        self.taken |= (taken as u16) << self.len;
        self.len += 1;
    }

    /// How many of the pulses `mask` leaves out.
    pub(super) fn kept_out(&self, mask: u16) -> u32 {
        (((1 << self.len) - 1) & !mask).count_ones()
    }

    /// The pulses of `mask`, the oldest first, and how many.
    pub(super) fn pulses_of(&self, mask: u16) -> ([Pulse; START_PULSES], usize) {
        let mut out = self.pulses;
        let mut len = 0;
        for (i, pulse) in self.pulses[..self.len].iter().enumerate() {
            if mask & 1 << i != 0 {
                out[len] = *pulse;
                len += 1;
            }
        }
        (out, len)
    }

    /// The pulses that fit better than what the filter took (jitter
    /// variance `r`), as a mask; `None` when none do. The candidates are
    /// all the pulses and all but one, where they lie on a line, every
    /// three of them in a row within the gate (a pulse off the line bends
    /// the three around it by as much as it is off).
    pub(super) fn better(&self, r: i128) -> Option<u16> {
        let all: u16 = (1 << self.len) - 1;
        if self.taken == all {
            // All taken, none late: nothing fits better.
            return None;
        }
        let mut best = (self.fit(self.taken), self.taken);
        // The pulse left out, `len` standing for none.
        for out in 0..=self.len {
            let mask = all & !(1 << out);
            if mask.count_ones() < 2 || !self.on_a_line(mask, r) {
                continue;
            }
            let fit = self.fit(mask);
            if fit > best.0 {
                best = (fit, mask);
            }
        }
        (best.1 != self.taken).then_some(best.1)
    }

    /// Whether the pulses of `mask` lie on a line: every three in a row.
    fn on_a_line(&self, mask: u16, r: i128) -> bool {
        let (pulses, len) = self.pulses_of(mask);
        pulses[..len]
            .windows(3)
            .all(|three| collinear([three[0], three[1], three[2]], r))
    }

    /// How well the pulses of `mask` fit: how many, and whether the others
    /// are late of the line through its first and last.
    fn fit(&self, mask: u16) -> Fit {
        let (pulses, len) = self.pulses_of(mask);
        let (a, b) = (pulses[0], pulses[len - 1]);
        let late = (0..self.len)
            .filter(|k| mask & 1 << k == 0)
            .all(|k| late_of(a, b, self.pulses[k]));
        (mask.count_ones(), late)
    }
}

/// Whether pulse `c` lies later than the line through `a` and `b` (`a` the
/// older) says: its residual times their spacing, positive.
fn late_of(a: Pulse, b: Pulse, c: Pulse) -> bool {
    let (ab, ac) = ((b.second - a.second) as i128, (c.second - a.second) as i128);
    (c.phase - a.phase) * ab - (b.phase - a.phase) * ac > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kalman::ONE;

    /// Pulses a second apart on a line 100 ppm steep, those of `late` 20 µs
    /// late.
    fn pulses(late: usize) -> [Pulse; START_PULSES] {
        core::array::from_fn(|i| Pulse {
            count: 0,
            second: i as i64,
            phase: (100_000 * i as i128 + if i == late { 20_000 } else { 0 }) * ONE,
        })
    }

    /// A start of the first `n` of `pulses`, the filter having taken the
    /// first two and kept the others out.
    fn start(pulses: [Pulse; START_PULSES], n: usize) -> Start {
        let mut start = Start::new(&pulses[..2]);
        for pulse in &pulses[2..n] {
            start.push(*pulse, false);
        }
        start
    }

    /// At 1 µs of jitter: a late middle pulse is found out at the third; a
    /// late first one and a late third one look alike there (the filter's
    /// line is kept), and the fourth tells them apart.
    #[test]
    fn the_pulses_on_a_line_are_found_whichever_is_late() {
        let r = 1_000_000 * ONE;
        assert_eq!(start(pulses(1), 3).better(r), Some(0b101));
        assert_eq!(start(pulses(0), 3).better(r), None);
        assert_eq!(start(pulses(2), 3).better(r), None);
        assert_eq!(start(pulses(0), 4).better(r), Some(0b1110));
        assert_eq!(start(pulses(2), 4).better(r), Some(0b1011));
    }
}
