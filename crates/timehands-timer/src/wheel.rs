//! `Wheel`: the soft timers, a hierarchical timing wheel.
//!
//! Soft timers are many (timeouts, retries, leases) and may fire anywhere in
//! `[deadline, deadline + slack]`, so they are kept the cheap way: time is cut
//! into ticks of 2^`tick_shift` ns, and a timer due at tick `t` goes into one
//! of 64 slots on one of eleven levels. Level `L` holds the timers due within
//! the current block of 64^(L+1) ticks but not within the current block of
//! 64^L ticks; its slot is the timer's base-64 digit `L`. Eleven levels of six
//! bits cover the whole 64-bit tick range, so no timer is ever too far away.
//!
//! - Insert and cancel are O(1): a slot is a circular doubly-linked list
//!   threaded through the entries (each list has a sentinel entry, so an
//!   entry unlinks itself without knowing which list it is in), and each
//!   level has a 64-bit occupancy bitmap, a bit per non-empty slot.
//! - Finding the next slot to expire is a rotate and a count of trailing
//!   zeros per level, lowest level first: every timer on a lower level is due
//!   before any timer on a higher one.
//! - Expiring a slot moves its whole list onto the pending list in O(1);
//!   [`Wheel::poll`] then takes one entry at a time, firing it if it is due
//!   or moving it down to the level it now belongs to (a cascade). Each move
//!   is to a lower level, so a timer moves at most ten times in its life:
//!   the work is O(1) per timer, amortized. A [`Wheel::poll`] that reaches
//!   a slot on a high level moves the whole slot's list down before it
//!   returns; [`Wheel::poll_bounded`] stops after a given number of steps,
//!   so that a caller holding a lock can bound each round.
//! - Coalescing: a timer is filed under the tick in its window
//!   `[deadline, deadline + slack]` with the most trailing zero bits, so
//!   timers with overlapping windows share one tick and fire together, and a
//!   timer on a round tick fires straight from a high level with no cascade.
//!
//! A timer fires at the first poll whose `now` reaches its tick: never before
//! its deadline, and, with polls at least once a tick, no later than
//! `deadline + slack + tick`. The wheel knows no clock: deadlines and `now`
//! are nanoseconds passed in by the caller.
//!
//! ```
//! use timehands_timer::wheel::Wheel;
//!
//! let mut wheel = Wheel::new(10);
//! assert_eq!(wheel.tick_nanos(), 1024);
//! let retry = wheel.insert(50_000, 20_000, "retry");
//! wheel.insert(60_000, 5_000, "lease");
//! assert_eq!(wheel.poll(49_999), None); // nothing fires early
//! assert_eq!(wheel.remove(retry), Some("retry"));
//! assert_eq!(wheel.poll(70_000), Some("lease"));
//! assert!(wheel.is_empty());
//! ```

use crate::arena::{Arena, Key};

/// Names a timer of one [`Wheel`]; stale once the timer fired or was removed
/// (a slot's reuse does not revive it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WheelKey(Key);

const SLOT_BITS: u32 = 6;
const SLOTS: u32 = 1 << SLOT_BITS;
const LEVELS: u32 = 64_u32.div_ceil(SLOT_BITS);
/// The sentinel of the pending list; the sentinels of the slots come first,
/// level by level.
const PENDING: u32 = LEVELS * SLOTS;
/// Arena indices below this are sentinels, never a timer.
const SENTINELS: u32 = PENDING + 1;

struct Node<T> {
    prev: u32,
    next: u32,
    /// The tick the timer is filed under (its coalesced expiry).
    tick: u64,
    /// `None` for a sentinel.
    value: Option<T>,
}

/// A hierarchical timing wheel of values with deadlines and slacks in
/// nanoseconds.
pub struct Wheel<T> {
    nodes: Arena<Node<T>>,
    /// Bit `s` of `occupied[L]` is set exactly when slot `s` of level `L` is
    /// not empty.
    occupied: [u64; LEVELS as usize],
    /// The tick up to which the wheel has been processed: every timer filed
    /// under a tick at or before it is on the pending list.
    elapsed: u64,
    tick_shift: u32,
}

impl<T> Wheel<T> {
    /// An empty wheel with ticks of 2^`tick_shift` ns (at most 2^63 ns),
    /// starting at time zero.
    ///
    /// # Panics
    ///
    /// If `tick_shift` is 64 or more.
    pub fn new(tick_shift: u32) -> Wheel<T> {
        assert!(tick_shift < 64, "a tick of 2^{tick_shift} ns is too long");
        let mut nodes = Arena::new();
        for index in 0..SENTINELS {
            let key = nodes.insert(Node {
                prev: index,
                next: index,
                tick: 0,
                value: None,
            });
            debug_assert_eq!(key.index(), index);
        }
        Wheel {
            nodes,
            occupied: [0; LEVELS as usize],
            elapsed: 0,
            tick_shift,
        }
    }

    /// The length of a tick in nanoseconds.
    pub fn tick_nanos(&self) -> u64 {
        1 << self.tick_shift
    }

    /// Adds `value`, due at `deadline` and allowed to fire up to `slack` ns
    /// later; the key cancels or reschedules it.
    pub fn insert(&mut self, deadline: u64, slack: u64, value: T) -> WheelKey {
        let tick = self.coalesced_tick(deadline, slack);
        let key = self.nodes.insert(Node {
            prev: 0,
            next: 0,
            tick,
            value: Some(value),
        });
        self.file(key.index(), tick);
        WheelKey(key)
    }

    /// Removes the timer `key` names; `None` if it already fired or was
    /// removed.
    pub fn remove(&mut self, WheelKey(key): WheelKey) -> Option<T> {
        self.nodes.get(key)?.value.as_ref()?;
        self.unlink(key.index());
        self.nodes.remove(key)?.value
    }

    /// Moves the timer `key` names to a new deadline and slack; `false` if it
    /// already fired or was removed.
    pub fn reschedule(&mut self, WheelKey(key): WheelKey, deadline: u64, slack: u64) -> bool {
        match self.nodes.get(key) {
            Some(node) if node.value.is_some() => {}
            _ => return false,
        }
        let tick = self.coalesced_tick(deadline, slack);
        self.unlink(key.index());
        self.nodes.at_mut(key.index()).tick = tick;
        self.file(key.index(), tick);
        true
    }

    /// Returns one timer that is due at `now`, or `None` when none is.
    ///
    /// `now` must not go backwards from one call to the next. A call may
    /// first move the timers of a higher-level slot down a level (at most
    /// ten moves per timer in its life, so O(1) amortized);
    /// [`Wheel::poll_bounded`] bounds that work.
    pub fn poll(&mut self, now: u64) -> Option<T> {
        let mut unlimited = usize::MAX;
        self.poll_bounded(now, &mut unlimited)
    }

    /// As [`Wheel::poll`], in at most `budget` steps (firing a timer, or
    /// moving one down a level), counted off `budget`. `None` with `budget`
    /// used up may mean that it stopped before finding out whether a timer
    /// is due: poll again, with a new budget. (If it did stop short,
    /// [`Wheel::next_deadline`] says that the work left is due already.)
    ///
    /// ```
    /// use timehands_timer::wheel::Wheel;
    ///
    /// let mut wheel = Wheel::new(0);
    /// // Due together on a high level: reaching them moves each one down.
    /// for id in 0..100 {
    ///     wheel.insert((1 << 30) + id, 0, id);
    /// }
    /// let (mut fired, mut calls) = (0, 0);
    /// while fired < 100 {
    ///     let mut budget = 8;
    ///     fired += usize::from(wheel.poll_bounded(1 << 31, &mut budget).is_some());
    ///     calls += 1;
    /// }
    /// assert!(wheel.is_empty() && calls > 100);
    /// ```
    pub fn poll_bounded(&mut self, now: u64, budget: &mut usize) -> Option<T> {
        // A deadline in the last, partial tick of the range is filed under a
        // tick that no `now` below u64::MAX reaches; u64::MAX, the end of
        // time, has every timer due.
        let now_tick = if now == u64::MAX {
            u64::MAX
        } else {
            now >> self.tick_shift
        };
        loop {
            let first = self.nodes.at(PENDING).next;
            if first != PENDING {
                if *budget == 0 {
                    return None;
                }
                *budget -= 1;
                let tick = self.nodes.at(first).tick;
                self.unlink(first);
                if tick <= self.elapsed {
                    let key = self.nodes.key_at(first);
                    return self.nodes.remove(key).and_then(|n| n.value);
                }
                // Due later than the slot it came from: down a level.
                self.file(first, tick);
                continue;
            }
            match self.next_slot() {
                Some((list, start)) if start <= now_tick => {
                    self.elapsed = start;
                    self.take_slot(list);
                }
                _ => {
                    self.elapsed = self.elapsed.max(now_tick);
                    return None;
                }
            }
        }
    }

    /// When the wheel next has work: the start of its earliest non-empty
    /// slot (a cascade or an expiry), in nanoseconds; `None` when empty.
    pub fn next_deadline(&self) -> Option<u64> {
        let tick = if self.nodes.at(PENDING).next != PENDING {
            self.elapsed
        } else {
            self.next_slot()?.1
        };
        Some(u64::try_from(u128::from(tick) << self.tick_shift).unwrap_or(u64::MAX))
    }

    /// How many timers are armed.
    pub fn len(&self) -> usize {
        self.nodes.len() - SENTINELS as usize
    }

    /// Whether no timer is armed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tick in `[deadline, deadline + slack]` (rounded inward to whole
    /// ticks) with the most trailing zeros, or the first tick at or after
    /// `deadline` when the window holds no tick boundary.
    fn coalesced_tick(&self, deadline: u64, slack: u64) -> u64 {
        let shift = self.tick_shift;
        let earliest = (deadline >> shift) + u64::from(deadline & ((1 << shift) - 1) != 0);
        let latest = deadline.saturating_add(slack) >> shift;
        if latest <= earliest {
            return earliest;
        }
        // Above their highest differing bit the two agree; the tick with
        // that bit set and all lower bits clear is the roundest one between.
        let top = 63 - (earliest ^ latest).leading_zeros();
        if earliest.trailing_zeros() > top {
            earliest
        } else {
            latest & !((1 << top) - 1)
        }
    }

    /// Puts the unlinked entry `index` on the list its tick belongs to.
    fn file(&mut self, index: u32, tick: u64) {
        let list = if tick <= self.elapsed {
            PENDING
        } else {
            // The highest base-64 digit in which the tick differs from
            // `elapsed` is the level; the tick's digit there is the slot.
            let level =
                (63 - ((self.elapsed ^ tick) | u64::from(SLOTS - 1)).leading_zeros()) / SLOT_BITS;
            let slot = (tick >> (level * SLOT_BITS)) as u32 & (SLOTS - 1);
            self.occupied[level as usize] |= 1 << slot;
            level * SLOTS + slot
        };
        let last = self.nodes.at(list).prev;
        let node = self.nodes.at_mut(index);
        node.prev = last;
        node.next = list;
        self.nodes.at_mut(last).next = index;
        self.nodes.at_mut(list).prev = index;
    }

    fn links(&self, index: u32) -> (u32, u32) {
        let node = self.nodes.at(index);
        (node.prev, node.next)
    }

    /// Takes entry `index` off its list, clearing the slot's occupancy bit
    /// when the list is left empty.
    fn unlink(&mut self, index: u32) {
        let (prev, next) = self.links(index);
        self.nodes.at_mut(prev).next = next;
        self.nodes.at_mut(next).prev = prev;
        // Only a sentinel's list can be left with the sentinel alone.
        if prev == next && prev < PENDING {
            self.occupied[(prev / SLOTS) as usize] &= !(1 << (prev % SLOTS));
        }
    }

    /// The list and start tick of the earliest non-empty slot.
    fn next_slot(&self) -> Option<(u32, u64)> {
        (0..LEVELS).find_map(|level| {
            let occupied = self.occupied[level as usize];
            if occupied == 0 {
                return None;
            }
            let shift = level * SLOT_BITS;
            let now_slot = (self.elapsed >> shift) as u32 & (SLOTS - 1);
            let slot = (occupied.rotate_right(now_slot).trailing_zeros() + now_slot) & (SLOTS - 1);
            // Every timer on this level is later in the current block of the
            // level than `elapsed`, so its slot never wraps behind.
            debug_assert!(slot > now_slot);
            let block = self
                .elapsed
                .checked_shr(shift + SLOT_BITS)
                .and_then(|b| b.checked_shl(shift + SLOT_BITS))
                .unwrap_or(0);
            Some((level * SLOTS + slot, block + (u64::from(slot) << shift)))
        })
    }

    /// Moves the whole list of `slot` onto the (empty) pending list.
    fn take_slot(&mut self, slot: u32) {
        let (prev, next) = self.links(slot);
        self.nodes.at_mut(PENDING).next = next;
        self.nodes.at_mut(PENDING).prev = prev;
        self.nodes.at_mut(next).prev = PENDING;
        self.nodes.at_mut(prev).next = PENDING;
        let sentinel = self.nodes.at_mut(slot);
        sentinel.next = slot;
        sentinel.prev = slot;
        self.occupied[(slot / SLOTS) as usize] &= !(1 << (slot % SLOTS));
    }
}
