//! `Wheel`: the soft timers, a hierarchical timing wheel.
//!
//! Soft timers are many (timeouts, retries, leases) and may fire anywhere in
//! `[deadline, deadline + slack]`, so they are kept the cheap way: time is cut
//! into ticks of 2^`tick_shift` ns, and a timer due at tick `t` goes into a
//! slot on one of eleven levels. A slot of level `L` spans 64^L ticks, and a
//! block of the level is 64 of its slots (one slot of level `L + 1`). Each
//! level has 128 slots, a ring for two blocks: the current one (where the
//! elapsed tick is) and the next. A timer is on the lowest level whose two
//! blocks hold its tick, in the slot of its tick's bits `6L..6L + 7`. Eleven
//! levels cover the whole 64-bit tick range, so no timer is ever too far
//! away.
//!
//! - Insert and cancel are O(1): a slot is a circular doubly-linked list
//!   threaded through the entries (each list has a sentinel entry, so an
//!   entry unlinks itself without knowing which list it is in), and each
//!   level has a 128-bit occupancy bitmap, a bit per non-empty slot.
//! - Finding the next slot to expire is a rotate and a count of trailing
//!   zeros per level, the earliest start of the levels' first slots.
//! - Expiring a slot moves its whole list onto the pending list in O(1);
//!   [`Wheel::poll`] then takes one entry at a time, firing it if it is due
//!   or moving it down to the level it now belongs to (a cascade). Each move
//!   is to a lower level, so a timer moves at most ten times in its life:
//!   the work is O(1) per timer, amortized.
//! - Cascading ahead: when the elapsed tick enters a new block of level
//!   `L - 1`, the slot of level `L` after the elapsed tick's (which spans
//!   the next block of level `L - 1`) comes within level `L - 1`'s two
//!   blocks, and its timers may move down a whole block before any of them
//!   is due. A poll that finds nothing
//!   due spends what is left of its budget on those moves, so the moves of a
//!   slot of 64^L ticks are spread over the polls of the block before it
//!   rather than made in a burst in front of the timers due when it starts.
//!   Only a wheel polled too seldom for that (a whole block without spare
//!   steps) expires the slot as it starts, moving it down then.
//!   [`Wheel::poll_bounded`] stops after a given number of steps, so that a
//!   caller holding a lock can bound each round; timers that are due come
//!   before any move ahead.
//! - Coalescing: a timer is filed under the tick in the first half of its
//!   window, `[deadline, deadline + slack / 2]`, with the most trailing zero
//!   bits (or under the first tick after its deadline, when that half holds
//!   no tick boundary), so timers with overlapping windows share one tick
//!   and fire together. The second half is left for running what
//!   coalescing gathers: a timer filed under a round tick is due at most
//!   half a slack before it, so it may start up to half a slack after it
//!   and still be within its window. (Filed anywhere in the window, a timer
//!   may land at its very end, and a tick that gathers several slacks'
//!   worth of timers leaves the last ones none: with 2-4 ms of slack and
//!   5 µs callbacks, 5-6 % of 100 000 periodic timers came out late, against
//!   0-0.16 % filed in the first half.)
//!
//! A timer fires at the first poll whose `now` reaches its tick: never before
//! its deadline, and, polled at each tick that has timers (at
//! [`Wheel::next_deadline`], as the timer service's workers are), by
//! `deadline + max(slack / 2, tick - 1)`. The wheel knows no clock:
//! deadlines and `now` are nanoseconds passed in by the caller.
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

impl WheelKey {
    /// The key in one word, for an atomic.
    pub(crate) fn to_bits(self) -> u64 {
        self.0.to_bits()
    }

    /// The key whose [`to_bits`](WheelKey::to_bits) gave `bits`.
    pub(crate) fn from_bits(bits: u64) -> WheelKey {
        WheelKey(Key::from_bits(bits))
    }
}

const SLOT_BITS: u32 = 6;
/// Slots of a level in one of its blocks (a slot of the level above).
const BLOCK: u32 = 1 << SLOT_BITS;
/// Slots of a level: its current block and the next.
const SLOTS: u32 = 2 * BLOCK;
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
    occupied: [u128; LEVELS as usize],
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
    /// first move the timers of a higher-level slot down a level, and one
    /// that finds nothing due moves down the timers that may go ahead (at
    /// most ten moves per timer in its life, so O(1) amortized);
    /// [`Wheel::poll_bounded`] bounds that work.
    pub fn poll(&mut self, now: u64) -> Option<T> {
        let mut unlimited = usize::MAX;
        self.poll_bounded(now, &mut unlimited)
    }

    /// As [`Wheel::poll`], in at most `budget` steps (firing a timer, or
    /// moving one down a level), counted off `budget`. A timer due at `now`
    /// is returned before any step is spent on moving timers ahead. `None`
    /// with `budget` used up may mean that it stopped before finding out
    /// whether a timer is due: poll again, with a new budget. (If it did stop
    /// short, [`Wheel::next_deadline`] says that the work left is due
    /// already.)
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
                    debug_assert!(start >= self.elapsed);
                    self.elapsed = start;
                    self.take_slot(list);
                }
                _ => {
                    self.elapsed = self.elapsed.max(now_tick);
                    self.cascade_ahead(budget);
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

    /// The tick in `[deadline, deadline + slack / 2]` (rounded inward to
    /// whole ticks) with the most trailing zeros, or the first tick at or
    /// after `deadline` when that holds no tick boundary.
    fn coalesced_tick(&self, deadline: u64, slack: u64) -> u64 {
        let shift = self.tick_shift;
        let earliest = (deadline >> shift) + u64::from(deadline & ((1 << shift) - 1) != 0);
        let latest = deadline.saturating_add(slack / 2) >> shift;
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
            let level = self.level_of(tick);
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

    /// The lowest level whose two blocks hold `tick`, which is after
    /// `elapsed`.
    fn level_of(&self, tick: u64) -> u32 {
        // Above their highest differing base-64 digit the two agree: the
        // current block of that digit's level holds the tick.
        let mut level =
            (63 - ((self.elapsed ^ tick) | u64::from(BLOCK - 1)).leading_zeros()) / SLOT_BITS;
        // The blocks of the level below are this level's slots: its two
        // blocks hold the tick when the tick's slot here is the elapsed
        // tick's or the next. Once they do not, no lower level's do.
        while level > 0
            && (tick >> (level * SLOT_BITS)) - (self.elapsed >> (level * SLOT_BITS)) <= 1
        {
            level -= 1;
        }
        level
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

    /// The list and start tick of the earliest non-empty slot (of the
    /// lowest level, if two start together).
    fn next_slot(&self) -> Option<(u32, u64)> {
        let mut next: Option<(u32, u64)> = None;
        for level in 0..LEVELS {
            let occupied = self.occupied[level as usize];
            if occupied == 0 {
                continue;
            }
            let shift = level * SLOT_BITS;
            // Every slot of a level that has timers is the elapsed tick's
            // (one about to expire with a slot of a level below that starts
            // with it) or one of the 127 after it, so none wraps behind.
            let elapsed_unit = self.elapsed >> shift;
            let ahead = occupied
                .rotate_right(elapsed_unit as u32 & (SLOTS - 1))
                .trailing_zeros();
            let start = (elapsed_unit + u64::from(ahead)) << shift;
            if next.is_none_or(|(_, earliest)| start < earliest) {
                let slot = (elapsed_unit as u32).wrapping_add(ahead) & (SLOTS - 1);
                next = Some((level * SLOTS + slot, start));
            }
        }
        next
    }

    /// Spends what is left of `budget` moving timers down ahead of time:
    /// those of the slot after the elapsed tick's on each level above 0,
    /// which the next block of the level below holds, lowest level first.
    fn cascade_ahead(&mut self, budget: &mut usize) {
        while *budget > 0 {
            let ready = (1..LEVELS).find_map(|level| {
                let shift = level * SLOT_BITS;
                let slot = ((self.elapsed >> shift) as u32).wrapping_add(1) & (SLOTS - 1);
                (self.occupied[level as usize] & (1 << slot) != 0).then_some(level * SLOTS + slot)
            });
            let Some(slot) = ready else {
                return;
            };
            // Each timer goes to a lower level: the slot only empties.
            loop {
                let first = self.nodes.at(slot).next;
                if first == slot || *budget == 0 {
                    break;
                }
                *budget -= 1;
                let tick = self.nodes.at(first).tick;
                self.unlink(first);
                self.file(first, tick);
            }
        }
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
