//! The state word: which slot holds the current hands, its ticket, whether a
//! candidate is pending, and whether the timekeeper is retired.
//!
//! Tickets grow by one per published hands and wrap from `MAX_TICKET` to 1
//! (2^54 windups on 64-bit targets, 2^22 on 32-bit ones, where a reader would
//! have to stall across a multiple of that many windups to be fooled); a slot
//! holds ticket 0 while it is being written. `MAX_HANDS` is a power of two: a
//! slot index masked from the state is in range without a bounds check.

/// The largest ring.
pub const MAX_HANDS: usize = 16;

const SLOT_MASK: usize = MAX_HANDS - 1;
const _: () = assert!(MAX_HANDS.is_power_of_two() && MAX_HANDS <= PENDING);
pub(super) const PENDING: usize = 1 << 8;
pub(super) const RETIRED: usize = 1 << 9;
pub(super) const TICKET_SHIFT: u32 = 10;
const MAX_TICKET: usize = usize::MAX >> TICKET_SHIFT;

/// The ticket of the current hands.
pub(super) fn ticket(state: usize) -> usize {
    state >> TICKET_SHIFT
}

/// The slot that holds the current hands.
pub(super) fn slot_index(state: usize) -> usize {
    state & SLOT_MASK
}

/// The ticket after `ticket`.
pub(super) fn next_ticket(ticket: usize) -> usize {
    if ticket == MAX_TICKET { 1 } else { ticket + 1 }
}

/// The ticket before `ticket`: that of the hands the ring holds in the
/// slot before the current one.
pub(super) fn prev_ticket(ticket: usize) -> usize {
    if ticket == 1 { MAX_TICKET } else { ticket - 1 }
}

/// The longest windup interval, in counts, for a counter of `mask`: an eighth
/// of its range (so that a late windup is told from a read behind the base),
/// and a quarter of `usize::MAX` (so that a switch or retire point, a promise
/// and a lead ahead of a fresh base, fits the pending switch point on 32-bit
/// targets).
pub(crate) fn max_interval(mask: u64) -> u64 {
    (mask / 8).min(usize::MAX as u64 / 4)
}
