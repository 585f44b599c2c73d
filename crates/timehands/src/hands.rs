//! The timehands: a ring of snapshots that readers use without locks.
//!
//! # The model
//!
//! Time is a function of the counter, built of straight segments. A *hands*
//! describes the function from its `base` (the counter value the writer sampled)
//! onward: up to its `switch` point time runs at `scale_before`, after it at
//! `scale_after` for `slew_len` counts and then at `settled`, and `at_switch` is
//! the time at the switch point. The middle segment is an `adjtime` slew,
//! planned whole (`discipline.rs`): it runs at its rate until its amount is
//! used up and then stops, however late the next windup comes, so a slew
//! neither stalls between windups nor runs past its amount. A reader takes
//! the current hands, reads the counter
//! and evaluates; [`Line::uptime_at`] is the one conversion routine that
//! readers and the writer share.
//!
//! Each hands also carries its line up to a windup due in whole nanoseconds,
//! as one or two straight segments (`nanos.rs`): a read of nanoseconds
//! through them is one multiply-add after the counter read, and equals the
//! floor of [`Line::uptime_at`] in nanoseconds exactly, so it inherits every
//! guarantee below. The first segment, the ticket and the boottime offset
//! share the slot's first cache line.
//!
//! A windup samples the counter and publishes a new hands that continues the old
//! function exactly (so no windup ever steps time, however late it comes: the
//! delta times the scale is a full 128-bit product). A rate change does not take
//! effect at the sample, as in the BSD kernels, but at a switch point a little
//! in the future.
//!
//! # Why switch points, and the promise
//!
//! In user space the writer can be preempted between any two instructions. If it
//! samples the counter, stalls, and then publishes a lower scale, readers that
//! meanwhile evaluated the old hands far past the sample returned more than
//! readers of the new hands return afterwards: time goes backwards. So:
//!
//! - every hands *promises* that no later hands changes the rate before
//!   `switch + interval` counts from its base. A reader whose counter is below the
//!   promise needs nothing else: every hands that can ever be published agrees
//!   with this one there. That is the common case: one state load, the hands,
//!   one counter read, one multiplication, and no store.
//! - a reader past the promise looks at the state again after reading the
//!   counter. If the writer has marked a candidate *pending* whose switch point
//!   the reader's counter has passed, the reader cancels it (one CAS) before it
//!   returns: no reader ever computes a time that a published hands contradicts.
//! - the writer marks its candidate pending, then reads the counter once more.
//!   If it is already past the switch point, or if its publishing CAS finds the
//!   candidate cancelled, it starts again from a new sample.
//!
//! Readers never wait: a pending candidate never blocks them, and a writer stalled
//! anywhere leaves them reading the old hands, which stays valid. The proof that
//! the two counter reads (the writer's check, the reader's late read) cannot both
//! miss each other is the pair of `SeqCst` fences, see `past_promise` and
//! `publish`.
//!
//! # Following a reference
//!
//! A counter may count time that the clock it follows does not: an
//! invariant TSC runs on through a suspend, where CLOCK_MONOTONIC stops. A
//! timekeeper built to [follow a reference](Builder::follows_reference)
//! never extrapolates past the promise: a read there stands at the
//! promise's time (every hands agrees with the current one up to it, so no
//! reader asks anything, and none cancels), until a windup, which
//! [compares the line with the reference](Timekeeper::windup_following) and
//! takes out a gap the reference did not see. No read is then more than the
//! promise (two intervals) ahead of the reference, and none steps back: the
//! new hands starts no earlier than the promise's time.
//!
//! # Retiring
//!
//! A timekeeper whose counter has gone wrong is [retired](Timekeeper::retire)
//! for a successor on another counter, without a backward step. The retirement
//! is a candidate like a rate change: its switch point, the *retire point*, is
//! at the promise or a lead ahead, whichever is later, and readers past it
//! cancel it while it is pending. Once it is published no hands follows, and
//! every read is clamped to the retire point: time on the retired timekeeper
//! freezes there, and the successor starts from that time.
//!
//! # The ring
//!
//! Candidates are written into the slot after the current one, so that a reader
//! still reading an older hands keeps a consistent copy for `hands - 1` more
//! windups; each slot carries the ticket of the hands it holds (0 while it is
//! written) and a reader that finds the ticket changed under it starts again.
//! With one slot (platforms without a free-running counter, as RTEMS allows) the
//! writer must rewrite the current hands in place, and readers retry for the few
//! instructions that takes: there the windup must not be preempted, as a tick
//! interrupt is not.

use core::time::Duration;

use crate::counter::Counter;
use crate::discipline::{Discipline, Slew, nominal_scale};
use crate::lock::WriterLock;
use crate::nanos::{NanoSegment, floor_nanos, floor_nanos_signed, realtime_nanos};
use crate::sync::{AtomicUsize, Ordering, Word, fence, relax};
use crate::{BinTime, Error};

/// The largest ring.
pub const MAX_HANDS: usize = 16;
/// The ring a `Timekeeper` gets unless told otherwise.
pub const DEFAULT_HANDS: usize = 8;
/// The windup interval a `Timekeeper` assumes unless told otherwise.
pub const DEFAULT_WINDUP_INTERVAL: Duration = Duration::from_millis(1);
/// How many times a windup tries to publish a rate change that readers keep
/// cancelling before it publishes the old rate and leaves the change for the next
/// windup.
const RATE_CHANGE_ATTEMPTS: u32 = 3;

// The state word: which slot holds the current hands, its ticket, whether a
// candidate is pending, and whether the timekeeper is retired. Tickets grow by one per published hands and wrap from
// MAX_TICKET to 1 (2^54 windups on 64-bit targets, 2^22 on 32-bit ones, where a
// reader would have to stall across a multiple of that many windups to be
// fooled); a slot holds ticket 0 while it is being written.
// MAX_HANDS is a power of two: a slot index masked from the state is in range
// without a bounds check.
const SLOT_MASK: usize = MAX_HANDS - 1;
const _: () = assert!(MAX_HANDS.is_power_of_two() && MAX_HANDS <= PENDING);
const PENDING: usize = 1 << 8;
const RETIRED: usize = 1 << 9;
const TICKET_SHIFT: u32 = 10;
const MAX_TICKET: usize = usize::MAX >> TICKET_SHIFT;

fn ticket(state: usize) -> usize {
    state >> TICKET_SHIFT
}

fn slot_index(state: usize) -> usize {
    state & SLOT_MASK
}

fn next_ticket(ticket: usize) -> usize {
    if ticket == MAX_TICKET { 1 } else { ticket + 1 }
}

/// The timeline a hands describes: what readers of uptime need, and all
/// they load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Line {
    /// The counter value the writer sampled.
    base: u64,
    /// Counts from `base` to the switch point.
    switch: u64,
    /// Seconds per count (0.64 fixed point) before the switch point.
    scale_before: u64,
    /// Seconds per count for `slew_len` counts after the switch point.
    scale_after: u64,
    /// Counts after the switch point that run at `scale_after`: a slew's
    /// plan (at least an interval), or `u64::MAX` when there is no slew
    /// (`settled == scale_after`).
    slew_len: u64,
    /// Seconds per count after the slew.
    settled: u64,
    /// Uptime at the switch point.
    at_switch: BinTime,
}

impl Line {
    /// The slew after the switch point, if there is one.
    fn slew(&self) -> Option<Slew> {
        (self.slew_len != u64::MAX).then(|| Slew {
            part: self.scale_after.wrapping_sub(self.settled) as i64,
            len: self.slew_len,
        })
    }

    /// Where the slew ends, in counts from `base`, if there is one.
    fn slew_end(&self) -> Option<u64> {
        self.slew().map(|slew| self.switch.saturating_add(slew.len))
    }

    /// Whether the slew runs at `delta` counts from `base` (at or past the
    /// switch point).
    fn slewing_at(&self, delta: u64) -> bool {
        self.slew_end().is_some_and(|end| delta < end)
    }

    /// Uptime `delta` counts after `base`: the one conversion routine.
    #[inline]
    fn uptime_at(&self, delta: u64) -> BinTime {
        if delta >= self.switch {
            let since = delta - self.switch;
            if since <= self.slew_len {
                self.at_switch
                    .saturating_add(BinTime::from_counts(since, self.scale_after))
            } else {
                self.at_switch
                    .saturating_add(BinTime::from_counts(self.slew_len, self.scale_after))
                    .saturating_add(BinTime::from_counts(since - self.slew_len, self.settled))
            }
        } else {
            let until = BinTime::from_counts(self.switch - delta, self.scale_before);
            self.at_switch.saturating_sub(until)
        }
    }

    /// The line from its base up to a windup due (`interval` counts), as
    /// nanosecond segments on a counter of `mask` where realtime (uptime
    /// plus `boottime_nanos`) fits a `u64` too, the longer first. The line
    /// has up to three straight pieces there (before the switch point, the
    /// slew, after it); pieces at the same rate are one segment, and counts
    /// in a third piece (a slew that ends in the interval after one that
    /// starts: never, as a plan lasts an interval) take the exact path. Up
    /// to the due point a read needs no promise check: the promise is at
    /// least an interval long.
    fn segments(&self, interval: u64, mask: u64, boottime_nanos: i64) -> [NanoSegment; 2] {
        let switch = self.switch.min(interval);
        let slew_end = self.slew_end().map_or(interval, |end| end.min(interval));
        let bounds = [0, switch, slew_end, interval];
        let scales = [self.scale_before, self.scale_after, self.settled];
        // The pieces (from, to, scale), with the empty ones left out and
        // neighbours at the same rate joined.
        let mut pieces = [(0, 0, 0); 3];
        let mut count = 0;
        for (i, &scale) in scales.iter().enumerate() {
            let (from, to) = (bounds[i], bounds[i + 1]);
            if from == to {
                continue;
            }
            if count > 0 && pieces[count - 1].2 == scale {
                pieces[count - 1].1 = to;
            } else {
                pieces[count] = (from, to, scale);
                count += 1;
            }
        }
        let pieces = &mut pieces[..count];
        pieces.sort_by_key(|&(from, to, _)| core::cmp::Reverse(to - from));
        let mut segments = [NanoSegment::NONE; 2];
        for (segment, &(from, to, scale)) in segments.iter_mut().zip(pieces.iter()) {
            let start = self.base.wrapping_add(from) & mask;
            *segment = NanoSegment::new(start, to - from, self.uptime_at(from), scale, mask)
                .offset_fits(boottime_nanos);
        }
        segments
    }
}

/// One published description of the timeline; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hands {
    /// Uptime as a function of the counter.
    line: Line,
    /// Realtime minus uptime.
    boottime: BinTime,
    /// Uptime at `base` as 32.32 fixed point, rounded down: the coarse clock.
    coarse: u64,
}

impl Hands {
    /// Realtime minus uptime in whole nanoseconds, rounded down; 0 where
    /// that does not fit an `i64` (and the hands has no segments).
    fn boottime_nanos(&self) -> i64 {
        floor_nanos_signed(self.boottime).unwrap_or(0)
    }

    /// The hands' line as nanosecond segments (see [`Line::segments`]),
    /// none where the boottime offset in nanoseconds does not fit an `i64`.
    fn segments(&self, interval: u64, mask: u64) -> [NanoSegment; 2] {
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
struct Slot {
    ticket: AtomicUsize,
    /// The line in nanoseconds, the piece most reads fall in: with the ticket
    /// and the boottime offset, the first cache line, all that `now()` loads.
    segment: SegmentWords,
    /// Realtime minus uptime in whole nanoseconds, rounded down.
    boottime_nanos: Word,
    /// The other piece, where the rate changes at the switch point.
    other_segment: SegmentWords,
    base: Word,
    switch: Word,
    scale_before: Word,
    scale_after: Word,
    slew_len: Word,
    settled: Word,
    at_switch_sec: Word,
    at_switch_frac: Word,
    coarse: Word,
    boottime_sec: Word,
    boottime_frac: Word,
}

impl Slot {
    fn new() -> Slot {
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
    fn read<R>(&self, ticket: usize, load: impl Fn(&Slot) -> R) -> Option<R> {
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
    fn line(&self) -> Line {
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
    fn hands(&self) -> Hands {
        Hands {
            line: self.line(),
            boottime: self.boottime(),
            coarse: self.coarse.load(),
        }
    }

    #[inline]
    fn boottime(&self) -> BinTime {
        BinTime::new(self.boottime_sec.load() as i64, self.boottime_frac.load())
    }

    /// Realtime minus uptime in whole nanoseconds, rounded down.
    #[inline(always)]
    fn boottime_nanos(&self) -> i64 {
        self.boottime_nanos.load() as i64
    }

    /// Writes `hands`, with its line as `segments`, as ticket `ticket`
    /// (writer only).
    fn store(&self, hands: &Hands, segments: &[NanoSegment; 2], ticket: usize) {
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
struct SegmentWords {
    start: Word,
    len: Word,
    slope_hi: Word,
    slope_lo: Word,
    origin_hi: Word,
    origin_lo: Word,
}

impl SegmentWords {
    fn new() -> SegmentWords {
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
    fn load(&self) -> NanoSegment {
        NanoSegment {
            start: self.start.load(),
            len: self.len.load(),
            slope_hi: self.slope_hi.load(),
            slope_lo: self.slope_lo.load(),
            origin_hi: self.origin_hi.load(),
            origin_lo: self.origin_lo.load(),
        }
    }

    fn store(&self, segment: &NanoSegment) {
        self.start.store(segment.start);
        self.len.store(segment.len);
        self.slope_hi.store(segment.slope_hi);
        self.slope_lo.store(segment.slope_lo);
        self.origin_hi.store(segment.origin_hi);
        self.origin_lo.store(segment.origin_lo);
    }
}

/// What a call to [`Timekeeper::windup`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Windup {
    /// A new hands was published.
    Published,
    /// Another thread was winding up (or changing the clock); this call did
    /// nothing, as the other writer does the work.
    Busy,
    /// The timekeeper is [retired](Timekeeper::retire): nothing is published
    /// any more.
    Retired,
}

/// Whether a read found a windup due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// No: the hands read is less than a windup interval old.
    No,
    /// Yes: it is an interval old or older, or the counter is more than an
    /// interval behind its base (it went back).
    Yes,
    /// Yes, and the read stood at the hands' promise: a timekeeper that
    /// [follows a reference](Builder::follows_reference), read past it. A
    /// windup, and a read after it, give the time.
    Standing,
}

/// Counts of what the writer has done, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

/// What a pass of the writer does.
#[derive(Clone, Copy)]
enum Change<'a> {
    /// A windup: the timeline carries on, with the rate changes due; with
    /// the reference a timekeeper follows, read after the counter.
    Windup {
        reference: Option<&'a dyn Fn() -> BinTime>,
    },
    /// A step of realtime, the one discontinuity a timekeeper allows:
    /// realtime becomes this, now.
    Realtime(BinTime),
    /// The same step, given as realtime minus uptime.
    Boottime(BinTime),
}

/// What only writers touch: the rate state and the counts for [`Stats`].
struct WriterState {
    discipline: Discipline,
    stats: Stats,
}

/// A hands the writer is to publish, with the writer's state once it is.
struct Next {
    hands: Hands,
    discipline: Discipline,
    /// Where it changes the rate, in counts from the current hands' base.
    rate_switch: Option<u64>,
}

/// Builds a [`Timekeeper`] with a chosen ring size and windup interval.
#[derive(Debug)]
pub struct Builder<C> {
    counter: C,
    hands: usize,
    windup_interval: Duration,
    start: BinTime,
    start_count: Option<u64>,
    follows_reference: bool,
}

impl<C: Counter> Builder<C> {
    /// The number of timehands in the ring, 1 to [`MAX_HANDS`]. With 1, readers
    /// retry while a windup rewrites it (see the module docs).
    pub fn hands(mut self, count: usize) -> Builder<C> {
        self.hands = count;
        self
    }

    /// How often [`Timekeeper::windup`] is expected to be called. It sets how
    /// far ahead a rate change is scheduled (a quarter of it) and how long a
    /// hands promises its rate (all of it); windups may come earlier or later,
    /// at the cost of readers taking a slower path while a windup is overdue.
    /// It must be at least 4 counts and at most an eighth of the counter's wrap.
    pub fn windup_interval(mut self, interval: Duration) -> Builder<C> {
        self.windup_interval = interval;
        self
    }

    /// The uptime the timekeeper starts from (zero unless told otherwise): a
    /// timekeeper that takes over from another, on another counter, continues
    /// its time.
    pub fn start_at(mut self, uptime: BinTime) -> Builder<C> {
        self.start = uptime;
        self
    }

    /// The counter value at which uptime is [`start_at`](Builder::start_at)
    /// (the counter's value when the timekeeper is built, unless told): for a
    /// caller that paired a counter reading with another clock's time, so
    /// that the time spent building does not count as an offset.
    pub fn start_count(mut self, count: u64) -> Builder<C> {
        self.start_count = Some(count);
        self
    }

    /// For a timekeeper whose time follows a reference clock that its counter
    /// may run ahead of: a counter that counts on through a suspend the
    /// reference does not count (an invariant TSC in s2idle, against
    /// CLOCK_MONOTONIC). Reads then never extrapolate the counter past the
    /// hands' promise (at most two windup intervals after the last windup):
    /// they stand there until a windup, and
    /// [`windup_following`](Timekeeper::windup_following) takes out counts
    /// the reference did not see. Off unless told: a counter that stops
    /// when time should (an RTOS's through its sleep) needs nothing, and
    /// its reads extrapolate over late windups.
    pub fn follows_reference(mut self, follows: bool) -> Builder<C> {
        self.follows_reference = follows;
        self
    }

    /// The timekeeper, its uptime [`start_at`](Builder::start_at) (zero) at the
    /// counter's current value.
    ///
    /// # Errors
    /// [`Error::Frequency`] for a counter below 2 Hz, [`Error::Mask`] for a mask
    /// that is not `2^bits - 1`, [`Error::Hands`] for a ring outside
    /// `1..=MAX_HANDS`, [`Error::WindupInterval`] for an interval the counter
    /// cannot represent.
    pub fn build(self) -> Result<Timekeeper<C>, Error> {
        let frequency = self.counter.frequency();
        if frequency < 2 {
            return Err(Error::Frequency { hz: frequency });
        }
        let mask = self.counter.mask();
        if mask == 0 || mask & mask.wrapping_add(1) != 0 {
            return Err(Error::Mask { mask });
        }
        if !(1..=MAX_HANDS).contains(&self.hands) {
            return Err(Error::Hands { count: self.hands });
        }
        let interval = self
            .windup_interval
            .as_nanos()
            .checked_mul(frequency as u128)
            .map_or(u128::MAX, |n| n / 1_000_000_000);
        if interval < 4 || interval > max_interval(mask) as u128 {
            return Err(Error::WindupInterval {
                interval: self.windup_interval,
                counts: interval,
                mask,
            });
        }
        let interval = interval as u64;
        let nominal = nominal_scale(frequency);
        let tk = Timekeeper {
            slots: core::array::from_fn(|_| Slot::new()),
            state: AtomicUsize::new(1 << TICKET_SHIFT),
            pending_switch: AtomicUsize::new(0),
            writer: WriterLock::new(WriterState {
                discipline: Discipline::new(nominal, interval),
                stats: Stats::default(),
            }),
            hands: self.hands,
            mask,
            behind: mask - (mask >> 3),
            interval,
            lead: interval / 4,
            follows_reference: self.follows_reference,
            counter: self.counter,
        };
        let first = Hands {
            line: Line {
                base: self.start_count.unwrap_or_else(|| tk.counter.read()) & mask,
                switch: 0,
                scale_before: nominal,
                scale_after: nominal,
                slew_len: u64::MAX,
                settled: nominal,
                at_switch: self.start,
            },
            boottime: BinTime::ZERO,
            coarse: coarse_of(self.start),
        };
        tk.slots[0].store(&first, &first.segments(interval, mask), 1);
        Ok(tk)
    }
}

/// The timekeeper: a counter, a ring of timehands, and the clocks read from them.
///
/// Uptime starts at zero when the timekeeper is built and is continuous and
/// monotonic; realtime is uptime plus a boottime offset that only
/// [`set_realtime`](Timekeeper::set_realtime) changes. Someone must call
/// [`windup`](Timekeeper::windup) about every windup interval (a tick handler,
/// a thread, or readers that notice it is due); it may come late by anything up
/// to seven eighths of the counter's wrap period without losing a bit.
///
/// ```
/// use timehands::{BinTime, SimCounter, Timekeeper};
///
/// let counter = SimCounter::new(10_000_000); // 10 MHz
/// let tk = Timekeeper::new(counter.clone())?;
/// counter.advance(25_000_000); // 2.5 s, with no windup at all
/// assert_eq!(tk.uptime().to_string(), "2.500000000");
/// tk.windup();
/// assert_eq!(tk.uptime_coarse().to_string(), "2.500000000");
///
/// tk.set_realtime(BinTime::new(1_700_000_000, 0));
/// counter.advance(10_000_000);
/// assert_eq!(tk.realtime().to_timespec(), (1_700_000_001, 0));
/// # Ok::<(), timehands::Error>(())
/// ```
pub struct Timekeeper<C> {
    slots: [Slot; MAX_HANDS],
    /// Ticket and slot of the current hands, and the pending flag.
    state: AtomicUsize,
    /// The pending candidate's switch point, in counts from the current hands'
    /// base, rounded down to `usize::MAX` on 32-bit targets (which only makes
    /// readers cancel sooner). Once retired, the retire point.
    pending_switch: AtomicUsize,
    writer: WriterLock<WriterState>,
    hands: usize,
    mask: u64,
    /// Deltas above this are reads behind the base: the top eighth of the range.
    behind: u64,
    /// Counts in one windup interval: how long past its switch point a hands
    /// promises its rate.
    interval: u64,
    /// Counts from a windup's sample to its switch point, at the least.
    lead: u64,
    /// Whether reads stand at the promise: see [`Builder::follows_reference`].
    follows_reference: bool,
    counter: C,
}

impl<C: Counter> Timekeeper<C> {
    /// A timekeeper with [`DEFAULT_HANDS`] hands and the
    /// [`DEFAULT_WINDUP_INTERVAL`]; see [`Builder::build`] for the errors.
    pub fn new(counter: C) -> Result<Timekeeper<C>, Error> {
        Timekeeper::builder(counter).build()
    }

    /// A builder to choose the ring size and the windup interval.
    pub fn builder(counter: C) -> Builder<C> {
        Builder {
            counter,
            hands: DEFAULT_HANDS,
            windup_interval: DEFAULT_WINDUP_INTERVAL,
            start: BinTime::ZERO,
            start_count: None,
            follows_reference: false,
        }
    }

    /// The counter.
    pub fn counter(&self) -> &C {
        &self.counter
    }

    /// Counts from `base` to `count`. A count in the top eighth of the range
    /// is a read behind the base (another CPU's counter a little behind, a
    /// counter reset): it is clamped to the base, never taken as a huge delta.
    #[inline]
    fn delta(&self, base: u64, count: u64) -> u64 {
        let delta = count.wrapping_sub(base) & self.mask;
        if delta > self.behind { 0 } else { delta }
    }

    /// What `load` reads from the current hands, and the state word it was
    /// found under.
    #[inline]
    fn current<R>(&self, load: impl Fn(&Slot) -> R) -> (usize, R) {
        loop {
            let state = self.state.load(Ordering::Acquire);
            if let Some(value) = self.slots[slot_index(state)].read(ticket(state), &load) {
                return (state, value);
            }
            relax();
        }
    }

    /// The uptime a read gives, as `sample` reads the counter, and what `also`
    /// loads from the same hands.
    ///
    /// The counter is read first: an ordered read waits for the memory accesses
    /// before it, so loading the hands after it lets the loads run while the
    /// read completes instead of before it. A hands published after the read
    /// has a base later than the count, which clamps to that base: a time no
    /// earlier than the truth and no later than any read that follows.
    #[inline]
    fn read_with<R>(
        &self,
        sample: impl Fn(&C) -> u64,
        also: impl Fn(&Slot) -> R,
    ) -> (BinTime, Due, R) {
        self.read_at(sample(&self.counter), sample, also)
    }

    /// [`read_with`](Timekeeper::read_with) of the counter reading `count`,
    /// taken before this call; `sample` reads again where the protocol asks.
    #[inline]
    fn read_at<R>(
        &self,
        count: u64,
        sample: impl Fn(&C) -> u64,
        also: impl Fn(&Slot) -> R,
    ) -> (BinTime, Due, R) {
        let (state, (line, extra)) = self.current(|slot| (slot.line(), also(slot)));
        let delta = self.delta(line.base, count);
        if delta < line.switch.saturating_add(self.interval) {
            return (line.uptime_at(delta), self.due(line.base, count), extra);
        }
        // Out of line, so that the common case above keeps the hands in
        // registers rather than saving them across a call.
        self.read_past_promise(state, line, count, extra, sample, also)
    }

    /// A read whose counter is past its hands' promise: on a timekeeper that
    /// follows a reference, stands at the promise; otherwise asks
    /// `past_promise` whether it may use these hands, and reads again until
    /// it may.
    #[cold]
    #[inline(never)]
    fn read_past_promise<R>(
        &self,
        mut state: usize,
        mut line: Line,
        mut count: u64,
        mut extra: R,
        sample: impl Fn(&C) -> u64,
        also: impl Fn(&Slot) -> R,
    ) -> (BinTime, Due, R) {
        loop {
            let delta = self.delta(line.base, count);
            let promise = line.switch.saturating_add(self.interval);
            if delta < promise {
                return (line.uptime_at(delta), self.due(line.base, count), extra);
            }
            if self.follows_reference {
                // Every hands agrees with this one up to its promise, and
                // no read goes past it: nothing to ask.
                return (line.uptime_at(promise), Due::Standing, extra);
            }
            if let Some(delta) = self.past_promise(state, delta) {
                return (line.uptime_at(delta), self.due(line.base, count), extra);
            }
            count = sample(&self.counter);
            (state, (line, extra)) = self.current(|slot| (slot.line(), also(slot)));
        }
    }

    /// Whether a read of `count` finds a windup due: an interval or more past
    /// the base, or more than an interval behind it. The second is a counter
    /// that went back (a reset), not a few cycles of skew between CPUs: its
    /// reads all clamp to the base, and windups (and the host's watchdog with
    /// them) must go on all the same.
    #[inline]
    fn due(&self, base: u64, count: u64) -> Due {
        let ahead = count.wrapping_sub(base) & self.mask;
        let due = if ahead > self.behind {
            self.mask - ahead >= self.interval
        } else {
            ahead >= self.interval
        };
        if due { Due::Yes } else { Due::No }
    }

    /// The slow path of a read whose counter is past its hands' promise: may it
    /// use these hands, and at what delta? It may if they are still current and
    /// no pending candidate switches rate at or before its counter reading; a
    /// candidate that does is cancelled here, so it can never be published. On
    /// a retired timekeeper the delta is clamped to the retire point. `None`:
    /// read again.
    #[cold]
    fn past_promise(&self, seen: usize, delta: u64) -> Option<u64> {
        // Pairs with the fence in `publish`: either the writer's check of the
        // counter comes after our counter read (and so sees a count at least as
        // late), or our load below sees its candidate pending.
        self.counter.order_after_read();
        fence(Ordering::SeqCst);
        let state = self.state.load(Ordering::Acquire);
        if state & !PENDING != seen & !PENDING {
            return None;
        }
        if state & (PENDING | RETIRED) == 0 {
            return Some(delta);
        }
        let switch = self.pending_switch.load(Ordering::Acquire) as u64;
        if self.state.load(Ordering::Acquire) != state {
            return None;
        }
        if state & RETIRED != 0 {
            return Some(delta.min(switch));
        }
        if delta < switch {
            // The candidate keeps our rate up to its switch point; it agrees.
            return Some(delta);
        }
        self.state
            .compare_exchange(state, state & !PENDING, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
            .then_some(delta)
    }

    /// Whole nanoseconds of uptime as `sample` reads the counter (the floor
    /// of the exact uptime, 0 if it is negative, `u64::MAX` past 584 years),
    /// plus, with `REALTIME`, the boottime offset (rounded down to whole
    /// nanoseconds) of the same hands; and whether a windup is due.
    ///
    /// The common case is the counter read, the first cache line of the
    /// current hands (loaded while the read completes) and one multiply-add:
    /// see the `nanos` module. Counts its segment does not cover go the long
    /// way, out of line.
    #[inline(always)]
    fn nanos_and_due<const REALTIME: bool>(&self, sample: impl Fn(&C) -> u64) -> (u64, Due) {
        let count = sample(&self.counter);
        match self.nanos_at::<REALTIME>(count) {
            Some(ns) => (ns, Due::No),
            None => self.nanos_and_due_slow::<REALTIME>(count, sample),
        }
    }

    /// The nanoseconds at `count` (a reading taken before this call), if the
    /// current hands' first segment covers it: the whole of a read's work
    /// after the counter in the common case. Otherwise the caller goes on
    /// with [`nanos_and_due_slow`](Timekeeper::nanos_and_due_slow).
    #[inline(always)]
    pub(crate) fn nanos_at<const REALTIME: bool>(&self, count: u64) -> Option<u64> {
        let (_, (segment, boottime)) =
            self.current(|slot| (slot.segment.load(), offset::<REALTIME>(slot)));
        // No overflow: segments are built only where realtime fits a u64.
        Some(segment.nanos_at(count)?.wrapping_add_signed(boottime))
    }

    /// [`nanos_and_due`](Timekeeper::nanos_and_due) for a count outside the
    /// current hands' first segment: its other segment, or the exact
    /// timeline (which clamps a count behind the base, checks the promise,
    /// and finds windups due), rounded down as a segment rounds.
    #[inline(never)]
    pub(crate) fn nanos_and_due_slow<const REALTIME: bool>(
        &self,
        count: u64,
        sample: impl Fn(&C) -> u64,
    ) -> (u64, Due) {
        let (_, (segment, boottime)) =
            self.current(|slot| (slot.other_segment.load(), offset::<REALTIME>(slot)));
        if let Some(ns) = segment.nanos_at(count) {
            return (ns.saturating_add_signed(boottime), Due::No);
        }
        let (uptime, due, boottime) = self.read_at(count, sample, |slot| {
            if REALTIME {
                slot.boottime()
            } else {
                BinTime::ZERO
            }
        });
        (realtime_nanos(floor_nanos(uptime), boottime), due)
    }

    /// Whole nanoseconds of uptime: the floor of [`uptime`](Timekeeper::uptime)
    /// (0 before its origin, `u64::MAX` 584 years after), computed with one
    /// multiply-add after the counter read. Never decreases, as `uptime`.
    ///
    /// ```
    /// use timehands::{SimCounter, Timekeeper};
    ///
    /// let counter = SimCounter::new(3_000_000_000); // 3 GHz
    /// let tk = Timekeeper::new(counter.clone())?;
    /// counter.advance(1_000_000_001); // a third of a second and a third of a ns
    /// assert_eq!(tk.uptime_nanos(), 333_333_333);
    /// assert_eq!(tk.uptime().to_string(), "0.333333333");
    /// # Ok::<(), timehands::Error>(())
    /// ```
    #[inline]
    pub fn uptime_nanos(&self) -> u64 {
        self.nanos_and_due::<false>(C::read).0
    }

    /// Whole nanoseconds of realtime: [`uptime_nanos`](Timekeeper::uptime_nanos)
    /// plus the boottime offset rounded down to whole nanoseconds (0 before
    /// 1970). Equal to the floor of [`realtime`](Timekeeper::realtime) when
    /// the offset is whole nanoseconds (as the host clock's always is), and at
    /// most 1 ns below it otherwise.
    #[inline]
    pub fn realtime_nanos(&self) -> u64 {
        self.nanos_and_due::<true>(C::read).0
    }

    /// Uptime: the time since the timekeeper was built, as precise as the counter.
    ///
    /// Never decreases, on one thread or across threads (a read that happens
    /// after another returns at least as much), whatever windups, rate changes
    /// and slews run meanwhile. Never takes a lock, never waits for a writer.
    #[inline]
    pub fn uptime(&self) -> BinTime {
        self.read_with(C::read, |_| ()).0
    }

    /// Uptime from an unordered counter read ([`Counter::read_unordered`]):
    /// cheaper, monotonic on one thread, but a thread that has seen another
    /// thread's time may read an earlier one. For timing intervals on one thread.
    #[inline]
    pub fn uptime_unordered(&self) -> BinTime {
        self.read_with(C::read_unordered, |_| ()).0
    }

    /// Uptime, and whether a windup is due: the hands read is a windup interval
    /// old or older, or the counter is more than an interval behind its base
    /// (it went back). For clocks wound up by their readers (no tick, no thread):
    /// a reader that sees `true` calls [`windup`](Timekeeper::windup), which
    /// returns at once if another reader is already at it.
    #[inline]
    pub fn uptime_and_due(&self) -> (BinTime, bool) {
        self.read_and_due(C::read)
    }

    /// [`uptime_unordered`](Timekeeper::uptime_unordered), and whether a
    /// windup is due, as [`uptime_and_due`](Timekeeper::uptime_and_due) tells.
    #[inline]
    pub fn uptime_unordered_and_due(&self) -> (BinTime, bool) {
        self.read_and_due(C::read_unordered)
    }

    /// Uptime as `sample` reads the counter, and whether a windup is due.
    #[inline]
    fn read_and_due(&self, sample: impl Fn(&C) -> u64) -> (BinTime, bool) {
        let (uptime, due, ()) = self.read_with(sample, |_| ());
        (uptime, due != Due::No)
    }

    /// Realtime: uptime plus the boottime offset set by
    /// [`set_realtime`](Timekeeper::set_realtime) (zero until then).
    #[inline]
    pub fn realtime(&self) -> BinTime {
        let (uptime, _, boottime) = self.read_with(C::read, Slot::boottime);
        uptime.saturating_add(boottime)
    }

    /// Uptime at the last windup, to 2^-32 s: one load and no counter read.
    /// Never ahead of [`uptime`](Timekeeper::uptime) read after it, never
    /// decreasing, and behind it by at most the time since the last windup.
    #[inline]
    pub fn uptime_coarse(&self) -> BinTime {
        uncoarse(self.current(|slot| slot.coarse.load()).1)
    }

    /// [`uptime_coarse`](Timekeeper::uptime_coarse) plus the boottime offset.
    #[inline]
    pub fn realtime_coarse(&self) -> BinTime {
        let (coarse, boottime) = self.current(|slot| (slot.coarse.load(), slot.boottime())).1;
        uncoarse(coarse).saturating_add(boottime)
    }

    /// Publishes a new hands that continues the timeline from the current counter
    /// value, applying any frequency adjustment or slew from its switch point on.
    ///
    /// One writer at a time: a call that finds another writer busy returns
    /// [`Windup::Busy`] at once.
    pub fn windup(&self) -> Windup {
        match self.writer.try_lock() {
            Some(mut writer) => self.windup_locked(&mut writer, Change::Windup { reference: None }),
            None => Windup::Busy,
        }
    }

    /// [`windup`](Timekeeper::windup) for a timekeeper that
    /// [follows a reference](Builder::follows_reference), `reference`
    /// reading that clock's time on this one's uptime scale (it is read
    /// after the counter, so that a windup preempted in between never takes
    /// the delay for a gap).
    ///
    /// Where the counter has run past the hands' promise (reads stand
    /// there) and the line would put the time more than a windup interval
    /// ahead of the reference, the counter ran through a gap the reference
    /// did not see (a suspend): the new hands starts at the reference plus
    /// an interval, or at the promise's time if that is later (a read may
    /// have returned it), and carries on from there. A gap the reference
    /// saw too (a paused VM: both jumped) is time that passed, and stays.
    /// On a timekeeper that does not follow a reference, the same as
    /// `windup`.
    ///
    /// ```
    /// use timehands::{BinTime, SimCounter, Timekeeper};
    ///
    /// let counter = SimCounter::new(1_000_000_000);
    /// let tk = Timekeeper::builder(counter.clone()).follows_reference(true).build()?;
    /// // An hour suspended, of which the reference saw nothing: reads stand
    /// // at the promise, an interval (1 ms) from the start.
    /// counter.advance(3_600_000_000_000);
    /// assert_eq!(tk.uptime_nanos(), 1_000_000);
    /// // The windup resumes the time at most an interval ahead of the reference.
    /// tk.windup_following(|| BinTime::ZERO);
    /// counter.advance(5);
    /// assert_eq!(tk.uptime_nanos(), 1_000_005);
    /// # Ok::<(), timehands::Error>(())
    /// ```
    pub fn windup_following(&self, reference: impl Fn() -> BinTime) -> Windup {
        let reference: Option<&dyn Fn() -> BinTime> = Some(&reference);
        match self.writer.try_lock() {
            Some(mut writer) => self.windup_locked(&mut writer, Change::Windup { reference }),
            None => Windup::Busy,
        }
    }

    /// Retires the timekeeper for a successor (on another counter, when this
    /// one has gone wrong) and returns the uptime the successor starts at:
    /// [`Builder::start_at`] with it continues the timeline without a backward
    /// step. From the retire point on (at most two windup intervals ahead of
    /// now: a candidate's point, at the promise or a lead ahead) the retired
    /// timekeeper's time stands still at that uptime, so no read of it is ever
    /// later than a read of the successor that follows; windups and steps do
    /// nothing any more. A successor that should not run ahead meanwhile
    /// starts at the counter value where that time is due
    /// ([`Builder::start_count`]). Waits for a windup in progress; retiring
    /// twice returns the same uptime.
    ///
    /// ```
    /// use timehands::{SimCounter, Timekeeper, Windup};
    ///
    /// let failing = SimCounter::new(1_000_000);
    /// let old = Timekeeper::new(failing.clone())?;
    /// failing.advance(500);
    /// let retired_at = old.retire();
    /// failing.advance(1_000_000); // the retired timekeeper stands still
    /// assert_eq!(old.uptime(), retired_at);
    /// assert_eq!(old.windup(), Windup::Retired);
    ///
    /// let good = SimCounter::new(1_000_000_000);
    /// let successor = Timekeeper::builder(good.clone()).start_at(retired_at).build()?;
    /// good.advance(1);
    /// assert!(successor.uptime() > retired_at);
    /// # Ok::<(), timehands::Error>(())
    /// ```
    pub fn retire(&self) -> BinTime {
        let mut writer = self.writer.lock();
        loop {
            let (state, line) = self.current(|slot| slot.line());
            if state & RETIRED != 0 {
                let point = self.pending_switch.load(Ordering::Acquire) as u64;
                return line.uptime_at(point);
            }
            let delta = self.delta(line.base, self.counter.read());
            // As late as any reader may go without looking at the state (the
            // promise), and a lead ahead of now, so that readers rarely cancel;
            // within what the pending switch point can hold on 32-bit targets.
            // Where reads stand at the promise, the promise itself: the time
            // they stand at. A counter already past it is wound up to first,
            // so that the successor starts at the time now, not then.
            let promise = line.switch.saturating_add(self.interval);
            if self.follows_reference && delta >= promise {
                self.windup_locked(&mut writer, Change::Windup { reference: None });
                continue;
            }
            let point = if self.follows_reference {
                promise
            } else {
                promise.max(delta.saturating_add(self.lead))
            };
            if point > usize::MAX as u64 {
                // On a 32-bit target the pending switch point cannot hold a
                // point this far from an old base: a windup brings the base
                // up first (the interval fits: see `max_interval`).
                self.windup_locked(&mut writer, Change::Windup { reference: None });
                continue;
            }
            if self.commit(state, line.base, point, state | RETIRED) {
                return line.uptime_at(point);
            }
        }
    }

    /// Steps realtime (and only realtime) to `now`; uptime does not move. Waits
    /// for a windup in progress on another thread.
    pub fn set_realtime(&self, now: BinTime) {
        self.windup_locked(&mut self.writer.lock(), Change::Realtime(now));
    }

    /// Sets the boottime offset (realtime minus uptime) to `offset`: the same
    /// step as [`set_realtime`](Timekeeper::set_realtime), given as the offset,
    /// for a caller that tracks another clock's offset rather than its time.
    pub fn set_boottime(&self, offset: BinTime) {
        self.windup_locked(&mut self.writer.lock(), Change::Boottime(offset));
    }

    /// The counter's frequency as now known (a calibration's refinement),
    /// from the next windup on: a rate change like any other, continuous and
    /// taking effect at the next switch point. The frequency adjustment and
    /// any slew apply on top of it.
    ///
    /// # Errors
    /// [`Error::Frequency`] below 2 Hz.
    pub fn set_counter_frequency(&self, hz: u64) -> Result<(), Error> {
        if hz < 2 {
            return Err(Error::Frequency { hz });
        }
        self.writer.lock().discipline.nominal = nominal_scale(hz);
        Ok(())
    }

    /// Slews uptime and realtime by `ns` nanoseconds, as BSD `adjtime(2)`:
    /// time runs 500 ppm fast (or slow) from the next windup's switch point
    /// until the amount is used up (the last part, less than an interval at
    /// 500 ppm, at a lower rate over one interval), however far apart windups
    /// come, and never more than asked. A new request replaces what remains
    /// of the last one, and what had not run is returned (rounded to the
    /// nearest nanosecond). A slew already scheduled runs on up to the next switch point
    /// (at most two intervals ahead) and counts against the new request, so
    /// `adjtime(0)` stops a slew and then undoes that much.
    pub fn adjtime(&self, ns: i64) -> i64 {
        let mut writer = self.writer.lock();
        let line = self.current(|slot| slot.line()).1;
        let delta = self.delta(line.base, self.counter.read());
        // What has run since the switch point, which the remainder still
        // counts; before it, what is scheduled there and has not run yet.
        let unaccounted = match delta.checked_sub(line.switch) {
            Some(since) => line.slew().map_or(0, |slew| slew.over(since)),
            None => -((line.switch - delta) as i128 * writer.discipline.slew_before as i128),
        };
        writer.discipline.adjtime(ns, unaccounted)
    }

    /// Runs the counter `ppb` parts per billion fast (positive) or slow, from
    /// the next windup on.
    ///
    /// # Errors
    /// [`Error::FrequencyAdjustment`] outside ±500 000 ppb (500 ppm).
    pub fn set_frequency_adjustment(&self, ppb: i64) -> Result<(), Error> {
        self.writer.lock().discipline.set_frequency_adjustment(ppb)
    }

    /// Frees the writer lock in a `fork()`ed child whose parent's thread held
    /// it (a windup in progress): that thread does not exist in the child,
    /// which would otherwise never wind up again.
    ///
    /// # Safety
    /// Only in the child, before any of its threads winds up this timekeeper.
    #[cfg(feature = "std")]
    pub(crate) unsafe fn release_writer_after_fork(&self) {
        // SAFETY: the caller's promise: the child has no thread in a writer.
        unsafe { self.writer.release_after_fork() }
    }

    /// What the writer has done so far. Waits for a windup in progress.
    pub fn stats(&self) -> Stats {
        self.writer.lock().stats
    }

    /// The windup proper, holding the writer lock: builds the next hands
    /// (see [`next`](Timekeeper::next)) and publishes it, building it again
    /// from a new sample when readers cancel it.
    fn windup_locked(&self, writer: &mut WriterState, change: Change<'_>) -> Windup {
        let mut attempt = 0;
        loop {
            let (state, hands) = self.current(|slot| slot.hands());
            if state & RETIRED != 0 {
                return Windup::Retired;
            }
            let delta = self.delta(hands.line.base, self.counter.read());
            let next = self.next(writer, &hands, delta, change, attempt);
            if self.publish(state, hands.line.base, &next.hands, next.rate_switch) {
                writer.discipline = next.discipline;
                writer.stats.windups += 1;
                writer.stats.rate_changes += next.rate_switch.is_some() as u64;
                return Windup::Published;
            }
            writer.stats.cancelled += 1;
            attempt += 1;
        }
    }

    /// The hands that follows `hands` at `delta` counts from its base, for
    /// `change`, on the `attempt`th try.
    ///
    /// Before the switch point it is the same timeline from a later base.
    /// Past it, a windup schedules the next rate (the frequency in use and
    /// a slew plan for what remains) at a new switch point: the promise or a
    /// lead ahead, whichever is later, so that no reader has gone past it.
    /// It keeps the timeline as it is (and leaves the next rate to the next
    /// windup) for a realtime step, after readers cancelled it
    /// [`RATE_CHANGE_ATTEMPTS`] times, after a gap (see
    /// [`windup_following`](Timekeeper::windup_following)), and while a
    /// slew ends before that point (the hands has one rate before its
    /// switch).
    fn next(
        &self,
        writer: &WriterState,
        hands: &Hands,
        delta: u64,
        change: Change<'_>,
        attempt: u32,
    ) -> Next {
        let line = &hands.line;
        let mut discipline = writer.discipline;
        // A count behind the base (this CPU's counter a little behind) is
        // taken as the base itself, so that the skew is not kept.
        let base = line.base.wrapping_add(delta) & self.mask;
        let promise = line.switch.saturating_add(self.interval);
        let (now, gap) = match change {
            Change::Windup {
                reference: Some(reference),
            } if self.follows_reference && delta > promise => {
                let line_now = line.uptime_at(delta);
                let latest = reference()
                    .saturating_add(BinTime::from_counts(self.interval, discipline.nominal));
                let now = line_now.min(latest.max(line.uptime_at(promise)));
                (now, now != line_now)
            }
            _ => (line.uptime_at(delta), false),
        };
        let boottime = match change {
            Change::Realtime(realtime) => realtime.saturating_sub(now),
            Change::Boottime(offset) => offset,
            Change::Windup { .. } => hands.boottime,
        };
        let hands = |line: Line| Hands {
            line,
            boottime,
            coarse: coarse_of(now),
        };
        if delta < line.switch {
            // Nothing to account: the switch point stays where it was.
            return Next {
                hands: hands(Line {
                    base,
                    switch: line.switch - delta,
                    ..*line
                }),
                discipline,
                rate_switch: None,
            };
        }
        let reschedule =
            matches!(change, Change::Windup { .. }) && !gap && attempt < RATE_CHANGE_ATTEMPTS;
        let switch = promise.max(delta.saturating_add(self.lead));
        let one_rate = !line
            .slew_end()
            .is_some_and(|end| delta < end && end < switch);
        let switch = if reschedule && one_rate {
            switch
        } else {
            delta
        };
        // The slew that runs up to the new switch point (after a gap, up to
        // the promise: past it the line never ran) leaves the remainder.
        let ran_to = if gap { promise } else { switch };
        let slew = line.slew();
        discipline.slew_remaining -= slew.map_or(0, |slew| slew.over(ran_to - line.switch));
        // The slew in force at the new switch point, and its rest.
        let rest = slew.filter(|_| line.slewing_at(switch)).map(|slew| Slew {
            len: line.switch + slew.len - switch,
            ..slew
        });
        let scale_before = if line.slewing_at(delta) {
            line.scale_after
        } else {
            line.settled
        };
        discipline.slew_before = if line.slewing_at(delta) {
            slew.map_or(0, |slew| slew.part)
        } else {
            0
        };
        let (plan, settled) = if switch == delta {
            (rest, line.settled)
        } else {
            let settled = discipline.settled();
            let kept = rest
                .filter(|rest| settled == line.settled && rest.delivers(discipline.slew_remaining));
            (
                kept.or_else(|| discipline.plan(discipline.slew_remaining)),
                settled,
            )
        };
        let since = switch - delta;
        let next = Line {
            base,
            switch: since,
            scale_before,
            scale_after: plan.map_or(settled, |plan| settled.wrapping_add_signed(plan.part)),
            slew_len: plan.map_or(u64::MAX, |plan| plan.len),
            settled,
            at_switch: now.saturating_add(BinTime::from_counts(since, scale_before)),
        };
        // After its switch point the new hands runs at other rates than the
        // current one: a rate change, which readers past it may cancel.
        let changes_rate = plan != rest || settled != line.settled;
        Next {
            hands: hands(next),
            discipline,
            rate_switch: changes_rate.then_some(switch),
        }
    }

    /// Makes `next` the current hands. A hands that changes the rate at
    /// `rate_switch` (counts from `base`, the current hands' base) is published only if
    /// no reader has (or may have) evaluated the current hands at or past that
    /// point; otherwise the call returns `false` and nothing changes.
    fn publish(&self, state: usize, base: u64, next: &Hands, rate_switch: Option<u64>) -> bool {
        let slot = if self.hands == 1 {
            slot_index(state)
        } else {
            (slot_index(state) + 1) % self.hands
        };
        let next_ticket = next_ticket(ticket(state));
        let next_state = next_ticket << TICKET_SHIFT | slot;
        let in_place = slot == slot_index(state);
        let segments = next.segments(self.interval, self.mask);
        if !in_place {
            self.slots[slot].store(next, &segments, next_ticket);
        }
        match rate_switch {
            // The same function as the current hands everywhere: nothing a
            // reader computed can disagree with it.
            None => self.state.store(next_state, Ordering::Release),
            Some(switch) => {
                if !self.commit(state, base, switch, next_state) {
                    return false;
                }
            }
        }
        if in_place {
            self.slots[slot].store(next, &segments, next_ticket);
        }
        true
    }

    /// Moves the state from `state` to `next_state` for a candidate that
    /// departs from the current hands (whose base is `base`) at `switch`
    /// counts from that base, unless a reader has (or may have) evaluated the
    /// current hands at or past that point: then nothing changes, and `false`.
    fn commit(&self, state: usize, base: u64, switch: u64, next_state: usize) -> bool {
        let pending_switch = usize::try_from(switch).unwrap_or(usize::MAX);
        self.pending_switch.store(pending_switch, Ordering::Relaxed);
        if self.follows_reference {
            // No reader goes past the promise, and every switch point is at
            // or after it: no reader can have computed past `switch`.
            debug_assert!(
                switch
                    >= self
                        .current(|slot| slot.line())
                        .1
                        .switch
                        .saturating_add(self.interval)
            );
            self.state.store(next_state, Ordering::Release);
            return true;
        }
        self.state.store(state | PENDING, Ordering::Release);
        // Pairs with the fence in `past_promise`: our check below reads the
        // counter no earlier than any reader that did not see the pending flag,
        // so if none of them has passed the switch point, none can have
        // computed with the current hands past it.
        fence(Ordering::SeqCst);
        let check = self.delta(base, self.counter.read());
        let committed = check < switch
            && self
                .state
                .compare_exchange(
                    state | PENDING,
                    next_state,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok();
        if !committed {
            // Too late (readers may have gone past the switch point), or a
            // reader did and cancelled us: withdraw, unless it did.
            let _ = self.state.compare_exchange(
                state | PENDING,
                state,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
        committed
    }
}

/// The longest windup interval, in counts, for a counter of `mask`: an eighth
/// of its range (so that a late windup is told from a read behind the base),
/// and a quarter of `usize::MAX` (so that a switch or retire point, a promise
/// and a lead ahead of a fresh base, fits the pending switch point on 32-bit
/// targets).
pub(crate) fn max_interval(mask: u64) -> u64 {
    (mask / 8).min(usize::MAX as u64 / 4)
}

/// What a nanosecond read adds to uptime: the boottime offset for realtime.
#[inline(always)]
fn offset<const REALTIME: bool>(slot: &Slot) -> i64 {
    if REALTIME { slot.boottime_nanos() } else { 0 }
}

/// The coarse clock's value at `uptime`: 32.32 fixed point, rounded down (so
/// never ahead), saturating (136 years of uptime).
fn coarse_of(uptime: BinTime) -> u64 {
    match u32::try_from(uptime.sec()) {
        Ok(sec) => (sec as u64) << 32 | uptime.frac() >> 32,
        Err(_) if uptime.sec() < 0 => 0,
        Err(_) => u64::MAX,
    }
}

/// The uptime a coarse value stands for.
#[inline]
fn uncoarse(coarse: u64) -> BinTime {
    BinTime::new((coarse >> 32) as i64, coarse << 32)
}

impl<C: Counter> core::fmt::Debug for Timekeeper<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Timekeeper")
            .field("counter", &self.counter.name())
            .field("frequency", &self.counter.frequency())
            .field("hands", &self.hands)
            .field("uptime", &self.uptime())
            .field("stats", &self.stats())
            .finish()
    }
}
