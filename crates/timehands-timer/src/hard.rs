//! `Hard`: the hard timers, a `Side` on a deadline heap, under a lock that
//! no caller waits for, and the hard thread's rounds.
//!
//! The hard thread runs at SCHED_FIFO; the threads that arm, cancel and
//! reschedule hard timers run at normal priority. They never wait for the
//! hard lock: each pushes a request onto a lock-free stack (`requests`;
//! `control` is how a cancel still answers at once) and then, if the lock
//! is free, takes it and applies a batch of the pending requests, its own
//! and others' (flat combining); if not, whoever holds it, or the hard
//! thread's next round, applies them. So at most one caller holds the lock
//! at a time and no caller ever queues for it: the hard thread, when it
//! needs the lock, waits behind at most one batch of a caller's work, which
//! priority inheritance (`lock`) runs at the hard thread's priority if the
//! caller was preempted. (Callers that queued for the lock, as they did
//! before, formed convoys in the kernel's priority-inheriting handoff, and
//! the hard thread waited behind all of them; requests applied by the hard
//! thread alone would put all the callers' work on the real-time thread,
//! which the kernel throttles once it takes 95 % of a CPU.) A caller whose
//! timer is due before the alarm rings it.
//!
//! A round: periodic timers whose callbacks ran in the last round are queued
//! again at their next expiry (unless cancelled or rescheduled meanwhile),
//! due timers are taken out (at most a batch); if none was due, a batch of
//! the pending requests is walked and applied (see `requests`: at most a
//! bounded number of nodes of the chain taken off the stack are walked, and
//! none is applied before the chain is walked whole) and what it made due
//! is taken, and if still none is, the alarm is set to the heap's earliest
//! deadline, or to come back within 100 µs while requests taken are left
//! to walk or apply (see `requests` for those pushed meanwhile). Then the
//! callbacks run, without the lock, so that one may arm, cancel or
//! reschedule timers, its own included.

use crate::expiry::Round;
use crate::heap::DeadlineHeap;
use crate::side::{Queued, Rounds, Side};

/// How many requests the hard thread applies in a round that finds nothing
/// due (some tens of microseconds).
pub(crate) const IDLE_BATCH: usize = 256;

/// With requests left to walk or apply, the hard thread comes back this
/// soon (in nanoseconds) rather than walk and apply them all at once: a
/// pile of thousands (callers push millions a second) would hold a due
/// timer up for milliseconds.
pub(crate) const BACKLOG_POLL_NS: u64 = 100_000;

/// The hard timers; see the module docs.
pub(crate) type Hard = Side<DeadlineHeap<Queued>>;

impl Hard {
    /// The hard thread: rounds until stopped.
    pub(crate) fn run(&self) {
        let mut rounds = Rounds::new();
        loop {
            match self.round(&mut rounds) {
                Round::Stopped => return,
                Round::Idle => self.alarm.wait(),
                Round::Fired | Round::More => {}
            }
        }
    }

    /// One round; see the module docs.
    pub(crate) fn round(&self, rounds: &mut Rounds) -> Round {
        {
            let mut state = self.state.lock();
            if !self.begin_round(&mut state, rounds) {
                drop(state);
                self.end_stopped(rounds);
                return Round::Stopped;
            }
            let now = self.now().as_nanos();
            self.take_due(&mut state, &mut rounds.fired);
            if rounds.fired.is_empty() {
                // Nothing due: a batch of the requests, and what it made due.
                self.apply_batch(&mut state, IDLE_BATCH);
                self.take_due(&mut state, &mut rounds.fired);
            }
            if rounds.fired.is_empty() {
                // The alarm is set only here, before a wait (the round after
                // one that fired follows at once), and even if unchanged: a
                // ring taken for a deadline that timehands' clock has not
                // reached yet (it may trail the kernel's by a little) must
                // ring again. Requests taken and left to walk or apply (the
                // thread walks and applies a batch a round, so that no pile
                // of them holds it, and a due timer, up) bring it back
                // soon, and the stack is looked at then. A caller that
                // pushed before the alarm was set may have seen an earlier
                // one and not rung: its request is taken with the setting
                // (or, behind requests taken before, left on the stack for
                // the look to come), and looked at soon (one that pushes
                // later sees this alarm, and rings if its timer is due
                // before it). Setting the alarm again drops any ring
                // meanwhile, so the look is made again.
                let soon = now.saturating_add(BACKLOG_POLL_NS);
                let mut at = state.queue.peek().unwrap_or(u64::MAX);
                while self.set_alarm(&mut state, at, at) && soon < at {
                    at = soon;
                }
                return Round::Idle;
            }
        }
        self.run_fired(rounds);
        Round::Fired
    }
}

// Priority inheritance is Linux's (see `lock`), and so is /proc/thread-self.
#[cfg(all(test, target_os = "linux"))]
mod tests;
