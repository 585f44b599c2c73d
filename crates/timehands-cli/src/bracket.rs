//! How far a clock is from its kernel twin, measured in a bracket.
//!
//! Read the kernel clock, then ours, then the kernel clock again: our reading
//! was taken somewhere between the two kernel readings, so it differs from the
//! kernel's time at that moment by its difference from their midpoint, give or
//! take half the bracket. Of several brackets the narrowest is kept: a wide one
//! was interrupted and says less.

use serde::Serialize;

use crate::clocks::Clock;

/// One bracketed comparison.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Offset {
    /// The kernel clock's bracket midpoint, in ns since its origin.
    pub kernel_ns: u64,
    /// Ours minus the kernel's midpoint, in ns.
    pub offset_ns: i64,
    /// The bracket's width in ns: the offset is exact to within half of it.
    pub bracket_ns: u64,
}

/// The narrowest of `tries` brackets (at least one) `kernel, ours, kernel`.
pub fn offset(ours: Clock, kernel: Clock, tries: usize) -> Offset {
    let mut best: Option<Offset> = None;
    for _ in 0..tries.max(1) {
        let before = kernel.read_ns();
        let reading = ours.read_ns();
        let after = kernel.read_ns();
        // A coarse kernel clock may read the same twice; never less.
        let width = after.saturating_sub(before);
        let midpoint = before + width / 2;
        if best.is_none_or(|b| width < b.bracket_ns) {
            best = Some(Offset {
                kernel_ns: midpoint,
                offset_ns: (i128::from(reading) - i128::from(midpoint)) as i64,
                bracket_ns: width,
            });
        }
    }
    best.expect("at least one bracket")
}
