//! A ring slot: a hands in atomics, with the ticket that makes a copy of it
//! consistent (a seqlock per slot), and the coarse clock's format.

use super::bintime::BinTime;
use super::line::Line;
use super::nanos::{NanoSegment, floor_nanos_signed};
use super::sync::{AtomicUsize, Ordering, Word, fence};

/// One published description of the timeline; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hands {
    /// Uptime as a function of the counter.
    pub(super) line: Line,
    /// Realtime minus uptime.
    pub(super) boottime: BinTime,
    /// Uptime at `base` as 32.32 fixed point, rounded down: the coarse clock.
    pub(super) coarse: u64,
}

impl Hands {
    /// Realtime minus uptime in whole nanoseconds, rounded down; 0 where
    /// that does not fit an `i64` (and the hands has no segments).
    pub(super) fn boottime_nanos(&self) -> i64 {
        floor_nanos_signed(self.boottime).unwrap_or(0)
    }

    /// The hands' line as nanosecond segments (see [`Line::segments`]),
    /// none where the boottime offset in nanoseconds does not fit an `i64`.
    pub(super) fn segments(&self, interval: u64, mask: u64) -> [NanoSegment; 2] {
        match floor_nanos_signed(self.boottime) {
            Some(offset) => self.line.segments(interval, mask, offset),
            None => [NanoSegment::NONE; 2],
        }
    }
}

/// A ring slot: a hands in atomics, with the ticket that makes a copy of it
/// consistent (a seqlock per slot). The ticket, the nanosecond segment most
/// reads use and the boottime offset fill the first cache line, so that a
/// read of `now()` touches one line; the exact timeline follows.
#[repr(C, align(64))]
pub(super) struct Slot {
    pub(super) ticket: AtomicUsize,
    /// The line in nanoseconds, the piece most reads fall in: with the ticket
    /// and the boottime offset, the first cache line, all that `now()` loads.
    pub(super) segment: SegmentWords,
    /// Realtime minus uptime in whole nanoseconds, rounded down.
    pub(super) boottime_nanos: Word,
    /// The other piece, where the rate changes at the switch point.
    pub(super) other_segment: SegmentWords,
    pub(super) base: Word,
    pub(super) switch: Word,
    pub(super) scale_before: Word,
    pub(super) scale_after: Word,
    pub(super) slew_len: Word,
    pub(super) settled: Word,
    pub(super) at_switch_sec: Word,
    pub(super) at_switch_frac: Word,
    pub(super) coarse: Word,
    pub(super) boottime_sec: Word,
    pub(super) boottime_frac: Word,
}

impl Slot {
    pub(super) fn new() -> Slot {
        Slot {
            ticket: AtomicUsize::new(0),
            segment: SegmentWords::new(),
            boottime_nanos: Word::new(0),
            other_segment: SegmentWords::new(),
            base: Word::new(0),
            switch: Word::new(0),
            scale_before: Word::new(0),
            scale_after: Word::new(0),
            slew_len: Word::new(0),
            settled: Word::new(0),
            at_switch_sec: Word::new(0),
            at_switch_frac: Word::new(0),
            coarse: Word::new(0),
            boottime_sec: Word::new(0),
            boottime_frac: Word::new(0),
        }
    }

    /// What `load` reads from the slot, if it holds ticket `ticket` throughout;
    /// `None` if it holds another hands or is being rewritten.
    #[inline]
    pub(super) fn read<R>(&self, ticket: usize, load: impl Fn(&Slot) -> R) -> Option<R> {
        if self.ticket.load(Ordering::Acquire) != ticket {
            return None;
        }
        let value = load(self);
        // The loads above happen before the ticket is checked again.
        fence(Ordering::Acquire);
        (self.ticket.load(Ordering::Relaxed) == ticket).then_some(value)
    }

    /// The timeline.
    #[inline]
    pub(super) fn line(&self) -> Line {
        Line {
            base: self.base.load(),
            switch: self.switch.load(),
            scale_before: self.scale_before.load(),
            scale_after: self.scale_after.load(),
            slew_len: self.slew_len.load(),
            settled: self.settled.load(),
            at_switch: BinTime::new(self.at_switch_sec.load() as i64, self.at_switch_frac.load()),
        }
    }

    /// The whole hands.
    #[inline]
    pub(super) fn hands(&self) -> Hands {
        Hands {
            line: self.line(),
            boottime: self.boottime(),
            coarse: self.coarse.load(),
        }
    }

    #[inline]
    pub(super) fn boottime(&self) -> BinTime {
        BinTime::new(self.boottime_sec.load() as i64, self.boottime_frac.load())
    }

    /// Realtime minus uptime in whole nanoseconds, rounded down.
    #[inline(always)]
    pub(super) fn boottime_nanos(&self) -> i64 {
        self.boottime_nanos.load() as i64
    }

    /// Writes `hands`, with its line as `segments`, as ticket `ticket`
    /// (writer only).
    pub(super) fn store(&self, hands: &Hands, segments: &[NanoSegment; 2], ticket: usize) {
        let line = &hands.line;
        self.ticket.store(0, Ordering::Relaxed);
        // Readers that see any field below see the 0 above.
        fence(Ordering::Release);
        self.segment.store(&segments[0]);
        self.boottime_nanos.store(hands.boottime_nanos() as u64);
        self.other_segment.store(&segments[1]);
        self.base.store(line.base);
        self.switch.store(line.switch);
        self.scale_before.store(line.scale_before);
        self.scale_after.store(line.scale_after);
        self.slew_len.store(line.slew_len);
        self.settled.store(line.settled);
        self.at_switch_sec.store(line.at_switch.sec() as u64);
        self.at_switch_frac.store(line.at_switch.frac());
        self.coarse.store(hands.coarse);
        self.boottime_sec.store(hands.boottime.sec() as u64);
        self.boottime_frac.store(hands.boottime.frac());
        self.ticket.store(ticket, Ordering::Release);
    }
}

/// A [`NanoSegment`] in atomics, within a slot.
pub(super) struct SegmentWords {
    pub(super) start: Word,
    pub(super) len: Word,
    pub(super) slope_hi: Word,
    pub(super) slope_lo: Word,
    pub(super) origin_hi: Word,
    pub(super) origin_lo: Word,
}

impl SegmentWords {
    pub(super) fn new() -> SegmentWords {
        SegmentWords {
            start: Word::new(0),
            len: Word::new(0),
            slope_hi: Word::new(0),
            slope_lo: Word::new(0),
            origin_hi: Word::new(0),
            origin_lo: Word::new(0),
        }
    }

    #[inline(always)]
    pub(super) fn load(&self) -> NanoSegment {
        NanoSegment {
            start: self.start.load(),
            len: self.len.load(),
            slope_hi: self.slope_hi.load(),
            slope_lo: self.slope_lo.load(),
            origin_hi: self.origin_hi.load(),
            origin_lo: self.origin_lo.load(),
        }
    }

    pub(super) fn store(&self, segment: &NanoSegment) {
        self.start.store(segment.start);
        self.len.store(segment.len);
        self.slope_hi.store(segment.slope_hi);
        self.slope_lo.store(segment.slope_lo);
        self.origin_hi.store(segment.origin_hi);
        self.origin_lo.store(segment.origin_lo);
    }
}

/// What a nanosecond read adds to uptime: the boottime offset for realtime.
#[inline(always)]
pub(super) fn offset<const REALTIME: bool>(slot: &Slot) -> i64 {
    if REALTIME { slot.boottime_nanos() } else { 0 }
}

/// The coarse clock's value at `uptime`: 32.32 fixed point, rounded down (so
/// never ahead), saturating (136 years of uptime).
pub(super) fn coarse_of(uptime: BinTime) -> u64 {
    match u32::try_from(uptime.sec()) {
        Ok(sec) => (sec as u64) << 32 | uptime.frac() >> 32,
        Err(_) if uptime.sec() < 0 => 0,
        Err(_) => u64::MAX,
    }
}

/// The uptime a coarse value stands for.
#[inline]
pub(super) fn uncoarse(coarse: u64) -> BinTime {
    BinTime::new((coarse >> 32) as i64, coarse << 32)
}
