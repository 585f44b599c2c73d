//! The clock's moves between timekeepers: from the kernel's clock it
//! starts on to the counter the choice picks, and back to the kernel's
//! clock when the counter goes wrong. Each is a retirement of the timekeeper
//! in use for a successor that starts where it stops, so that time neither
//! steps back nor runs ahead of CLOCK_MONOTONIC; each runs under the
//! steering lock, so that a `fork()` never copies one half done.
//!
//! A move is made by whichever read finds it due, a signal handler's maybe:
//! it waits for nothing (the retired timekeeper's writer lock is tried, and
//! a move that finds it held is made at a later windup), allocates nothing,
//! and never spins until the point where the successor takes over. The
//! move to the chosen counter leaves the readers on the retired timekeeper,
//! which is right up to that point, and the first windup past it moves
//! them ([`Pending`]); a failover moves them at once, to a successor that
//! stands at the point until CLOCK_MONOTONIC reaches it.

use std::fmt::Display;
use std::sync::atomic::Ordering;

use super::choice::{
    CROSS_CPU_CHECK, Choice, Settled, Settling, kernel_choice, kernel_frequency_source,
};
use super::clock::{
    CHOSEN, HostClock, SETTLING, STAGES, TO_CHOOSE, WINDUP_INTERVAL, build_timekeeper,
};
use super::counter::HostCounter;
use super::fork_points::point;
use super::life::{Facts, Pending, Successor};
use super::published::{PAGE, READER, reader_word};
use super::text::text;
use crate::engine::nanos::floor_nanos;
use crate::host::brackets::pair;
use crate::host::kernel_clocks::KernelClock;
use crate::host::steer::{Bound, Steering};
use crate::hw::KernelCounter;
use crate::{BinTime, Counter, Timekeeper};

impl HostClock {
    /// One step of the counter's choice, with `steering`, the steering
    /// lock's: the choice made (the first step), its counter measured (see
    /// [`Settling`]), or, measured, handed over to. A step that finds the
    /// retired timekeeper's writer lock held keeps the settled choice for
    /// the next.
    pub(super) fn choose_step(&'static self, steering: &mut Steering) {
        let settling = self.life().settling.take();
        let settling = settling.unwrap_or_else(|| Settling::new(self.choose()));
        match settling.step() {
            Settled::Not(settling) => {
                self.life().settling = Some(settling);
                self.choice.store(SETTLING, Ordering::Release);
            }
            Settled::Done(choice) => {
                if let Some(choice) = self.take_over(steering, choice) {
                    self.life().settling = Some(Settling::done(choice));
                }
            }
        }
    }

    /// Winds up until the counter's choice is made (some 10 ms from the
    /// start, a second at most where the brackets keep failing): for `info`
    /// and the trace description, which say what was chosen, and may wait.
    pub(crate) fn wait_for_choice(&'static self) {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while self.choice.load(Ordering::Acquire) != CHOSEN && std::time::Instant::now() < give_up {
            self.windup();
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// The choice as `choose` makes it, where the cross-CPU check allows: a
    /// TSC trusted on its own evidence waits for a check that passed (a
    /// program asks for one with [`check_across_cpus`](crate::check_across_cpus)),
    /// and no TSC follows one that found CPUs apart.
    fn choose(&self) -> Choice {
        point("choice: choosing");
        let choice = super::choice::choose();
        if !choice.counter.is_tsc() {
            return choice;
        }
        let checked = self.cross_cpu.get().map(|verdict| verdict.passed);
        match (checked, choice.own_evidence.is_some()) {
            (Some(true), _) | (None, false) => choice,
            (Some(false), _) => kernel_choice(
                text!("the {CROSS_CPU_CHECK} did not pass (see the verdicts)"),
                choice.verdicts,
            ),
            (None, true) => {
                self.life().awaits_check = true;
                kernel_choice(
                    text!(
                        "the TSC is trusted on its own evidence here, and the {CROSS_CPU_CHECK} was not run: timehands::check_across_cpus() runs it"
                    ),
                    choice.verdicts,
                )
            }
        }
    }

    /// Hands the clock over to `choice`'s counter (the kernel's clock too:
    /// to a timekeeper that winds up every [`WINDUP_INTERVAL`] rather than
    /// the startup one's interval), to take over at its point; the choice
    /// back where the retired timekeeper's writer lock is held.
    fn take_over(&'static self, steering: &mut Steering, choice: Choice) -> Option<Choice> {
        point("choice: made, not handed over");
        let chosen = Steering::new(
            choice.counter.frequency(),
            choice.uncertainty_ppb,
            choice.anchor,
        );
        let facts = Facts::of(&choice);
        let (successor, steering_then, facts) =
            match self.hand_over(choice.counter.clone(), chosen.rate_bound_ppb()) {
                Ok(Some(successor)) => (successor, chosen, facts),
                Ok(None) => return Some(choice),
                // A hardware counter the engine refuses (firmware that left
                // CNTFRQ_EL0 at 0, say): the kernel's clock.
                Err(refused) => {
                    let kernel = HostCounter::Kernel(KernelCounter::monotonic());
                    let Ok(Some(successor)) = self.hand_over(kernel, 0) else {
                        return Some(choice);
                    };
                    let facts = Facts {
                        frequency_source: kernel_frequency_source(),
                        fallback: Some(text!("the hardware counter was refused: {refused}")),
                        ..facts
                    };
                    (
                        successor,
                        Steering::new(1_000_000_000, Some(0), None),
                        facts,
                    )
                }
            };
        self.life().pending = Some(Pending {
            successor,
            steering: steering_then,
            facts,
        });
        self.move_when_due(steering);
        None
    }

    /// Moves the readers to a pending successor whose point has come (see
    /// [`Pending`]), with `steering`, the steering lock's, which the
    /// successor's steering then replaces; true while one is still pending,
    /// when nothing else of a windup is due (the timekeeper in use is
    /// retired).
    pub(super) fn move_when_due(&'static self, steering: &mut Steering) -> bool {
        let mut life = self.life();
        let Some(pending) = life.pending.as_ref() else {
            return false;
        };
        let successor = self.stages[pending.successor.stage]
            .get()
            .expect("a pending successor is set");
        let counter = successor.counter();
        let ahead = pending.successor.due.wrapping_sub(counter.read()) & counter.mask();
        if ahead != 0 && ahead <= counter.mask() / 2 {
            return true;
        }
        point("hand-over: due, readers not moved");
        let pending = life.pending.take().expect("looked at above");
        life.facts = pending.facts;
        drop(life);
        self.move_readers(pending.successor.stage);
        *steering = pending.steering;
        if let Some(mut writes) = successor.try_writes() {
            let offsets = steering.follow_offsets(self.kernel);
            self.keep(&mut writes, offsets);
        }
        self.choice.store(CHOSEN, Ordering::Release);
        false
    }

    /// Readers of the process's clock, then the clock itself, move to the
    /// timekeeper of `stage`, before anything of it is published. Readers
    /// of the keeper's page stay on it: they leave it for this clock only
    /// when it goes stale (`page/mod.rs`).
    fn move_readers(&'static self, stage: usize) {
        let successor = self.stages[stage].get().expect("a successor is set");
        if self.publishes {
            let _ = READER.fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                (word & PAGE == 0).then_some(reader_word(successor))
            });
        }
        self.stage.store(stage, Ordering::Release);
    }

    /// Retires the timekeeper in use for one on `counter` that starts where
    /// it stopped; returns the successor, which the readers are still to
    /// be moved to. The retire point lies up to two windup intervals ahead of now (see
    /// [`Timekeeper::retire`]): the successor starts at the count where
    /// CLOCK_MONOTONIC reaches it, and stands at it until then, rather than
    /// running ahead of CLOCK_MONOTONIC by as much (or at CLOCK_MONOTONIC, if
    /// this thread was preempted past that point). Until the readers move
    /// they read the retired timekeeper, which is right up to that point.
    /// The error bound starts again from the successor's start, growing at
    /// `ppb`, the new counter's rate uncertainty.
    ///
    /// Called with the steering lock held: a fork waits for the whole of it,
    /// so that no child has a retired timekeeper and no successor. Nothing
    /// changes if the engine refuses `counter`, past the last stage, or
    /// where another thread holds the writer lock (`Ok(None)`: a windup
    /// runs there, maybe interrupted by the signal handler this runs in).
    pub(super) fn hand_over(
        &'static self,
        counter: HostCounter,
        ppb: u64,
    ) -> Result<Option<Successor>, crate::Error> {
        let stage = self.stage.load(Ordering::Acquire);
        if stage + 1 == STAGES {
            return Ok(None);
        }
        // The engine's checks of the counter, before anything is retired.
        Timekeeper::builder(&counter)
            .windup_interval(WINDUP_INTERVAL)
            .build()?;
        let current = self.timekeeper();
        let Some(mut writes) = current.try_writes() else {
            return Ok(None);
        };
        // Wound up against CLOCK_MONOTONIC first: a counter that ran through a
        // suspend since the last windup would otherwise carry the gap into
        // the retire point (retire winds up with no reference).
        writes.windup_following(|| self.kernel.reference());
        let retired_at = writes.retire();
        drop(writes);
        point("hand-over: retired, no successor");
        // The successor starts at the retire point, at the count where
        // CLOCK_MONOTONIC will be there; or, where it is past it already (this
        // thread was preempted since the retirement), at CLOCK_MONOTONIC now:
        // reads stood meanwhile, and time moves on from where they stood.
        let start = pair(self.kernel, || counter.read());
        let reference = BinTime::from_nanos(start.kernel as i128);
        let begins = retired_at.max(reference);
        let ahead = floor_nanos(begins.saturating_sub(reference));
        let hz = counter.frequency() as u128;
        let ahead_counts = (ahead as u128 * hz).div_ceil(1_000_000_000);
        let due = start.count.wrapping_add(ahead_counts as u64) & counter.mask();
        // The successor's error there: half the pair's bracket, a count's
        // rounding, the new rate's error over the counts ahead, and the
        // distance ahead itself, which its reads stand at until
        // CLOCK_MONOTONIC reaches it (a failover retires a counter up to
        // two windup intervals before its promise).
        let bound = Bound {
            ns: ((start.width as u128 * 1_000_000_000).div_ceil(2 * hz)
                + 1_000_000_000u128.div_ceil(hz)
                + (ahead as u128 * ppb as u128).div_ceil(1_000_000_000)
                + ahead as u128) as u64,
            ppb,
            since: floor_nanos(begins),
        };
        let successor = build_timekeeper(counter, begins, Some(due), WINDUP_INTERVAL)
            .expect("the counter passed the timekeeper's checks above");
        // Realtime carries on: the retired timekeeper's offset, until the
        // steering re-reads the kernel's.
        successor.set_boottime(current.boottime());
        // Until the readers move, they read the retired timekeeper: the
        // bound covers both.
        let now = floor_nanos(current.uptime());
        let kept = self.bound.load();
        self.state_bound(Bound {
            ns: bound.ns.max(kept.at(now)),
            ..bound
        });
        let _ = self.stages[stage + 1].set(successor);
        point("hand-over: successor set, readers not moved");
        Ok(Some(Successor {
            stage: stage + 1,
            due,
            begins,
        }))
    }

    /// Retires the hardware counter's timekeeper for one on CLOCK_MONOTONIC,
    /// because of `why` (the steering's watchdog, or the cross-CPU check),
    /// and steers that from now on with `steering`, the steering lock's;
    /// does nothing on the kernel's clock. False where another thread holds
    /// the writer lock: the caller keeps its finding for the next windup.
    pub(super) fn fail_over(&'static self, steering: &mut Steering, why: &dyn Display) -> bool {
        if matches!(self.timekeeper().counter(), HostCounter::Kernel(_)) {
            return true;
        }
        let successor = match self.hand_over(self.kernel.monotonic_counter(), 0) {
            Ok(Some(successor)) => successor,
            Ok(None) => return false,
            Err(e) => {
                unreachable!("a 1 GHz, 64-bit counter with a 5 ms windup interval is valid: {e}")
            }
        };
        // The readers move at once: the successor stands at the point until
        // CLOCK_MONOTONIC reaches it, and the counter is not to be read.
        self.move_readers(successor.stage);
        let mut life = self.life();
        life.facts.frequency_source = kernel_frequency_source();
        life.facts.fallback = Some(text!(
            "{why}: {} took over at {} s",
            KernelClock::Monotonic.name(),
            successor.begins
        ));
        // A move to the chosen counter that had not taken place will not.
        life.pending = None;
        drop(life);
        self.choice.store(CHOSEN, Ordering::Release);
        // The kernel's counter counts nanoseconds exactly; Realtime and
        // Boottime are given to the new timekeeper afresh: now, unless a
        // reader's windup holds its writer lock, else at the next steering,
        // to which the new steering state's offsets are all new.
        *steering = Steering::new(1_000_000_000, Some(0), None);
        if let Some(mut writes) = self.timekeeper().try_writes() {
            let offsets = steering.follow_offsets(self.kernel);
            self.keep(&mut writes, offsets);
        }
        true
    }

    /// Chooses again, once, where the clock keeps the kernel's clock only
    /// because the cross-CPU check had not been run (see
    /// [`choose`](HostClock::choose)) and it now passed: the next windup
    /// makes the choice.
    pub(super) fn choose_again_after_check(&self) {
        let _steering = self.steering();
        let mut life = self.life();
        if std::mem::take(&mut life.awaits_check) && self.choice.load(Ordering::Acquire) == CHOSEN {
            self.choice.store(TO_CHOOSE, Ordering::Release);
        }
    }
}
