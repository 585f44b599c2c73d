//! The page as it lies in memory: a header, and a ring of hands each
//! with a seqlock, laid out as `docs/page.md` writes down (a reader in
//! another language maps the same bytes). Every field is a little-endian
//! 64- or 32-bit word, read and written as an atomic: the keeper writes
//! while readers in other processes load.
// Only Linux on x86_64 maps and writes pages; elsewhere the readers' code
// compiles against the layout and never finds one.
#![cfg_attr(
    not(all(target_os = "linux", target_arch = "x86_64")),
    allow(dead_code)
)]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use crate::engine::nanos::NanoSegment;

/// The page's first eight bytes, `timehand` in ASCII.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"timehand");
/// The layout this file describes. A keeper never changes a page's
/// version in place: a new layout is a new file, renamed over the old.
pub(crate) const VERSION: u32 = 2;
/// Hands in the ring.
pub(crate) const SLOTS: usize = 4;
/// The file's size: one page of memory.
pub(crate) const FILE_SIZE: usize = 4096;
/// [`Header::counter`]: the x86_64 time-stamp counter.
pub(crate) const COUNTER_TSC: u32 = 1;
/// [`Header::read`]: the keeper reads the TSC with `rdtscp`.
pub(crate) const READ_RDTSCP: u32 = 1;
/// [`Header::read`]: the keeper reads the TSC with `lfence; rdtsc`.
pub(crate) const READ_LFENCE_RDTSC: u32 = 2;

/// The page's first 64 bytes: what it is, and which slot is newest.
#[repr(C)]
pub(crate) struct Header {
    /// [`MAGIC`].
    pub(crate) magic: AtomicU64,
    /// [`VERSION`].
    pub(crate) version: AtomicU32,
    /// Bytes of the layout ([`size_of::<Page>`]).
    pub(crate) size: AtomicU32,
    /// The counter the segments are on: [`COUNTER_TSC`].
    pub(crate) counter: AtomicU32,
    /// How the keeper reads it ([`READ_RDTSCP`], [`READ_LFENCE_RDTSC`]): a
    /// reader on the same machine may read it so too.
    pub(crate) read: AtomicU32,
    /// Hands in the ring ([`SLOTS`]).
    pub(crate) slots: AtomicU32,
    /// The keeper's process id.
    pub(crate) keeper_pid: AtomicU32,
    /// The kernel's boot id (`/proc/sys/kernel/random/boot_id`, 16 bytes):
    /// a page of another boot is not this boot's time.
    pub(crate) boot_id: [AtomicU64; 2],
    /// The index of the slot that holds the newest hands.
    pub(crate) newest: AtomicU64,
    reserved: AtomicU64,
}

/// One hands of the keeper's clock, with the sequence that makes a copy of
/// it consistent. The sequence, the segment most reads use and Realtime's
/// offset fill the first cache line, as in the engine's slots: all that a
/// read of `now()` loads.
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// Odd while the keeper writes the slot, 0 before it ever did.
    pub(crate) sequence: AtomicU64,
    /// The longest segment of the hands: CLOCK_MONOTONIC in ns as a
    /// function of the counter.
    pub(crate) first: SegmentWords,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    pub(crate) realtime: AtomicU64,
    /// The other segments, up to the hands' promise (a rate change splits
    /// the line in up to three), unused ones of length 0.
    pub(crate) others: [SegmentWords; 2],
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC, ns.
    pub(crate) boottime: AtomicU64,
    /// TAI − CLOCK_MONOTONIC, ns.
    pub(crate) tai: AtomicU64,
    /// Monotonic where the segments end, ns: no read of this hands is
    /// later.
    pub(crate) end_ns: AtomicU64,
    /// The keeper's error bound against CLOCK_MONOTONIC at `bound_since`,
    /// ns.
    pub(crate) bound_ns: AtomicU64,
    /// How fast that bound grows, parts per billion.
    pub(crate) bound_ppb: AtomicU64,
    /// Monotonic when the bound was `bound_ns`, ns.
    pub(crate) bound_since: AtomicU64,
    /// The bound on Realtime's offset as the keeper measured it, ns.
    pub(crate) realtime_uncertainty: AtomicU64,
    /// The leap second the kernel announced: 0 none, 1 one to insert, 2
    /// one to delete, 3 one being inserted (`LeapSecond::code`).
    pub(crate) leap: AtomicU64,
    /// The counter reading the hands starts at.
    pub(crate) base: AtomicU64,
    /// The kernel's rate, ppb from nominal (its tick and frequency), that
    /// the hands follows; [`RATE_UNKNOWN`] where the keeper could not ask.
    pub(crate) kernel_rate_ppb: AtomicU64,
    /// CLOCK_MONOTONIC when the keeper asked it, ns.
    pub(crate) rate_asked_at: AtomicU64,
    /// The bound on the error of `boottime` as the keeper measured it, ns.
    pub(crate) boottime_uncertainty: AtomicU64,
}

/// [`Slot::kernel_rate_ppb`] where the keeper could not ask the kernel.
pub(crate) const RATE_UNKNOWN: i64 = i64::MIN;

/// A [`NanoSegment`] as six words.
#[repr(C)]
pub(crate) struct SegmentWords([AtomicU64; 6]);

/// Words of the bounds on UTC the keeper publishes: its own state's, as
/// `bounds/state.rs` lays it out (two copies, each a seqlock, and which is
/// newest).
pub(crate) const BOUNDS_WORDS: usize = 56;

/// The whole page.
#[repr(C, align(64))]
pub(crate) struct Page {
    pub(crate) header: Header,
    pub(crate) slots: [Slot; SLOTS],
    /// The keeper's bounds on UTC, with which its readers ask no source.
    pub(crate) bounds: [AtomicU64; BOUNDS_WORDS],
}

const _: () = assert!(size_of::<Header>() == 64);
const _: () = assert!(size_of::<Slot>() == 256);
const _: () = assert!(size_of::<Page>() == 64 + SLOTS * 256 + BOUNDS_WORDS * 8);
const _: () = assert!(size_of::<Page>() <= FILE_SIZE);
// The bounds' words are read as a 64-byte-aligned `Published`.
const _: () = assert!(std::mem::offset_of!(Page, bounds) % 64 == 0);

/// What a reader takes from a slot, all of one hands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hands {
    pub(crate) segments: [NanoSegment; 3],
    pub(crate) realtime: i64,
    pub(crate) boottime: i64,
    pub(crate) tai: i64,
    pub(crate) end_ns: u64,
    pub(crate) bound_ns: u64,
    pub(crate) bound_ppb: u64,
    pub(crate) bound_since: u64,
    pub(crate) realtime_uncertainty: u64,
    pub(crate) leap: u64,
    pub(crate) base: u64,
    pub(crate) kernel_rate_ppb: i64,
    pub(crate) rate_asked_at: u64,
    pub(crate) boottime_uncertainty: u64,
}

impl Hands {
    /// Whether the hands starts at or before `count` (within half the
    /// counter's range: a 64-bit TSC never wraps).
    pub(crate) fn started_by(&self, count: u64) -> bool {
        (count.wrapping_sub(self.base) as i64) >= 0
    }

    /// The latest Monotonic the hands gives at a count up to `count`, ns:
    /// at `count` where a segment covers it, else at the last count of each
    /// segment that started by then; `None` where none had. No read of the
    /// hands at an earlier count gave more.
    pub(crate) fn latest_by(&self, count: u64) -> Option<u64> {
        self.segments
            .iter()
            .filter(|segment| segment.len > 0)
            .filter_map(|segment| {
                let since = count.wrapping_sub(segment.start);
                // Within half the counter's range, as `started_by`.
                (since as i64 >= 0).then(|| {
                    segment.line_at(segment.start.wrapping_add(since.min(segment.len - 1)))
                })
            })
            .max()
    }

    /// What a change of the kernel's rate to `said_ppb` (as the kernel
    /// says it now, at Monotonic `now`) that the hands does not follow may
    /// have cost its reads by then, ns: the two rates apart over the time
    /// since the keeper asked (it may have changed just after). 0 where
    /// either rate is unknown.
    pub(crate) fn unfollowed_change_ns(&self, said_ppb: Option<i64>, now: u64) -> u64 {
        let Some(said) = said_ppb.filter(|_| self.kernel_rate_ppb != RATE_UNKNOWN) else {
            return 0;
        };
        let apart = self.kernel_rate_ppb.abs_diff(said) as u128;
        let since = now.saturating_sub(self.rate_asked_at) as u128;
        (since * apart)
            .div_ceil(1_000_000_000)
            .min(u64::MAX as u128) as u64
    }

    /// Monotonic at `count`, ns, if a segment covers it.
    #[inline(always)]
    pub(crate) fn nanos_at(&self, count: u64) -> Option<u64> {
        self.segments
            .iter()
            .find_map(|segment| segment.nanos_at(count))
    }
}

impl SegmentWords {
    #[inline(always)]
    fn load(&self) -> NanoSegment {
        let [start, len, slope_hi, slope_lo, origin_hi, origin_lo] =
            self.0.each_ref().map(|word| word.load(Ordering::Relaxed));
        NanoSegment {
            start,
            len,
            slope_hi,
            slope_lo,
            origin_hi,
            origin_lo,
        }
    }

    fn store(&self, segment: &NanoSegment) {
        let words = [
            segment.start,
            segment.len,
            segment.slope_hi,
            segment.slope_lo,
            segment.origin_hi,
            segment.origin_lo,
        ];
        for (word, value) in self.0.iter().zip(words) {
            word.store(value, Ordering::Relaxed);
        }
    }
}

impl Slot {
    /// What `load` reads from the slot, if no write overlapped it (and the
    /// keeper ever wrote the slot).
    #[inline(always)]
    fn read<R>(&self, load: impl Fn(&Slot) -> R) -> Option<R> {
        let sequence = self.sequence.load(Ordering::Acquire);
        let value = load(self);
        // The loads above before the sequence's second load: a write that
        // began meanwhile made it odd first.
        fence(Ordering::Acquire);
        (sequence % 2 == 0 && sequence != 0 && self.sequence.load(Ordering::Relaxed) == sequence)
            .then_some(value)
    }

    /// The first segment and Realtime's offset: the first cache line.
    #[inline(always)]
    fn first(&self) -> Option<(NanoSegment, i64)> {
        self.read(|slot| {
            (
                slot.first.load(),
                slot.realtime.load(Ordering::Relaxed) as i64,
            )
        })
    }

    /// The whole hands.
    pub(crate) fn hands(&self) -> Option<Hands> {
        self.read(|slot| {
            let word = |word: &AtomicU64| word.load(Ordering::Relaxed);
            let [second, third] = slot.others.each_ref().map(SegmentWords::load);
            Hands {
                segments: [slot.first.load(), second, third],
                realtime: word(&slot.realtime) as i64,
                boottime: word(&slot.boottime) as i64,
                tai: word(&slot.tai) as i64,
                end_ns: word(&slot.end_ns),
                bound_ns: word(&slot.bound_ns),
                bound_ppb: word(&slot.bound_ppb),
                bound_since: word(&slot.bound_since),
                realtime_uncertainty: word(&slot.realtime_uncertainty),
                leap: word(&slot.leap),
                base: word(&slot.base),
                kernel_rate_ppb: word(&slot.kernel_rate_ppb) as i64,
                rate_asked_at: word(&slot.rate_asked_at),
                boottime_uncertainty: word(&slot.boottime_uncertainty),
            }
        })
    }

    /// Writes `hands` (the keeper only).
    fn store(&self, hands: &Hands) {
        let sequence = self.sequence.load(Ordering::Relaxed) | 1;
        self.sequence.store(sequence, Ordering::Relaxed);
        // Odd before any of the stores below can be seen.
        fence(Ordering::Release);
        self.first.store(&hands.segments[0]);
        for (words, segment) in self.others.iter().zip(&hands.segments[1..]) {
            words.store(segment);
        }
        let store = |word: &AtomicU64, value: u64| word.store(value, Ordering::Relaxed);
        store(&self.realtime, hands.realtime as u64);
        store(&self.boottime, hands.boottime as u64);
        store(&self.tai, hands.tai as u64);
        store(&self.end_ns, hands.end_ns);
        store(&self.bound_ns, hands.bound_ns);
        store(&self.bound_ppb, hands.bound_ppb);
        store(&self.bound_since, hands.bound_since);
        store(&self.realtime_uncertainty, hands.realtime_uncertainty);
        store(&self.leap, hands.leap);
        store(&self.base, hands.base);
        store(&self.kernel_rate_ppb, hands.kernel_rate_ppb as u64);
        store(&self.rate_asked_at, hands.rate_asked_at);
        store(&self.boottime_uncertainty, hands.boottime_uncertainty);
        // Even again after them.
        self.sequence.store(sequence + 1, Ordering::Release);
    }
}

impl Page {
    /// The slot the header names newest (an index past the ring, which no
    /// keeper writes, names none).
    #[inline(always)]
    fn newest_slot(&self) -> Option<&Slot> {
        self.slots
            .get(self.header.newest.load(Ordering::Acquire) as usize)
    }

    /// Monotonic at `count` in ns (with `REALTIME`, Realtime) from the
    /// newest hands' first segment, if it covers the count: the common
    /// read, one cache line of the page.
    #[inline(always)]
    pub(crate) fn nanos_at<const REALTIME: bool>(&self, count: u64) -> Option<u64> {
        let (segment, realtime) = self.newest_slot()?.first()?;
        let monotonic = segment.nanos_at(count)?;
        // The keeper builds segments only where Realtime fits a u64 (a
        // page that lies gives wrong time, never undefined behaviour).
        Some(if REALTIME {
            monotonic.wrapping_add_signed(realtime)
        } else {
            monotonic
        })
    }

    /// The newest hands, if it could be read whole (a few tries: a reader
    /// that the keeper overtakes reads the slot it moved to).
    pub(crate) fn newest(&self) -> Option<Hands> {
        (0..SLOTS).find_map(|_| self.newest_slot()?.hands())
    }

    /// Publishes `hands` in the slot after the newest, then names it newest
    /// (the keeper only: one writer).
    pub(crate) fn publish(&self, hands: &Hands) {
        let next = (self.header.newest.load(Ordering::Relaxed) as usize + 1) % SLOTS;
        self.slots[next].store(hands);
        self.header.newest.store(next as u64, Ordering::Release);
    }
}
