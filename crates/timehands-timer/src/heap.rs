//! `DeadlineHeap`: the hard timers, a binary min-heap keyed by deadline.
//!
//! Hard timers are few and must fire at their deadline, not near it, so they
//! are kept exactly ordered: the earliest is always at the root, one look
//! away from the expiry thread. Each entry remembers its position in the heap
//! so that cancel and reschedule are O(log n) by key instead of a search.
//! Equal deadlines fire in the order they were armed (a sequence number breaks
//! the tie), so the structure is deterministic.
//!
//! The heap knows no clock: deadlines and `now` are plain nanoseconds passed
//! in by the caller, which is what lets the tests drive time by hand.
//!
//! ```
//! use timehands_timer::heap::DeadlineHeap;
//!
//! let mut heap = DeadlineHeap::new();
//! let late = heap.push(300, "late");
//! heap.push(100, "early");
//! assert_eq!(heap.peek(), Some(100));
//! assert_eq!(heap.pop_expired(99), None); // nothing is due before 100
//! assert_eq!(heap.pop_expired(250), Some((100, "early")));
//! assert!(heap.reschedule(late, 200));
//! assert_eq!(heap.deadline(late), Some(200));
//! assert_eq!(heap.pop_expired(250), Some((200, "late")));
//! assert_eq!(heap.deadline(late), None); // fired
//! assert!(heap.is_empty());
//! ```

use crate::arena::{Arena, Key};

/// Names an entry of one [`DeadlineHeap`]; stale once the entry fired or was
/// removed (a slot's reuse does not revive it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeapKey(Key);

impl HeapKey {
    /// The key in one word, for an atomic.
    pub(crate) fn to_bits(self) -> u64 {
        self.0.to_bits()
    }

    /// The key whose [`to_bits`](HeapKey::to_bits) gave `bits`.
    pub(crate) fn from_bits(bits: u64) -> HeapKey {
        HeapKey(Key::from_bits(bits))
    }
}

struct Entry<T> {
    deadline: u64,
    seq: u64,
    /// Where this entry sits in `DeadlineHeap::order`; kept current by every
    /// move so that removal by key needs no search.
    pos: usize,
    value: T,
}

/// A min-heap of values keyed by deadline (nanoseconds), with removal and
/// rescheduling by key.
pub struct DeadlineHeap<T> {
    entries: Arena<Entry<T>>,
    /// Arena indices in heap order: `order[0]` has the earliest deadline.
    order: Vec<u32>,
    next_seq: u64,
}

impl<T> Default for DeadlineHeap<T> {
    fn default() -> Self {
        DeadlineHeap::new()
    }
}

impl<T> DeadlineHeap<T> {
    /// An empty heap.
    pub fn new() -> DeadlineHeap<T> {
        DeadlineHeap {
            entries: Arena::new(),
            order: Vec::new(),
            next_seq: 0,
        }
    }

    /// Adds `value` due at `deadline`; the key cancels or reschedules it.
    pub fn push(&mut self, deadline: u64, value: T) -> HeapKey {
        let pos = self.order.len();
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = self.entries.insert(Entry {
            deadline,
            seq,
            pos,
            value,
        });
        self.order.push(key.index());
        self.sift_up(pos);
        HeapKey(key)
    }

    /// Removes the entry `key` names; `None` if it already fired or was
    /// removed.
    pub fn remove(&mut self, HeapKey(key): HeapKey) -> Option<T> {
        let pos = self.entries.get(key)?.pos;
        self.take_at(pos);
        self.entries.remove(key).map(|e| e.value)
    }

    /// Moves the entry `key` names to `deadline`; `false` if it already fired
    /// or was removed.
    pub fn reschedule(&mut self, HeapKey(key): HeapKey, deadline: u64) -> bool {
        let Some(entry) = self.entries.get_mut(key) else {
            return false;
        };
        entry.deadline = deadline;
        let pos = entry.pos;
        self.restore(pos);
        true
    }

    /// The deadline of `key`'s entry, if it is still armed.
    pub fn deadline(&self, HeapKey(key): HeapKey) -> Option<u64> {
        self.entries.get(key).map(|e| e.deadline)
    }

    /// The earliest deadline.
    pub fn peek(&self) -> Option<u64> {
        self.order.first().map(|&i| self.entries.at(i).deadline)
    }

    /// Removes and returns the earliest entry if it is due at `now`.
    pub fn pop_expired(&mut self, now: u64) -> Option<(u64, T)> {
        let first = *self.order.first()?;
        if self.entries.at(first).deadline > now {
            return None;
        }
        let key = self.entries.key_at(first);
        self.take_at(0);
        self.entries.remove(key).map(|e| (e.deadline, e.value))
    }

    /// How many entries are armed.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no entry is armed.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Takes the entry at `pos` out of the order (not out of the arena),
    /// filling the hole with the last entry and restoring the heap property.
    fn take_at(&mut self, pos: usize) {
        let last = self.order.len() - 1;
        self.swap(pos, last);
        self.order.pop();
        if pos < self.order.len() {
            self.restore(pos);
        }
    }

    /// Moves the entry at `pos` up or down to where its deadline belongs.
    fn restore(&mut self, pos: usize) {
        if pos > 0 && self.less(pos, (pos - 1) / 2) {
            self.sift_up(pos);
        } else {
            self.sift_down(pos);
        }
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if !self.less(pos, parent) {
                break;
            }
            self.swap(pos, parent);
            pos = parent;
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        loop {
            let left = 2 * pos + 1;
            if left >= self.order.len() {
                break;
            }
            let right = left + 1;
            let child = if right < self.order.len() && self.less(right, left) {
                right
            } else {
                left
            };
            if !self.less(child, pos) {
                break;
            }
            self.swap(pos, child);
            pos = child;
        }
    }

    fn less(&self, a: usize, b: usize) -> bool {
        let a = self.entries.at(self.order[a]);
        let b = self.entries.at(self.order[b]);
        (a.deadline, a.seq) < (b.deadline, b.seq)
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.order.swap(a, b);
        let (ia, ib) = (self.order[a], self.order[b]);
        self.entries.at_mut(ia).pos = a;
        self.entries.at_mut(ib).pos = b;
    }
}
