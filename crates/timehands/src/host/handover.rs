//! The clock's moves between timekeepers: from the kernel's clock it
//! starts on to the counter the choice picks, and back to the kernel's
//! clock when the counter goes wrong. Each is a retirement of the timekeeper
//! in use for a successor that starts where it stops, so that time neither
//! steps back nor runs ahead of CLOCK_MONOTONIC; each runs under the
//! steering lock, so that a `fork()` never copies one half done.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use super::choice::{choose, kernel_frequency_source, settle};
use super::clock::{
    CHOOSING, CHOSEN, Facts, HostClock, STAGES, TO_CHOOSE, WINDUP_INTERVAL, build_timekeeper,
};
use super::counter::HostCounter;
use super::fork_points::point;
use super::published::{READER, reader_word};
use crate::engine::nanos::floor_nanos;
use crate::host::brackets::pair;
use crate::host::kernel_clocks::KernelClock;
use crate::host::steer::{Bound, Steering};
use crate::hw::KernelCounter;
use crate::{BinTime, Counter, Timekeeper};

/// How many times (50 µs apart) a thread waits for another's counter choice.
const CHOICE_WAITS: u32 = 2_000;

/// Puts a choice that is being made back to be made, unless forgotten: a
/// choice that panicked is made again, rather than waited for for ever.
struct ChoiceUndo<'a>(&'a AtomicU8);

impl Drop for ChoiceUndo<'_> {
    fn drop(&mut self) {
        self.0.store(TO_CHOOSE, Ordering::Release);
    }
}

impl HostClock {
    /// Moves the clock, once, from the kernel's clock it starts on to the
    /// counter `choose` picks (the TSC, CNTVCT_EL0; or stays, with the reason
    /// in `info`). Off the first read, which must stay cheap: the upkeep
    /// thread does it when it starts (at the first windup), or `info` and the
    /// trace description when asked first. A call while another thread
    /// chooses waits for it (not with a lock: a `fork()`ed child, which has
    /// no such thread, starts the choice again).
    pub(crate) fn choose_counter(&'static self) {
        // Another thread's choice is waited for, but not for ever: one that
        // cannot finish (its thread gone in a fork()ed child, blocked on a
        // lock that thread held) leaves the clock as it is.
        for _ in 0..CHOICE_WAITS {
            match self.choice.compare_exchange(
                TO_CHOOSE,
                CHOOSING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(CHOSEN) => return,
                Err(_) => std::thread::sleep(Duration::from_micros(50)),
            }
        }
        if self.choice.load(Ordering::Acquire) != CHOOSING {
            return;
        }
        // A panic below (a bug) leaves the choice to be made again.
        let undo = ChoiceUndo(&self.choice);
        let choice = settle(choose());
        point("choice: made, not handed over");
        let hz = choice.counter.frequency();
        let kept = Facts {
            frequency_source: choice.frequency_source,
            verdicts: choice.verdicts,
            fallback: choice.fallback,
            refused: Vec::new(),
            own_evidence: choice.own_evidence.is_some(),
        };
        let mut steering = self.steering();
        let chosen = Steering::new(hz, choice.uncertainty_ppb, choice.anchor);
        // The kernel's clock too is handed over, to a timekeeper that winds
        // up every WINDUP_INTERVAL rather than the startup one's interval.
        let facts = match self.hand_over(choice.counter, true, chosen.rate_bound_ppb()) {
            Ok(_) => {
                *steering = chosen;
                kept
            }
            // A hardware counter the engine refuses (firmware that left
            // CNTFRQ_EL0 at 0, say): the kernel's clock.
            Err(refused) => {
                self.hand_over(HostCounter::Kernel(KernelCounter::monotonic()), true, 0)
                    .expect("a 1 GHz, 64-bit counter with a 5 ms windup interval is valid");
                *steering = Steering::new(1_000_000_000, Some(0), None);
                Facts {
                    frequency_source: kernel_frequency_source(),
                    fallback: Some(format!("the hardware counter was refused: {refused}")),
                    ..kept
                }
            }
        };
        let offsets = steering.follow_offsets(self.kernel);
        self.keep(&mut self.timekeeper().writes(), offsets);
        let mut kept = self.facts();
        // What the sandbox refused stays known.
        *kept = Facts {
            refused: std::mem::take(&mut kept.refused),
            ..facts
        };
        drop(kept);
        std::mem::forget(undo);
        self.choice.store(CHOSEN, Ordering::Release);
    }

    /// Retires the timekeeper in use for one on `counter` that starts where
    /// it stopped, and moves the readers to it; returns the uptime the
    /// successor starts at. The
    /// retire point lies up to two windup intervals ahead of now (see
    /// [`Timekeeper::retire`]): the successor starts at the count where
    /// CLOCK_MONOTONIC reaches it, and stands at it until then, rather than
    /// running ahead of CLOCK_MONOTONIC by as much (or at CLOCK_MONOTONIC, if
    /// this thread was preempted past that point). With `wait`, the readers move only then
    /// (a spin of at most two intervals, for a thread that can afford it):
    /// until then they read the retired timekeeper, which is right up to
    /// that point, so that no read is ahead of CLOCK_MONOTONIC. The error
    /// bound starts again from the successor's start, growing at `ppb`, the
    /// new counter's rate uncertainty.
    ///
    /// Called with the steering lock held: a fork waits for the whole of it,
    /// so that no child has a retired timekeeper and no successor. Nothing
    /// changes if the engine refuses `counter`, or past the last stage.
    pub(super) fn hand_over(
        &'static self,
        counter: HostCounter,
        wait: bool,
        ppb: u64,
    ) -> Result<BinTime, crate::Error> {
        let stage = self.stage.load(Ordering::Acquire);
        if stage + 1 == STAGES {
            return Ok(self.timekeeper().uptime());
        }
        // The engine's checks of the counter, before anything is retired.
        Timekeeper::builder(&counter)
            .windup_interval(WINDUP_INTERVAL)
            .build()?;
        let current = self.timekeeper();
        // Wound up against CLOCK_MONOTONIC first: a counter that ran through a
        // suspend since the last windup would otherwise carry the gap into
        // the retire point (retire() winds up with no reference).
        current.windup_following(|| self.kernel.reference());
        let retired_at = current.retire();
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
        self.bound.store(Bound {
            ns: bound.ns.max(kept.at(now)),
            ..bound
        });
        let _ = self.stages[stage + 1].set(successor);
        point("hand-over: successor set, readers not moved");
        let successor = self.stages[stage + 1].get().expect("set above");
        // Reads of the retired timekeeper stand at the retire point from
        // `due` on: the readers move as soon as it comes, nothing between.
        if wait {
            let counter = successor.counter();
            while counter.read().wrapping_sub(due) & counter.mask() > counter.mask() / 2 {
                std::hint::spin_loop();
            }
        }
        // Readers of the process's clock move to the successor before
        // anything (a coarse value) of it is published.
        if self.publishes {
            READER.store(reader_word(successor), Ordering::Release);
        }
        self.stage.store(stage + 1, Ordering::Release);
        Ok(begins)
    }

    /// Retires the hardware counter's timekeeper for one on CLOCK_MONOTONIC,
    /// because of `why` (the steering's watchdog, or the cross-CPU check),
    /// and steers that from now on with `steering`, the steering lock's;
    /// does nothing on the kernel's clock.
    pub(super) fn fail_over(&'static self, steering: &mut Steering, why: &dyn std::fmt::Display) {
        if matches!(self.timekeeper().counter(), HostCounter::Kernel(_)) {
            return;
        }
        let retired_at = self
            .hand_over(self.kernel.monotonic_counter(), false, 0)
            .expect("a 1 GHz, 64-bit counter with a 5 ms windup interval is valid");
        let mut facts = self.facts();
        facts.frequency_source = kernel_frequency_source();
        facts.fallback = Some(format!(
            "{why}: {} took over at {retired_at} s",
            KernelClock::Monotonic.name()
        ));
        drop(facts);
        // The kernel's counter counts nanoseconds exactly; Realtime and
        // Boottime are given to the new timekeeper afresh: now, unless a
        // reader's windup holds its writer lock (the upkeep thread may run
        // at a real-time priority, and must not spin on a preempted
        // reader), else at the next steering, to which the new steering
        // state's offsets are all new.
        *steering = Steering::new(1_000_000_000, Some(0), None);
        if let Some(mut writes) = self.timekeeper().try_writes() {
            let offsets = steering.follow_offsets(self.kernel);
            self.keep(&mut writes, offsets);
        }
    }
}
