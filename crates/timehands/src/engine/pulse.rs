//! A pulse as the PPS filter counts it, and the test of a line through
//! three of them: what the filter (`pps.rs`) and its robust start
//! (`start.rs`) share.

use super::kalman::ONE;

/// Innovations beyond this many standard deviations are outliers.
pub(super) const GATE: i128 = 5;

/// A pulse as the filter counts it: its counter value, the second it marks
/// (from the first pulse), and the oscillator's raw phase there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pulse {
    pub(super) count: u64,
    pub(super) second: i64,
    pub(super) phase: i128,
}

/// Whether three pulses in time order lie on a line within the gate: the
/// bend of their slopes `(c − b)·ab − (b − a)·bc` against its deviation, for
/// jitter variance `r` (variance `r·(ab² + (ab + bc)² + bc²)`; at a second
/// apart, the second difference's `6r`).
pub(super) fn collinear([a, b, c]: [Pulse; 3], r: i128) -> bool {
    let (ab, bc) = ((b.second - a.second) as i128, (c.second - b.second) as i128);
    let bend = (c.phase - b.phase) * ab - (b.phase - a.phase) * bc;
    let spacing = ab * ab + (ab + bc) * (ab + bc) + bc * bc;
    // Saturating: an outlier of a good part of a second squares beyond an
    // `i128`, and is then off any line, as it should be. (No division: it
    // runs in interrupt handlers of cores without one for an `i128`.)
    bend.saturating_mul(bend)
        <= (GATE * GATE)
            .saturating_mul(r)
            .saturating_mul(spacing)
            .saturating_mul(ONE)
}
