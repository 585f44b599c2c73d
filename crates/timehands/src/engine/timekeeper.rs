//! The timekeeper and its readers: a read takes the current hands, reads
//! the counter and evaluates, never locking and never waiting.

use super::bintime::BinTime;
use super::counter::Counter;
use super::line::Line;
use super::lock::WriterLock;
#[cfg(feature = "std")]
use super::nanos::{NanoSegment, floor_nanos_signed};
use super::nanos::{floor_nanos, realtime_nanos};
use super::slot::{Slot, offset, uncoarse};
use super::state::{MAX_HANDS, PENDING, RETIRED, slot_index, ticket};
use super::stats::{Stats, WriterState};
use super::sync::{AtomicUsize, Ordering, fence, relax};

/// Whether a read found a windup due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// No: the hands read is less than a windup interval old.
    No,
    /// Yes: it is an interval old or older, or, where no reference is
    /// followed, the counter is more than an interval behind its base (it
    /// went back).
    Yes,
    /// Yes, and the read stood: on a timekeeper that
    /// [follows a reference](crate::Builder::follows_reference), at the
    /// hands' promise (a read past it), or at the base (a counter more than
    /// an interval behind it: it went back, and the line no longer says the
    /// time). Past the promise a windup, and a read after it, give the
    /// time; behind the base no windup moves the base, and the reference
    /// gives it until the counter is retired (see
    /// [`went_back`](Timekeeper::went_back)).
    Standing,
}

/// A hands as [`Timekeeper::promised`] gives it.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Promised {
    /// The line, the longest segment first.
    pub(crate) segments: [NanoSegment; 3],
    /// Realtime − uptime, in whole ns rounded down.
    pub(crate) realtime_nanos: i64,
    /// The counter reading the hands starts at.
    pub(crate) base: u64,
    /// Uptime there, ns.
    pub(crate) base_nanos: u64,
    /// Uptime where the segments end, ns.
    pub(crate) end_nanos: u64,
    /// Uptime where a windup falls due, ns: a windup interval past the
    /// base.
    pub(crate) due_nanos: u64,
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
    pub(super) slots: [Slot; MAX_HANDS],
    /// Ticket and slot of the current hands, and the pending flag.
    pub(super) state: AtomicUsize,
    /// The pending candidate's switch point, in counts from the current hands'
    /// base, rounded down to `usize::MAX` on 32-bit targets (which only makes
    /// readers cancel sooner). Once retired, the retire point.
    pub(super) pending_switch: AtomicUsize,
    pub(super) writer: WriterLock<WriterState>,
    /// How many slots of the ring are in use: 1 to [`MAX_HANDS`].
    pub(super) ring: usize,
    pub(super) mask: u64,
    /// Deltas above this are reads behind the base: the top eighth of the range.
    pub(super) behind: u64,
    /// Counts in one windup interval: how long past its switch point a hands
    /// promises its rate.
    pub(super) interval: u64,
    /// Counts from a windup's sample to its switch point, at the least.
    pub(super) lead: u64,
    /// Whether reads stand at the promise: see [`Builder::follows_reference`](crate::Builder::follows_reference).
    pub(super) follows_reference: bool,
    pub(super) counter: C,
}

impl<C: Counter> Timekeeper<C> {
    /// The counter.
    pub fn counter(&self) -> &C {
        &self.counter
    }

    /// Counts from `base` to `count`. A count in the top eighth of the range
    /// is a read behind the base (another CPU's counter a little behind, a
    /// counter reset): it is clamped to the base, never taken as a huge delta.
    #[inline]
    pub(super) fn delta(&self, base: u64, count: u64) -> u64 {
        let delta = count.wrapping_sub(base) & self.mask;
        if delta > self.behind { 0 } else { delta }
    }

    /// What `load` reads from the current hands, and the state word it was
    /// found under.
    #[inline]
    pub(super) fn current<R>(&self, load: impl Fn(&Slot) -> R) -> (usize, R) {
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
    pub(super) fn read_with<R>(
        &self,
        sample: impl Fn(&C) -> u64,
        also: impl Fn(&Slot) -> R,
    ) -> (BinTime, Due, R) {
        self.read_at(sample(&self.counter), sample, also)
    }

    /// [`read_with`](Timekeeper::read_with) of the counter reading `count`,
    /// taken before this call; `sample` reads again where the protocol asks.
    #[inline]
    pub(super) fn read_at<R>(
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
    pub(super) fn read_past_promise<R>(
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
    /// that went back (a reset, a hypervisor's TSC moved back, an
    /// emulator's counter that follows the wall clock), not a few cycles of
    /// skew between CPUs: its reads all clamp to the base, and windups (and
    /// the host's watchdog with them) must go on all the same. On a
    /// timekeeper that follows a reference such a read stands: the base's
    /// time is as old as the last windup, which no bound on the line covers.
    #[inline]
    pub(super) fn due(&self, base: u64, count: u64) -> Due {
        let ahead = count.wrapping_sub(base) & self.mask;
        if ahead <= self.behind {
            if ahead >= self.interval {
                Due::Yes
            } else {
                Due::No
            }
        } else if self.mask - ahead < self.interval {
            Due::No
        } else if self.follows_reference {
            Due::Standing
        } else {
            Due::Yes
        }
    }

    /// Whether the counter went back: read after the current hands' base
    /// was loaded, it is more than an interval behind that base. A counter
    /// that runs forward never is (the base was an earlier reading of it,
    /// another CPU's at most a few counts apart); a read that merely found
    /// its count behind may have been preempted between its counter read
    /// and its load of a hands published meanwhile.
    pub(crate) fn went_back(&self) -> Option<u64> {
        let base = self.current(|slot| slot.line().base).1;
        let count = self.counter.read();
        let behind = base.wrapping_sub(count) & self.mask;
        (behind <= self.mask - self.behind && behind > self.interval).then_some(behind)
    }

    /// The slow path of a read whose counter is past its hands' promise: may it
    /// use these hands, and at what delta? It may if they are still current and
    /// no pending candidate switches rate at or before its counter reading; a
    /// candidate that does is cancelled here, so it can never be published. On
    /// a retired timekeeper the delta is clamped to the retire point. `None`:
    /// read again.
    #[cold]
    pub(super) fn past_promise(&self, seen: usize, delta: u64) -> Option<u64> {
        // Pairs with the fence in `commit`: either the writer's check of the
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
    /// see the `nanos` module (the other segment, where a rate change splits
    /// the line, inline too). Counts neither covers go the long way, out of
    /// line.
    #[inline(always)]
    pub(super) fn nanos_and_due<const REALTIME: bool>(
        &self,
        sample: impl Fn(&C) -> u64,
    ) -> (u64, Due) {
        let count = sample(&self.counter);
        match self.nanos_at::<REALTIME>(count) {
            Some(ns) => (ns, Due::No),
            None => self.nanos_and_due_slow::<REALTIME>(count, sample),
        }
    }

    /// The nanoseconds at `count` (a reading taken before this call), if the
    /// current hands' first segment covers it, or its other one (a line a
    /// rate change splits): the whole of a read's work after the counter in
    /// the common case. Otherwise the caller goes on
    /// with [`nanos_and_due_slow`](Timekeeper::nanos_and_due_slow).
    #[inline(always)]
    pub(crate) fn nanos_at<const REALTIME: bool>(&self, count: u64) -> Option<u64> {
        let (_, (segment, boottime)) =
            self.current(|slot| (slot.segment.load(), offset::<REALTIME>(slot)));
        match segment.nanos_at(count) {
            // No overflow: segments are built only where realtime fits a u64.
            Some(ns) => Some(ns.wrapping_add_signed(boottime)),
            None => self.other_nanos_at::<REALTIME>(count),
        }
    }

    /// [`nanos_at`](Timekeeper::nanos_at) in the current hands' other
    /// segment: where a rate change (a steering's) splits the line up to the
    /// due point in two, a read in the shorter piece costs the same read,
    /// from the slot's second cache line, and calls nothing. Any hands'
    /// segment gives the same time for a count it covers: hands agree up to
    /// the promise, and segments end at the due point.
    #[inline(always)]
    fn other_nanos_at<const REALTIME: bool>(&self, count: u64) -> Option<u64> {
        let (_, (segment, boottime)) =
            self.current(|slot| (slot.other_segment.load(), offset::<REALTIME>(slot)));
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
        if let Some(ns) = self.other_nanos_at::<REALTIME>(count) {
            return (ns, Due::No);
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
    pub(super) fn read_and_due(&self, sample: impl Fn(&C) -> u64) -> (BinTime, bool) {
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

    /// Realtime minus uptime, as the current hands has it (see
    /// [`set_boottime`](Timekeeper::set_boottime)).
    ///
    /// ```
    /// use timehands::{BinTime, SimCounter, Timekeeper};
    ///
    /// let tk = Timekeeper::new(SimCounter::new(1_000_000))?;
    /// tk.set_boottime(BinTime::from_nanos(1_700_000_000_000_000_000));
    /// assert_eq!(tk.boottime(), BinTime::from_nanos(1_700_000_000_000_000_000));
    /// # Ok::<(), timehands::Error>(())
    /// ```
    #[inline]
    pub fn boottime(&self) -> BinTime {
        self.current(|slot| slot.boottime()).1
    }

    /// The offset a Realtime read adds to uptime, in whole nanoseconds, as
    /// the current hands has it (the host clock's coarse Realtime adds it to
    /// its coarse uptime, as its precise Realtime does).
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) fn realtime_offset_nanos(&self) -> i64 {
        self.current(offset::<true>).1
    }

    /// The current hands as a reader without this timekeeper takes it (one
    /// in another process, through the keeper's page): its line in
    /// nanosecond segments, the longest first, none where Realtime would
    /// not fit a `u64`, up to its promise and an interval past it at its
    /// last rate (such a reader cannot stand at the promise: it reads on,
    /// as far as a late windup may come); Realtime's offset (whole ns,
    /// rounded down); and the times at the base and at the end, in ns.
    #[cfg(feature = "std")]
    pub(crate) fn promised(&self) -> Promised {
        let hands = self.current(|slot| slot.hands()).1;
        let end = hands
            .line
            .switch
            .saturating_add(self.interval)
            .saturating_add(self.interval);
        let realtime = floor_nanos_signed(hands.boottime);
        Promised {
            segments: realtime.map_or([NanoSegment::NONE; 3], |offset| {
                hands.line.pieces(end, self.mask, offset)
            }),
            realtime_nanos: realtime.unwrap_or(0),
            base: hands.line.base,
            base_nanos: floor_nanos(hands.line.uptime_at(0)),
            end_nanos: floor_nanos(hands.line.uptime_at(end)),
            due_nanos: floor_nanos(hands.line.uptime_at(self.interval)),
        }
    }

    /// What the writer has done so far. Waits for a windup in progress.
    pub fn stats(&self) -> Stats {
        self.writer.lock().stats
    }
}

impl<C: Counter> core::fmt::Debug for Timekeeper<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Timekeeper")
            .field("counter", &self.counter.name())
            .field("frequency", &self.counter.frequency())
            .field("hands", &self.ring)
            .field("uptime", &self.uptime())
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use core::time::Duration;

    use super::Due;
    use crate::{SimCounter, Timekeeper};

    /// A rate change splits the line up to the due point at its switch
    /// point: reads in either piece take the fast path (`nanos_at` answers,
    /// also where the first segment does not cover the count), and give what
    /// the exact timeline gives.
    #[test]
    fn both_pieces_of_a_split_line_are_read_fast() {
        let mut split = 0;
        for later in (100_000..1_000_000).step_by(100_000) {
            let counter = SimCounter::new(1_000_000_000);
            let tk = Timekeeper::builder(counter.clone())
                .windup_interval(Duration::from_millis(1))
                .build()
                .expect("a valid timekeeper");
            tk.set_frequency_adjustment(100_000).expect("100 ppm");
            // Past the switch point: the rate change is scheduled ahead.
            counter.advance(1_500_000);
            tk.windup();
            counter.advance(later);
            tk.windup();
            let base = counter.value();
            let first = tk.current(|slot| slot.segment.load()).1;
            for step in (0..1_000_000).step_by(10_000) {
                counter.set(base + step);
                let fast = tk.nanos_at::<false>(base + step);
                assert_eq!(
                    fast,
                    Some(tk.uptime_nanos()),
                    "{later}, {step} past the base"
                );
                split += first.nanos_at(base + step).is_none() as u32;
            }
        }
        assert!(split > 0, "no window had a rate change in it");
    }

    /// A counter gone back more than an interval (a hypervisor's TSC moved
    /// back, an emulator's counter that follows the wall clock stepped
    /// back) reads the base's time, as old as the last windup: on a
    /// timekeeper that follows a reference the read stands, so that the
    /// host asks its reference rather than hand out that time; elsewhere
    /// it is only due. A few counts behind (another CPU's skew) are neither,
    /// and only the first says the counter went back.
    #[test]
    fn a_counter_gone_back_stands_where_the_reference_is_followed() {
        for follows in [true, false] {
            let counter = SimCounter::new(1_000_000_000);
            let tk = Timekeeper::builder(counter.clone())
                .windup_interval(Duration::from_millis(1))
                .follows_reference(follows)
                .build()
                .expect("a valid timekeeper");
            counter.advance(5_000_000);
            tk.windup();
            let base = counter.value();
            let at_base = tk.uptime_nanos();
            counter.set(base + 500_000);
            assert_eq!(tk.went_back(), None, "ahead");
            counter.set(base - 40);
            assert_eq!(
                tk.nanos_and_due_slow::<false>(base - 40, |c| c.value()),
                (at_base, Due::No)
            );
            assert_eq!(tk.went_back(), None, "a few counts of skew");
            counter.set(base - 1_000_001);
            let gone_back = if follows { Due::Standing } else { Due::Yes };
            assert_eq!(
                tk.nanos_and_due_slow::<false>(base - 1_000_001, |c| c.value()),
                (at_base, gone_back),
                "follows a reference: {follows}"
            );
            assert_eq!(tk.went_back(), Some(1_000_001));
        }
    }
}
