//! The writer: windups, rate changes, realtime steps and retirement, one at
//! a time behind the writer lock.

use super::bintime::BinTime;
use super::counter::Counter;
use super::discipline::{Discipline, Slew};
use super::line::Line;
use super::slot::{Hands, coarse_of};
use super::state::{PENDING, RETIRED, TICKET_SHIFT, next_ticket, slot_index, ticket};
use super::stats::WriterState;
use super::sync::{Ordering, fence};
use super::timekeeper::Timekeeper;
use crate::Error;

/// How many times a windup tries to publish a rate change that readers keep
/// cancelling before it publishes the old rate and leaves the change for the next
/// windup.
const RATE_CHANGE_ATTEMPTS: u32 = 3;

/// What a pass of the writer does.
#[derive(Clone, Copy)]
pub(super) enum Change<'a> {
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

/// What a call to [`Timekeeper::windup`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

/// A hands the writer is to publish, with the writer's state once it is.
pub(super) struct Next {
    pub(super) hands: Hands,
    pub(super) discipline: Discipline,
    /// Where it changes the rate, in counts from the current hands' base.
    pub(super) rate_switch: Option<u64>,
}

impl<C: Counter> Timekeeper<C> {
    /// Publishes a new hands that continues the timeline from the current counter
    /// value, applying any frequency adjustment or slew from its switch point on.
    ///
    /// One writer at a time: a call that finds another writer busy returns
    /// [`Windup::Busy`] at once.
    pub fn windup(&self) -> Windup {
        self.try_writes()
            .map_or(Windup::Busy, |mut writes| writes.windup())
    }

    /// [`windup`](Timekeeper::windup) for a timekeeper that
    /// [follows a reference](crate::Builder::follows_reference), `reference`
    /// reading that clock's time on this one's uptime scale (it is read
    /// after the counter, so that a windup preempted in between never takes
    /// the delay for a gap).
    ///
    /// Where the counter has run more than an interval past the hands'
    /// promise (reads stand there), the line is trusted only as far as the
    /// reference agrees: the
    /// counter may have run through a gap the reference did not see (a
    /// suspend), or a stop long enough for the rate's error to add up. The
    /// reference is read between two counter reads (the tightest of three
    /// such brackets, so that a windup preempted in between carries no
    /// delay); a line outside that bracket starts the new hands at the
    /// bracket's nearest end (never further from the truth than the line
    /// was), or at the promise's time if that is later (a read may have
    /// returned it), and carries on from there. A gap the reference saw too
    /// (a paused VM: both jumped) is time that passed, and stays; an error
    /// the rate built up over it, ahead or behind, does not. On a timekeeper
    /// that does not follow a reference, the same as `windup`.
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
    /// // The windup resumes the time from the reference, but never before
    /// // where reads stood.
    /// tk.windup_following(|| BinTime::ZERO);
    /// counter.advance(5);
    /// assert_eq!(tk.uptime_nanos(), 1_000_005);
    /// # Ok::<(), timehands::Error>(())
    /// ```
    pub fn windup_following(&self, reference: impl Fn() -> BinTime) -> Windup {
        self.try_writes().map_or(Windup::Busy, |mut writes| {
            writes.windup_following(reference)
        })
    }

    /// Retires the timekeeper for a successor (on another counter, when this
    /// one has gone wrong) and returns the uptime the successor starts at:
    /// [`Builder::start_at`](crate::Builder::start_at) with it continues the timeline without a backward
    /// step. From the retire point on (at most two windup intervals ahead of
    /// now: a candidate's point, at the promise or a lead ahead) the retired
    /// timekeeper's time stands still at that uptime, so no read of it is ever
    /// later than a read of the successor that follows; windups and steps do
    /// nothing any more. A successor that should not run ahead meanwhile
    /// starts at the counter value where that time is due
    /// ([`Builder::start_count`](crate::Builder::start_count)). Waits for a windup in progress; retiring
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
        self.retire_locked(&mut self.writer.lock())
    }

    /// [`retire`](Timekeeper::retire) with the writer lock held (see
    /// [`Writes::retire`](super::writes::Writes)).
    pub(super) fn retire_locked(&self, writer: &mut WriterState) -> BinTime {
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
                self.windup_locked(writer, Change::Windup { reference: None });
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
                self.windup_locked(writer, Change::Windup { reference: None });
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
        self.writes().set_realtime(now);
    }

    /// Sets the boottime offset (realtime minus uptime) to `offset`: the same
    /// step as [`set_realtime`](Timekeeper::set_realtime), given as the offset,
    /// for a caller that tracks another clock's offset rather than its time.
    pub fn set_boottime(&self, offset: BinTime) {
        self.writes().set_boottime(offset);
    }

    /// The counter's frequency as now known (a calibration's refinement),
    /// from the next windup on: a rate change like any other, continuous and
    /// taking effect at the next switch point. The frequency adjustment and
    /// any slew apply on top of it.
    ///
    /// # Errors
    /// [`Error::Frequency`] below 2 Hz.
    pub fn set_counter_frequency(&self, hz: u64) -> Result<(), Error> {
        self.writes().set_counter_frequency(hz)
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
        self.writes().adjtime(ns)
    }

    /// The rate at which [`adjtime`](Timekeeper::adjtime) slews, from the
    /// next windup's plan on: BSD's 500 ppm (500 000 ppb) unless set. A
    /// timekeeper that follows a clock someone else steers (as the host
    /// clock follows the kernel's) closes a phase error faster: up to
    /// 10^9 ppb, time twice as fast or, slowing down, standing still (a
    /// slow-down never runs time backwards).
    ///
    /// ```
    /// use timehands::{SimCounter, Timekeeper};
    ///
    /// let counter = SimCounter::new(1_000_000_000);
    /// let tk = Timekeeper::new(counter.clone())?;
    /// tk.set_slew_rate(100_000_000)?; // 10 %
    /// tk.adjtime(-5_000_000); // 5 ms ahead: run 10 % slow for 50 ms
    /// for _ in 0..100 {
    ///     counter.advance(1_000_000);
    ///     tk.windup();
    /// }
    /// assert_eq!(tk.uptime_nanos(), 95_000_000);
    /// # Ok::<(), timehands::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::SlewRate`] outside 1 to 10^9 ppb.
    pub fn set_slew_rate(&self, ppb: i64) -> Result<(), Error> {
        self.writes().set_slew_rate(ppb)
    }

    /// Runs the counter `ppb` parts per billion fast (positive) or slow, from
    /// the next windup on.
    ///
    /// # Errors
    /// [`Error::FrequencyAdjustment`] outside ±500 000 ppb (500 ppm).
    pub fn set_frequency_adjustment(&self, ppb: i64) -> Result<(), Error> {
        let ppt = ppb
            .checked_mul(1000)
            .ok_or(Error::FrequencyAdjustment { ppb })?;
        self.set_frequency_adjustment_ppt(ppt)
            .map_err(|_| Error::FrequencyAdjustment { ppb })
    }

    /// Runs the counter `ppt` parts per trillion (thousandths of a ppb)
    /// fast or slow, from the next windup on: as
    /// [`set_frequency_adjustment`](Timekeeper::set_frequency_adjustment),
    /// finer, for a discipline whose estimate is finer than a ppb (a ppb
    /// held over a five-minute holdover is 300 ns). The scale's own
    /// resolution is 2^-64 s a count: at 1 GHz, 54 ppt.
    ///
    /// # Errors
    /// [`Error::FrequencyAdjustment`] outside ±500 ppm, with the whole ppb
    /// beyond it.
    pub fn set_frequency_adjustment_ppt(&self, ppt: i64) -> Result<(), Error> {
        self.writer
            .lock()
            .discipline
            .set_frequency_adjustment_ppt(ppt)
    }

    /// The frequency adjustment set, in ppt: in force from the next
    /// windup's switch point on.
    pub(super) fn frequency_adjustment_ppt(&self) -> i64 {
        self.writer.lock().discipline.frequency_ppt
    }

    /// Counts from `count`, one just read, to the switch point from which
    /// a rate set now runs, if the next windup comes on time (see
    /// [`next`](Timekeeper::next): the promise or a lead past the windup,
    /// whichever is later).
    pub(super) fn counts_to_next_rate(&self, count: u64) -> u64 {
        let line = self.current(|slot| slot.line()).1;
        let delta = self.delta(line.base, count);
        let promise = line.switch.saturating_add(self.interval);
        let switch = promise.max(self.interval.max(delta).saturating_add(self.lead));
        switch.saturating_sub(delta)
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

    /// The windup proper, holding the writer lock: builds the next hands
    /// (see [`next`](Timekeeper::next)) and publishes it, building it again
    /// from a new sample when readers cancel it.
    pub(super) fn windup_locked(&self, writer: &mut WriterState, change: Change<'_>) -> Windup {
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
    pub(super) fn next(
        &self,
        writer: &WriterState,
        hands: &Hands,
        delta: u64,
        change: Change<'_>,
        attempt: u32,
    ) -> Next {
        let line = &hands.line;
        // A count behind the base was clamped to it (`delta`).
        debug_assert!(delta <= self.behind);
        let mut discipline = writer.discipline;
        // A count behind the base (this CPU's counter a little behind) is
        // taken as the base itself, so that the skew is not kept.
        let base = line.base.wrapping_add(delta) & self.mask;
        let promise = line.switch.saturating_add(self.interval);
        let (now, gap) = match change {
            Change::Windup {
                reference: Some(reference),
            } if self.follows_reference && delta > promise.saturating_add(self.interval) => {
                // More than an interval past the promise (reads stood there)
                // the line is trusted only as far as the reference agrees: a
                // counter that ran through a suspend, or a stop long enough
                // for a rate error to show, resumes on the reference, but
                // never before where reads stood (the promise's time). Up to
                // there the line is what reads use anyway, and a windup that
                // is merely late keeps it (and its slews and rate changes).
                // The line is moved to the nearest time the reference
                // allows (its bracket), which never takes it further from
                // the truth than it was: an error bound that held for the
                // line holds after.
                let line_now = line.uptime_at(delta);
                let (at_sample, half_width) =
                    self.reference_at_sample(reference, line.base, delta, discipline.nominal);
                let now = line_now
                    .max(at_sample.saturating_sub(half_width))
                    .min(at_sample.saturating_add(half_width))
                    .max(line.uptime_at(promise));
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
        // Continuity: the new line starts where the old one stands (or, past
        // a gap, no earlier than where reads stood), and a rate change waits
        // for the old promise.
        debug_assert_eq!(next.uptime_at(0), now);
        debug_assert!(gap || now == line.uptime_at(delta));
        debug_assert!(!changes_rate || switch >= promise);
        Next {
            hands: hands(next),
            discipline,
            rate_switch: changes_rate.then_some(switch),
        }
    }

    /// The `reference`'s time at the counter sample `delta` counts from
    /// `base`, and within how much of the truth it is. The reference is read
    /// between two counter reads (the tightest of three such brackets): its
    /// time is taken at the bracket's middle, within half its width, and
    /// brought back to the sample at `scale`. A windup preempted between the
    /// sample and the reference, or inside a bracket, carries no delay.
    fn reference_at_sample(
        &self,
        reference: &dyn Fn() -> BinTime,
        base: u64,
        delta: u64,
        scale: u64,
    ) -> (BinTime, BinTime) {
        let mut tightest: Option<(u64, BinTime, u64)> = None;
        for _ in 0..3 {
            let before = self.delta(base, self.counter.read()).max(delta);
            let at = reference();
            let width = self.delta(base, self.counter.read()).max(before) - before;
            if tightest.is_none_or(|(_, _, tightest)| width < tightest) {
                tightest = Some((before, at, width));
            }
            if width == 0 {
                break;
            }
        }
        let (before, at, width) = tightest.expect("three brackets");
        let middle = before + width / 2;
        (
            at.saturating_sub(BinTime::from_counts(middle - delta, scale)),
            BinTime::from_counts(width.div_ceil(2), scale),
        )
    }

    /// Makes `next` the current hands. A hands that changes the rate at
    /// `rate_switch` (counts from `base`, the current hands' base) is published only if
    /// no reader has (or may have) evaluated the current hands at or past that
    /// point; otherwise the call returns `false` and nothing changes.
    pub(super) fn publish(
        &self,
        state: usize,
        base: u64,
        next: &Hands,
        rate_switch: Option<u64>,
    ) -> bool {
        let slot = if self.ring == 1 {
            slot_index(state)
        } else {
            (slot_index(state) + 1) % self.ring
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
    pub(super) fn commit(&self, state: usize, base: u64, switch: u64, next_state: usize) -> bool {
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
