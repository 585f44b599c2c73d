//! `Arena`: a slab of entries named by generational keys.
//!
//! The heap, the wheel and the service's registry keep their entries here so
//! that a key handed to a user stays cheap to follow (an index) and safe to
//! keep after its entry is gone: every slot carries a generation that is
//! bumped when the slot is freed, so a stale key finds a different generation
//! and is refused instead of reaching the slot's next occupant. A slot whose
//! generation has run through all 2^32 values is retired rather than reused:
//! a freed slot is reused first, so one busy slot can see 2^32 timers in an
//! hour, and a wrapped generation would let a key kept that long cancel a
//! stranger's timer.

/// A generational key into an [`Arena`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    index: u32,
    generation: u32,
}

impl Key {
    /// The slot this key names, for structures that link entries by index.
    pub(crate) fn index(self) -> u32 {
        self.index
    }

    /// The key in one word, for an atomic.
    pub(crate) fn to_bits(self) -> u64 {
        u64::from(self.generation) << 32 | u64::from(self.index)
    }

    /// The key whose [`to_bits`](Key::to_bits) gave `bits`.
    pub(crate) fn from_bits(bits: u64) -> Key {
        Key {
            index: bits as u32,
            generation: (bits >> 32) as u32,
        }
    }
}

struct Slot<T> {
    generation: u32,
    item: Option<T>,
}

/// A slab of `T`s with O(1) insert and remove and generation-checked access.
pub(crate) struct Arena<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Arena<T> {
    pub(crate) fn new() -> Arena<T> {
        Arena {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Stores `item` and returns its key.
    pub(crate) fn insert(&mut self, item: T) -> Key {
        self.insert_with(|_| item)
    }

    /// Stores the item `make` builds from the key it will have (for an item
    /// that must know its own key), and returns the key.
    ///
    /// # Panics
    ///
    /// With more than `u32::MAX` entries at once, which no machine holds.
    pub(crate) fn insert_with(&mut self, make: impl FnOnce(Key) -> T) -> Key {
        let key = match self.free.last() {
            Some(&index) => Key {
                index,
                generation: self.slots[index as usize].generation,
            },
            None => Key {
                index: u32::try_from(self.slots.len()).expect("fewer than 2^32 entries"),
                generation: 0,
            },
        };
        let item = Some(make(key));
        if self.free.pop().is_some() {
            self.slots[key.index as usize].item = item;
        } else {
            self.slots.push(Slot {
                generation: 0,
                item,
            });
        }
        self.len += 1;
        key
    }

    /// Removes and returns the entry `key` names, if it is still there.
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        let item = slot.item.take()?;
        // A new generation makes every outstanding copy of `key` stale; a
        // wrapped one would not, so that slot is never used again.
        slot.generation = slot.generation.wrapping_add(1);
        if slot.generation != 0 {
            self.free.push(key.index);
        }
        self.len -= 1;
        Some(item)
    }

    pub(crate) fn get(&self, key: Key) -> Option<&T> {
        let slot = self.slots.get(key.index as usize)?;
        (slot.generation == key.generation)
            .then_some(slot.item.as_ref())
            .flatten()
    }

    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        (slot.generation == key.generation)
            .then_some(slot.item.as_mut())
            .flatten()
    }

    /// The live entry in slot `index`; for links between entries, which are
    /// kept consistent by their structure and so need no generation.
    ///
    /// # Panics
    ///
    /// If the slot is empty: a broken link is a bug in the structure.
    pub(crate) fn at(&self, index: u32) -> &T {
        self.slots[index as usize]
            .item
            .as_ref()
            .expect("a link points at a live entry")
    }

    /// As [`Arena::at`], mutably.
    pub(crate) fn at_mut(&mut self, index: u32) -> &mut T {
        self.slots[index as usize]
            .item
            .as_mut()
            .expect("a link points at a live entry")
    }

    /// The key of the live entry in slot `index`.
    pub(crate) fn key_at(&self, index: u32) -> Key {
        Key {
            index,
            generation: self.slots[index as usize].generation,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stale` names a freed entry and reaches nothing; `live` reaches its
    /// entry, `value`.
    fn assert_stale_refused(arena: &mut Arena<&str>, stale: Key, live: Key, value: &str) {
        assert_eq!(arena.get(stale), None);
        assert_eq!(arena.remove(stale), None);
        assert_eq!(arena.get(live), Some(&value));
        assert_eq!(arena.len(), 1);
    }

    #[test]
    fn a_stale_key_is_refused_after_its_slot_is_reused() {
        let mut arena = Arena::new();
        let a = arena.insert("a");
        assert_eq!(arena.remove(a), Some("a"));
        let b = arena.insert("b");
        assert_eq!(a.index(), b.index(), "the slot is reused");
        assert_stale_refused(&mut arena, a, b, "b");
    }

    #[test]
    fn a_slot_whose_generation_wraps_is_retired() {
        let mut arena = Arena::new();
        let old = arena.insert("old");
        arena.slots[0].generation = u32::MAX;
        let last = arena.key_at(0);
        assert_eq!(arena.remove(last), Some("old"));
        let next = arena.insert("next");
        assert_ne!(next.index(), old.index(), "the wrapped slot is not reused");
        assert_stale_refused(&mut arena, old, next, "next");
    }
}
