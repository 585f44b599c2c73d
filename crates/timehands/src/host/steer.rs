//! Steering the host clock to the kernel's CLOCK_MONOTONIC.
//!
//! At every windup the kernel's Realtime and Boottime offsets are followed
//! (see `follow_offsets`); then two measurements, two corrections, every
//! [`STEER_INTERVAL`] (and at once after a windup followed a change of the
//! kernel's rate):
//!
//! - **rate**: the counter against CLOCK_MONOTONIC over a long baseline (the
//!   tightest of three brackets `counter, clock_gettime, counter` at each end),
//!   which gives the counter's frequency as the kernel sees it, NTP's trim
//!   included. It becomes the engine's counter frequency (as FreeBSD refines
//!   `tc_frequency`), a rate change at the next switch point. The baseline
//!   slides (16 to 32 s once warm) so that it follows NTP's small changes; a
//!   bracket of 20 ns over 16 s is a rate known to about a part per billion.
//!   But the kernel's clock also changes rate at once, and by a lot: chrony
//!   slews at up to 8.3 % through the tick length, `adjtimex --tick` moves it
//!   by up to 10 %, a PTP daemon steps the frequency by hundreds of ppm. So
//!   every windup looks for a change before it winds up
//!   ([`Steering::follow_rate_change`]), and the hands it publishes runs at
//!   the new rate from its switch point (rather than an average of the old
//!   rate and the new that takes the baseline's length to unwind). Where
//!   the kernel says its rate (Linux's `adjtimex`, tick and frequency,
//!   which any process may read), a change is taken at its word. Elsewhere
//!   a pair taken then gives the rate since the last steering (4 ms or
//!   more) and since one about a second ago; where either is further from
//!   the rate in use than the two measurements' bounds allow, the kernel
//!   changed its rate: the baseline starts again at that pair, and the rate
//!   measured since it is the one in use. A steering looks for a change the
//!   same way.
//! - **phase**: our time against CLOCK_MONOTONIC (the tightest of three
//!   brackets `ours, clock_gettime, ours`); the difference is slewed away with
//!   [`Timekeeper::adjtime`](crate::Timekeeper::adjtime), never stepping. We
//!   follow a clock that someone else steers, not UTC, so the slew is not
//!   held to 500 ppm: it closes the gap within about [`CATCH_UP`], running
//!   fast as much as that takes, and running slow as far as standing still
//!   (never back). The rate is not estimated from our own time: slew
//!   already scheduled up to the next switch point would bias it.
//!
//! Before those, the watchdog (`watchdog.rs`) samples the counter against
//! CLOCK_MONOTONIC_RAW and the time suspended (`watch_pair`) and fails the
//! clock over to the kernel's counter when the counter misbehaves.
//!
//! The steering acts on the timekeeper (its frequency, its slews) and
//! returns what it found ([`Findings`]): the offsets the kernel's clocks moved
//! to, the phase it measured, a counter to retire; the host clock keeps them
//! (the error bound that [`getres`](crate::getres) reports is the last
//! measured offset plus half its bracket) and fails over.

use std::time::Duration;

use super::brackets::{
    MIN_BASELINE, Pair, offset_from_monotonic, offset_on_running_clock, pair, watch_pair,
};
use super::counter::HostCounter;
use super::kernel_clocks::{KernelClock, KernelClocks};
use super::watchdog::{self, Misbehaviour};
use crate::engine::Writes;
use crate::engine::discipline::{MAX_PPB, MAX_SLEW_PPB};
use crate::{Counter, Timekeeper};

/// The least time between two steerings.
pub(super) const STEER_INTERVAL: Duration = Duration::from_millis(10);
/// The baseline's reference moves forward once it is this old.
const SLIDE_AFTER: Duration = Duration::from_secs(16);
/// How soon a phase error is closed, at the least: the slew runs at the
/// rate that closes it in this time (500 ppm at the least).
pub(crate) const CATCH_UP: Duration = Duration::from_millis(10);
/// How old the pair is that the rate of the last second is measured from.
const RECENT: Duration = Duration::from_secs(1);
/// The most a kernel changes its clock's rate by, in ppb: Linux's tick by
/// 10 % and its frequency by 500 ppm (other kernels slew less).
const MAX_KERNEL_RATE_PPB: u64 = 100_500_000;
/// The shortest baseline a change of the kernel's rate is looked for over:
/// a windup interval after the last steering, less a millisecond of a late
/// windup. A TSC's bracket of some tens of nanoseconds is some ppm there,
/// against the hundreds of ppm to 10 % of the changes looked for.
const CHANGE_BASELINE: Duration = Duration::from_millis(4);
/// A change of the kernel's rate is one further from the rate in use than
/// twice the two measurements' bounds, plus this, in ppb: the kernel's own
/// nanosecond roundings.
const CHANGE_FLOOR_PPB: u64 = 100;
/// The steering state, kept under the host clock's steering lock.
pub(crate) struct Steering {
    /// The counter frequency the engine uses now, in Hz.
    hz: u64,
    /// The frequency the clock started with.
    initial_hz: u64,
    /// How sure the frequency in use is, once it has been measured.
    uncertainty_ppb: Option<u64>,
    /// The baseline's reference, and the next one.
    anchor: Option<Pair>,
    next_anchor: Option<Pair>,
    /// CLOCK_MONOTONIC at the last steering.
    last_steer: u64,
    /// How fast changes of the kernel's rate that windups followed since
    /// the last steering may make the clock drift, in ppb (see
    /// [`RateChange::ppb`]): the next steering is due at once, to measure
    /// the phase they left, state its bound and slew it away; and the clock
    /// runs at the old rate until the new one takes over at the switch
    /// point.
    followed_change_ppb: Option<u64>,
    /// CLOCK_MONOTONIC when the kernel was last asked its rate.
    asked_at: Option<u64>,
    /// REALTIME − MONOTONIC as last given to the engine.
    realtime_offset: Option<Offset>,
    /// BOOTTIME − MONOTONIC as last given to the host clock.
    boottime_offset: Option<Offset>,
    /// The watchdog's first sample and its last (see `watch_pair`).
    watch_anchor: Option<Pair>,
    watched: Option<Pair>,
    /// The last steering's pair, and one about [`RECENT`] old: the rate
    /// since each tells a change of the kernel's rate.
    last: Option<Pair>,
    recent: Option<Pair>,
    /// Phase measurements so far.
    steerings: u64,
    /// Changes of the kernel's rate found so far.
    rate_changes: u64,
    /// The rate the kernel last said its clock runs at, ppb from nominal.
    kernel_rate_ppb: Option<i64>,
    /// What the watchdog found wrong at a windup that could not fail over
    /// (a read, which may run in a signal handler): the next windup that
    /// can, does.
    pub(crate) misbehaving: Option<Misbehaviour>,
}

/// An offset of a kernel clock from CLOCK_MONOTONIC, in ns, as measured:
/// within half its bracket's `width` of the truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Offset {
    pub(crate) ns: i64,
    pub(crate) width: u64,
}

impl Offset {
    /// Whether `other` cannot be the same offset: the two brackets do not
    /// overlap. Neither noise nor a first measurement preempted wide (whose
    /// truth lies anywhere in its bracket) makes a move.
    fn moved_to(&self, other: &Offset) -> bool {
        self.ns.abs_diff(other.ns) > (self.width + other.width) / 2
    }
}

/// How many brackets an offset is recorded from, the tightest kept.
const RECORD_BRACKETS: usize = 10;

/// The offset of the kernel clock `id` from CLOCK_MONOTONIC if it moved from
/// the `known` one by more than the two measurements can tell, recording it:
/// so that noise never moves a clock, backwards or forwards. One bracket at
/// each windup; a move is confirmed, and recorded, with the tightest of
/// [`RECORD_BRACKETS`], so that a bracket preempted wide is neither a move
/// nor (but for a machine that preempts every one) a recorded offset.
fn moved_offset(
    known: &mut Option<Offset>,
    kernel: &dyn KernelClocks,
    id: KernelClock,
) -> Option<Offset> {
    let measure = |brackets| {
        let (ns, width) = offset_from_monotonic(kernel, id, brackets);
        Offset { ns, width }
    };
    let moved = |known: &Option<Offset>, measured: &Offset| {
        known.is_none_or(|known| known.moved_to(measured))
    };
    if !moved(known, &measure(1)) {
        return None;
    }
    let confirmed = measure(RECORD_BRACKETS);
    if !moved(known, &confirmed) {
        return None;
    }
    *known = Some(confirmed);
    Some(confirmed)
}

impl Steering {
    /// Steering of a counter at `hz` (known to `uncertainty_ppb`, if it was
    /// measured), measured from `anchor` on if the clock took a pair of its
    /// counter at startup.
    pub(crate) fn new(hz: u64, uncertainty_ppb: Option<u64>, anchor: Option<Pair>) -> Steering {
        Steering {
            hz,
            initial_hz: hz,
            uncertainty_ppb,
            anchor,
            next_anchor: anchor,
            last_steer: 0,
            followed_change_ppb: None,
            misbehaving: None,
            asked_at: None,
            realtime_offset: None,
            boottime_offset: None,
            watch_anchor: None,
            watched: None,
            last: None,
            recent: None,
            steerings: 0,
            rate_changes: 0,
            kernel_rate_ppb: None,
        }
    }

    /// Whether the rate has a baseline's first end (test access).
    #[cfg(test)]
    pub(crate) fn has_rate_anchor(&self) -> bool {
        self.anchor.is_some()
    }

    /// Makes the Boottime offset known `ns` less than it is, as it was before
    /// a suspend of `ns` (test access).
    #[cfg(test)]
    pub(crate) fn pretend_suspended(&mut self, ns: i64) {
        if let Some(known) = &mut self.boottime_offset {
            known.ns -= ns;
        }
    }

    /// The counter frequency in use, in Hz.
    pub(crate) fn frequency_hz(&self) -> u64 {
        self.hz
    }

    /// How sure the frequency in use is, in ppb, once measured.
    pub(crate) fn uncertainty_ppb(&self) -> Option<u64> {
        self.uncertainty_ppb
    }

    /// How fast the error can grow on the frequency in use, in ppb: its
    /// measured uncertainty, or [`STATED_PPB`] for a frequency only stated.
    pub(crate) fn rate_bound_ppb(&self) -> u64 {
        self.uncertainty_ppb.unwrap_or(STATED_PPB)
    }

    /// How many times the phase was measured (and corrected).
    pub(crate) fn steerings(&self) -> u64 {
        self.steerings
    }

    /// How many changes of the kernel's rate the steering found.
    pub(crate) fn rate_changes(&self) -> u64 {
        self.rate_changes
    }

    /// How far the frequency in use is from the one the clock started with,
    /// in ppb.
    pub(crate) fn correction_ppb(&self) -> i64 {
        ((self.hz as f64 / self.initial_hz as f64 - 1.0) * 1e9).round() as i64
    }

    /// Follows the kernel's Realtime and Boottime offsets, then measures and
    /// corrects rate and phase of the timekeeper `writes` holds the writer
    /// lock of against `kernel`'s clocks,
    /// unless the last steering is too recent (and no change of the kernel's
    /// rate was followed since) or the watchdog finds the counter
    /// misbehaving; returns what it found.
    pub(crate) fn steer(
        &mut self,
        writes: &mut Writes<'_, HostCounter>,
        kernel: &dyn KernelClocks,
    ) -> Findings {
        let timekeeper = writes.timekeeper();
        // At every windup: a `settimeofday` shows in Realtime one windup on.
        let mut findings = self.follow_offsets(kernel);
        let now = kernel.nanos(KernelClock::Monotonic);
        let due = now.saturating_sub(self.last_steer) >= STEER_INTERVAL.as_nanos() as u64;
        if !due && self.followed_change_ppb.is_none() {
            return findings;
        }
        self.last_steer = now;
        if let Some(why) = self.watch(kernel, timekeeper) {
            findings.misbehaviour = Some(why);
            return findings;
        }
        let current = pair(kernel, || timekeeper.counter().read());
        // Until the next measurement the clock runs on the old frequency up
        // to the switch point and on the new one after: the bound grows at
        // the worse of the two (the old one off by a change of the kernel's
        // rate a windup followed since the last steering, if one did).
        let before = self
            .rate_bound_ppb()
            .saturating_add(self.followed_change_ppb.take().unwrap_or(0));
        let changed_at = self.rate_change_before(&current);
        self.steer_rate(writes, current, changed_at);
        super::fork_points::point("steering: rate set");
        // Phase: slew our time onto CLOCK_MONOTONIC, within CATCH_UP. A
        // phase measured on reads that may have stood is no measure: the
        // next steering takes it (the bound grows at the rate's meanwhile).
        let Ok((offset, width)) = offset_on_running_clock(
            timekeeper,
            || {
                writes.windup_following(|| kernel.reference());
            },
            kernel,
            KernelClock::Monotonic,
            3,
        ) else {
            self.steerings += 1;
            return findings;
        };
        let _ = writes.set_slew_rate(catch_up_rate(offset));
        let unrun = writes.adjtime(offset as i64);
        self.steerings += 1;
        findings.phase = Some(Phase {
            offset: offset as i64,
            unrun,
            width,
            tick: tick_ns(timekeeper),
            ppb: before.max(self.rate_bound_ppb()),
        });
        findings
    }

    /// The watchdog's verdict on the counter from the last steering's pair to
    /// `current` (none on the kernel's own clock, which is the reference).
    fn watch(
        &mut self,
        kernel: &dyn KernelClocks,
        timekeeper: &Timekeeper<HostCounter>,
    ) -> Option<watchdog::Misbehaviour> {
        if matches!(timekeeper.counter(), HostCounter::Kernel(_)) {
            return None;
        }
        let current = watch_pair(
            kernel,
            || timekeeper.counter().read(),
            timekeeper.counter().frequency(),
        );
        let earlier = self.watched.replace(current)?;
        // The rate the counter has kept since the first sample, up to the
        // last one: what this interval is held to.
        let anchor = *self.watch_anchor.get_or_insert(earlier);
        let rate = anchor.frequency_to(&earlier, MIN_BASELINE);
        watchdog::check(&earlier, &current, rate, timekeeper.counter().mask())
    }

    /// Rate: the counter's frequency over the sliding baseline, to `current`,
    /// which starts again at `changed_at` where the kernel changed its rate
    /// (see [`Steering::rate_change_before`]).
    fn steer_rate(
        &mut self,
        writes: &mut Writes<'_, HostCounter>,
        current: Pair,
        changed_at: Option<Pair>,
    ) {
        if let Some(changed_at) = changed_at {
            self.rate_changes += 1;
            self.anchor = Some(changed_at);
            self.next_anchor = Some(changed_at);
            self.recent = Some(changed_at);
        }
        self.last = Some(current);
        let recent = *self.recent.get_or_insert(current);
        if current.kernel - recent.kernel >= RECENT.as_nanos() as u64 {
            self.recent = Some(current);
        }
        let anchor = *self.anchor.get_or_insert(current);
        let next = *self.next_anchor.get_or_insert(current);
        if current.kernel - next.kernel >= SLIDE_AFTER.as_nanos() as u64 {
            self.anchor = Some(next);
            self.next_anchor = Some(current);
        }
        // A new rate is taken over the baseline that found it, its
        // uncertainty with it; the baseline grows from there.
        let baseline = match changed_at {
            Some(_) => CHANGE_BASELINE,
            None => MIN_BASELINE,
        };
        let Some(measured) = anchor.frequency_to(&current, baseline) else {
            return;
        };
        if measured.hz == self.hz || writes.set_counter_frequency(measured.hz).is_ok() {
            self.hz = measured.hz;
            self.uncertainty_ppb = Some(measured.uncertainty_ppb);
        }
    }

    /// Follows a change of the kernel's rate at once: looked for at every
    /// windup, before it, so that the hands it publishes runs at the new
    /// rate from its switch point (a steering waits up to
    /// [`STEER_INTERVAL`], and its changes take effect a windup later); the
    /// next steering then runs whether due or not. Where the kernel says its
    /// rate (`said_rate`, ppb from nominal: an NTP daemon set its tick or
    /// frequency), it is taken at its word; elsewhere, if `measure`, a pair
    /// taken now is compared with the last steering's, as a steering does
    /// (see [`Steering::steer`]). Not on the kernel's own clock, which runs
    /// at the kernel's rate by definition. Returns the change followed, for
    /// the bound.
    pub(crate) fn follow_rate_change(
        &mut self,
        writes: &mut Writes<'_, HostCounter>,
        kernel: &dyn KernelClocks,
        said_rate: Option<i64>,
        measure: bool,
    ) -> Option<RateChange> {
        if matches!(writes.timekeeper().counter(), HostCounter::Kernel(_)) {
            return None;
        }
        let change = match said_rate {
            Some(rate_ppb) => self.follow_said_rate(writes, kernel, rate_ppb),
            None if measure => self.follow_measured_rate(writes, kernel),
            None => None,
        }?;
        // Two changes before a steering: the clock may be off by both.
        let followed = self.followed_change_ppb.unwrap_or(0);
        self.followed_change_ppb = Some(followed.saturating_add(change.ppb));
        Some(change)
    }

    /// A change of the kernel's rate that a pair taken now shows against
    /// the last steering's (or the recent one), followed as a steering
    /// does: the rate since that pair is the one in use. Since then the
    /// clock fell behind or ahead by the difference of the two rates, an
    /// average over a span the change may have begun within: the change
    /// itself may be any size a kernel makes, until a measurement that
    /// lies after it. A difference larger than any kernel's is no rate
    /// change but a suspend the counter counted through, or a counter gone
    /// wrong: left to the steering's look at Boottime and to the watchdog.
    fn follow_measured_rate(
        &mut self,
        writes: &mut Writes<'_, HostCounter>,
        kernel: &dyn KernelClocks,
    ) -> Option<RateChange> {
        let timekeeper = writes.timekeeper();
        let current = pair(kernel, || timekeeper.counter().read());
        let since = self.rate_change_before(&current)?;
        let measured = since.frequency_to(&current, CHANGE_BASELINE)?;
        // The kernel's change: its second against the counter's counts,
        // before and now.
        let kernel_ppb =
            self.hz.abs_diff(measured.hz) as u128 * 1_000_000_000 / measured.hz.max(1) as u128;
        if kernel_ppb > MAX_KERNEL_RATE_PPB as u128 {
            return None;
        }
        let average_ppb = ppb_apart(self.hz, measured.hz);
        self.steer_rate(writes, current, Some(since));
        let unseen_ns = current.kernel.saturating_sub(since.kernel);
        Some(RateChange {
            accrued_ns: grown(unseen_ns, average_ppb + measured.uncertainty_ppb),
            ppb: MAX_KERNEL_RATE_PPB,
        })
    }

    /// The kernel's rate as it last said it, ppb from nominal, and
    /// CLOCK_MONOTONIC when it was asked: what the clock follows (the
    /// keeper's page carries it, for its readers' `getres`).
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn followed_kernel_rate(&self) -> Option<(i64, u64)> {
        self.kernel_rate_ppb.zip(self.asked_at)
    }

    /// What a change of the kernel's rate to `said_rate` that no windup
    /// followed yet may have cost by the kernel's Monotonic `now` (ns), and
    /// costs from then on: the difference of the two rates since the kernel
    /// was last asked. For a bound stated where the writer lock is held
    /// elsewhere, so that the change cannot be followed at once.
    pub(crate) fn unfollowed_change(&self, said_rate: Option<i64>, now: u64) -> Option<RateChange> {
        let (Some(was), Some(said)) = (self.kernel_rate_ppb, said_rate) else {
            return None;
        };
        let change = was.abs_diff(said);
        (change != 0).then(|| RateChange {
            accrued_ns: grown(now.saturating_sub(self.asked_at.unwrap_or(now)), change),
            ppb: change,
        })
    }

    /// The kernel says its clock runs `rate_ppb` from nominal: where that
    /// changed since it was last asked, the counter's frequency as the
    /// kernel now counts is the one in use scaled by the change, and the
    /// baseline starts again at a pair taken now (no measurement spans the
    /// change). It may have changed any time since it was last asked.
    fn follow_said_rate(
        &mut self,
        writes: &mut Writes<'_, HostCounter>,
        kernel: &dyn KernelClocks,
        rate_ppb: i64,
    ) -> Option<RateChange> {
        let now = kernel.nanos(KernelClock::Monotonic);
        let asked = self.asked_at.replace(now).unwrap_or(now);
        let was = self.kernel_rate_ppb.replace(rate_ppb)?;
        if was == rate_ppb {
            return None;
        }
        let hz = (self.hz as i128 * (1_000_000_000 + was as i128)
            / (1_000_000_000 + rate_ppb as i128)) as u64;
        writes.set_counter_frequency(hz).ok()?;
        let change = ppb_apart(self.hz, hz);
        self.hz = hz;
        self.rate_changes += 1;
        let timekeeper = writes.timekeeper();
        let current = pair(kernel, || timekeeper.counter().read());
        self.anchor = Some(current);
        self.next_anchor = Some(current);
        self.recent = Some(current);
        self.last = Some(current);
        Some(RateChange {
            accrued_ns: grown(now.saturating_sub(asked), change),
            ppb: change,
        })
    }

    /// The pair after which the kernel's rate changed, if the rate since the
    /// last steering, or since the recent pair, is further from the rate in
    /// use than both measurements' bounds allow: the truth lies within each
    /// bound, so a rate outside them both is another rate. Nothing before
    /// the rate in use was measured (a stated one is off by its own error).
    fn rate_change_before(&self, current: &Pair) -> Option<Pair> {
        let known = self.uncertainty_ppb?;
        [self.last, self.recent]
            .into_iter()
            .flatten()
            .find(|since| {
                since
                    .frequency_to(current, CHANGE_BASELINE)
                    .is_some_and(|measured| {
                        ppb_apart(self.hz, measured.hz)
                            > 2 * (measured.uncertainty_ppb + known) + CHANGE_FLOOR_PPB
                    })
            })
    }

    /// Realtime and Boottime: the kernel's offsets from CLOCK_MONOTONIC,
    /// followed when they move by more than the bracket they are read in
    /// (a `settimeofday`, a suspend).
    pub(crate) fn follow_offsets(&mut self, kernel: &dyn KernelClocks) -> Findings {
        let realtime = moved_offset(&mut self.realtime_offset, kernel, KernelClock::Realtime);
        let known = self.boottime_offset.is_some();
        let boottime = moved_offset(&mut self.boottime_offset, kernel, KernelClock::Boottime);
        if known && boottime.is_some() {
            // A suspend: CLOCK_MONOTONIC stood still while the counter may
            // have run on, so the rate's baseline starts again after it (the
            // watchdog's reference counts the suspend in).
            self.anchor = None;
            self.next_anchor = None;
            self.last = None;
            self.recent = None;
        }
        Findings {
            realtime,
            boottime,
            ..Findings::default()
        }
    }
}

/// How far apart the frequencies `hz` and `other` are, in ppb of the
/// lower: how fast a clock that counts at one while the counter runs at the
/// other drifts, in its own time or the other's.
fn ppb_apart(hz: u64, other: u64) -> u64 {
    let apart = hz.abs_diff(other) as u128 * 1_000_000_000 / hz.min(other).max(1) as u128;
    apart.min(u64::MAX as u128) as u64
}

/// The slew rate, in ppb, that closes a phase error of `offset` ns within
/// [`CATCH_UP`]: 500 ppm at the least, standing still (or twice as fast) at
/// the most.
pub(crate) fn catch_up_rate(offset: i128) -> i64 {
    let rate = offset.unsigned_abs() * 1_000_000_000 / CATCH_UP.as_nanos();
    rate.clamp(MAX_PPB as u128, MAX_SLEW_PPB as u128) as i64
}

/// A change of the kernel's rate, followed when it was found: what the
/// clock may be off by then, and how fast that may grow until the new rate
/// takes over at the switch point and a steering measures the phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RateChange {
    /// What it may have cost since it began, in ns: since the kernel was
    /// last asked its rate, or since the pair a measurement found it after.
    pub(crate) accrued_ns: u64,
    /// How fast the error may grow from here on, in ppb.
    pub(crate) ppb: u64,
}

/// A bound on |ours − CLOCK_MONOTONIC| that stays true as time passes: the
/// error known at our uptime `since` (ns), and how fast it can grow since,
/// the frequency's uncertainty. Between two measurements the clock runs on
/// the frequency it was given, off by at most that much; the phase known
/// then is being slewed away, which only shrinks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bound {
    /// The error bound at `since`, in ns.
    pub(crate) ns: u64,
    /// The frequency's uncertainty, in parts per billion.
    pub(crate) ppb: u64,
    /// Our uptime, in ns, when the error was `ns`.
    pub(crate) since: u64,
}

impl Bound {
    /// The bound at our uptime `now` ns.
    pub(crate) fn at(&self, now: u64) -> u64 {
        self.ns
            .saturating_add(grown(now.saturating_sub(self.since), self.ppb))
    }

    /// The bound from our uptime `now` ns on, after `change` was found: the
    /// clock ran at the old rate for as long as the change went unseen, and
    /// runs on at it until the new rate takes over at the switch point.
    pub(crate) fn after(&self, change: RateChange, now: u64) -> Bound {
        Bound {
            ns: self.at(now).saturating_add(change.accrued_ns),
            ppb: self.ppb.saturating_add(change.ppb),
            since: now,
        }
    }
}

/// What an error growing at `ppb` adds up to in `ns`.
fn grown(ns: u64, ppb: u64) -> u64 {
    (ns as u128 * ppb as u128 / 1_000_000_000).min(u64::MAX as u128) as u64
}

/// The period of `timekeeper`'s counter in ns, rounded up (see
/// [`Phase::tick`]).
pub(crate) fn tick_ns(timekeeper: &Timekeeper<HostCounter>) -> u64 {
    1_000_000_000u64.div_ceil(timekeeper.counter().frequency().max(1))
}

/// The rate uncertainty of a frequency that was stated, not measured (by
/// CPUID), in ppb: the watchdog retires a counter further off than this.
pub(crate) const STATED_PPB: u64 = watchdog::RATE_BOUND_PPM as u64 * 1_000;

/// CLOCK_MONOTONIC minus our time, in ns, as measured: within half the
/// bracket's `width` of the truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Phase {
    pub(crate) offset: i64,
    /// What the last slew had not run when this one replaced it: the part
    /// of it already scheduled up to the next switch point still runs, and
    /// may carry the clock past the truth before the new slew takes it back.
    pub(crate) unrun: i64,
    pub(crate) width: u64,
    /// The counter's period in ns, rounded up: a read of the counter lies
    /// up to a period behind the instant it stands for, so the measured
    /// offset may be a period high and a later read a period ahead of it.
    pub(crate) tick: u64,
    /// How fast the error can grow from here on, in ppb.
    pub(crate) ppb: u64,
}

impl Phase {
    /// The error bound this measurement gives, from our uptime `since` ns:
    /// the offset, or where the last slew's scheduled part (some of
    /// [`unrun`](Phase::unrun), of its sign) overshoots it, the offset less
    /// all of that; half the bracket; the counter's period; and two
    /// nanoseconds for the roundings (the kernel's reading and ours are whole
    /// nanoseconds rounded down, and so is the bracket's middle).
    pub(crate) fn bound(&self, since: u64) -> Bound {
        let phase = self
            .offset
            .unsigned_abs()
            .max(self.offset.saturating_sub(self.unrun).unsigned_abs());
        Bound {
            ns: phase
                .saturating_add(self.width.div_ceil(2))
                .saturating_add(self.tick)
                .saturating_add(2),
            ppb: self.ppb,
            since,
        }
    }
}

/// What a steering found, for the host clock to keep (and act on).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Findings {
    /// REALTIME − MONOTONIC, when it moved (or was first measured).
    pub(crate) realtime: Option<Offset>,
    /// BOOTTIME − MONOTONIC, when it moved (or was first measured).
    pub(crate) boottime: Option<Offset>,
    /// Our phase against CLOCK_MONOTONIC, when a steering measured it.
    pub(crate) phase: Option<Phase>,
    /// Why the counter must be retired, when the watchdog says so.
    pub(crate) misbehaviour: Option<Misbehaviour>,
}
