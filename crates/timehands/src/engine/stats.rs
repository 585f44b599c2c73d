//! What only writers touch: the rate state, and the counts of what they
//! did.

use super::discipline::Discipline;

/// Counts of what the writer has done, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Hands published (windups and realtime steps).
    pub windups: u64,
    /// Published hands that changed the rate at their switch point.
    pub rate_changes: u64,
    /// Rate-change candidates abandoned because a reader's counter had passed
    /// their switch point before they were published (the writer was too slow:
    /// preempted, most likely).
    pub cancelled: u64,
}

/// What only writers touch: the rate state and the counts for [`Stats`].
pub(super) struct WriterState {
    pub(super) discipline: Discipline,
    pub(super) stats: Stats,
}
