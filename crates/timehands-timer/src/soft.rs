//! `Soft`: the soft timers, a `Side` on a timing wheel, and the soft
//! workers' rounds.
//!
//! Callers arm, cancel and reschedule soft timers as they do hard ones,
//! through lock-free requests (see `side`), but never take the soft lock:
//! the workers apply the requests, a batch in each round that finds no
//! timer due. So a thread that arms a pile of timers (a server's timeouts
//! at startup, or after a reconnect storm) keeps no worker from the lock,
//! and the workers' time goes to the timers due first: one due meanwhile
//! waits for one batch of requests at most, some tens of microseconds, not
//! for the pile. (Applied in every round, as the workers first did, the
//! pile's 100 000 requests, some 11 ms of a worker, came before the
//! callbacks due: on two CPUs, one of them arming, 43-51 % of the soft
//! timers due meanwhile came out beyond their bound, against 16-41 % with
//! the requests in idle rounds, where the rest is the workers' share of
//! the CPU.)
//!
//! A worker applying a pile holds the soft lock most of the time, batch
//! after batch; when the scheduler gave its CPU to another thread (the one
//! arming the pile, on two CPUs), it mostly took it with the lock held,
//! and the other worker, woken for the timers due, waited for the lock
//! until the first ran again: rounds held it 0.6-1.2 ms, in any of their
//! parts. So a worker under a time-sharing policy (the default; not a
//! real-time one, see `run`) yields its CPU between two batches, holding
//! no lock, and a switch happens there; a wait for a CPU in the yield
//! counts toward the next round's stalls (`record`). (Measured on Linux,
//! with `timehands timers` on a 2-vCPU Intel Xeon guest, fourteen runs
//! each way: of the soft timers due while a pile of 100 000 went in,
//! 138-1112 came out beyond their bound in twelve runs without the yield,
//! at most 3 in ten with it; a thread spinning as long, in place of the
//! arming one, left none in most runs.)
//!
//! Several workers run rounds: each takes its own batch of due timers, and
//! one timer's callback never runs on two at once (see `control`: an expiry
//! that comes due while its callback runs on another worker waits for it).
//!
//! The alarm follows the queue: after every round that changed what it
//! must be, and before every wait, it is set to the queue's next work, or
//! in the past when the round left work behind (due timers beyond its
//! batch, requests not applied yet), which rings it at once for another
//! worker or this one's next round. A caller whose timer is due before the
//! alarm rings it.

use crate::expiry::Round;
use crate::sched;
use crate::side::{Queued, Rounds, Side};
use crate::stall::RunDelay;
use crate::wheel::Wheel;

/// The soft timers; see the module docs.
pub(crate) type Soft = Side<Wheel<Queued>>;

impl Soft {
    /// A soft worker: rounds until stopped.
    pub(crate) fn run(&self) {
        let mut rounds = Rounds::new();
        rounds.worker.run_delay = Some(RunDelay::of_this_thread());
        // A real-time worker keeps its CPU until it blocks or a higher
        // priority comes: it is never switched out with the lock held for
        // a thread of its own priority, and a yield would hand its CPU to
        // such a thread for as long as that one runs.
        let yields = sched::time_shared();
        loop {
            match self.round(&mut rounds) {
                Round::Stopped => {
                    // Rung once, the alarm woke one worker; this one wakes
                    // the next, until every worker has stopped.
                    self.alarm.set(Some(0));
                    return;
                }
                Round::Idle => {
                    self.alarm.wait();
                    rounds.worker.woke_at = self.now().as_nanos();
                }
                // Between two batches of requests the worker holds no
                // lock: a switch to another thread of its CPU is harmless
                // here, and taken here (see the module docs).
                Round::More if yields => {
                    rounds.worker.yielded = true;
                    std::thread::yield_now();
                }
                Round::Fired | Round::More => {}
            }
        }
    }

    /// One round: the due timers (at most a batch of steps) or, if none
    /// was due, a batch of requests and what they made due; the alarm
    /// (unless the worker comes straight back for more requests); then the
    /// callbacks, without the lock.
    pub(crate) fn round(&self, rounds: &mut Rounds) -> Round {
        self.record().waited_for_cpu(rounds.worker.begin_round());
        {
            let mut state = self.state.lock();
            if !self.begin_round(&mut state, rounds) {
                drop(state);
                self.end_stopped(rounds);
                return Round::Stopped;
            }
            self.take_due(&mut state, &mut rounds.fired);
            if rounds.fired.is_empty() {
                // Nothing due: a batch of the requests, and what it made due.
                self.apply_batch(&mut state, self.batch);
                self.take_due(&mut state, &mut rounds.fired);
            }
            // Requests left, and no callbacks to run: straight on to the
            // next batch, the alarm untouched (setting it costs a system
            // call, some microseconds on a virtual machine, and before any
            // wait the alarm is set, and the stack looked at, again).
            let left = self.requests.pending() > 0;
            if rounds.fired.is_empty() && left {
                return Round::More;
            }
            // Before a wait the alarm is set even if unchanged: a ring
            // taken for a deadline that timehands' clock has not reached
            // yet (it may trail the kernel's by a little) must ring again.
            // Setting it takes the requests of callers that saw it as it
            // was; requests left ring it at once, for another worker to
            // apply while this one runs callbacks.
            let now = self.now().as_nanos();
            let at = if left {
                0
            } else {
                state.queue.next_deadline().unwrap_or(u64::MAX)
            };
            let took = (rounds.fired.is_empty() || at != state.alarm_at || at <= now)
                && self.set_alarm(&mut state, at);
            if rounds.fired.is_empty() {
                return if took { Round::More } else { Round::Idle };
            }
        }
        self.run_fired(rounds);
        Round::Fired
    }
}
