//! `Queue`: what a side asks of its queue of expiries, the hard side's
//! deadline heap and the soft side's timing wheel alike.

use super::Queued;
use crate::heap::{DeadlineHeap, HeapKey};
use crate::wheel::{Wheel, WheelKey};

/// A side's queue of expiries: the data structure alone (it knows no
/// clock and no lock).
pub(crate) trait Queue {
    /// How long after its deadline and slack an expiry still comes out
    /// within the side's bound: one soft tick; `None` on the hard side,
    /// which promises no bound.
    fn grace(&self) -> Option<u64>;
    /// Queues `expiry` for `deadline`, to come out within `slack` after
    /// it; the bits of its key.
    fn enqueue(&mut self, deadline: u64, slack: u64, expiry: Queued) -> u64;
    /// Takes the expiry whose key has `bits` out, if it is still queued.
    fn dequeue(&mut self, bits: u64);
    /// One expiry due at `now`, in at most `budget` steps, counted off it.
    fn pop_due(&mut self, now: u64, budget: &mut usize) -> Option<Queued>;
    /// When the queue next has work, `None` if it is empty.
    fn next_work(&self) -> Option<u64>;
    /// How many expiries are queued.
    fn count(&self) -> usize;
}

impl Queue for DeadlineHeap<Queued> {
    fn grace(&self) -> Option<u64> {
        None
    }
    fn enqueue(&mut self, deadline: u64, _slack: u64, expiry: Queued) -> u64 {
        self.push(deadline, expiry).to_bits()
    }
    fn dequeue(&mut self, bits: u64) {
        self.remove(HeapKey::from_bits(bits));
    }
    fn pop_due(&mut self, now: u64, budget: &mut usize) -> Option<Queued> {
        *budget = budget.checked_sub(1)?;
        self.pop_expired(now).map(|(_, expiry)| expiry)
    }
    fn next_work(&self) -> Option<u64> {
        self.peek()
    }
    fn count(&self) -> usize {
        self.len()
    }
}

impl Queue for Wheel<Queued> {
    fn grace(&self) -> Option<u64> {
        Some(self.tick_nanos())
    }
    fn enqueue(&mut self, deadline: u64, slack: u64, expiry: Queued) -> u64 {
        self.insert(deadline, slack, expiry).to_bits()
    }
    fn dequeue(&mut self, bits: u64) {
        self.remove(WheelKey::from_bits(bits));
    }
    fn pop_due(&mut self, now: u64, budget: &mut usize) -> Option<Queued> {
        self.poll_bounded(now, budget)
    }
    fn next_work(&self) -> Option<u64> {
        self.next_deadline()
    }
    fn count(&self) -> usize {
        self.len()
    }
}
