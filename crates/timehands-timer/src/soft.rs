//! `Soft`: the soft timers, a `Side` on a timing wheel, and the soft
//! workers' rounds.
//!
//! Callers arm, cancel and reschedule soft timers as they do hard ones,
//! through lock-free requests (see `side`), but never take the soft lock:
//! the workers apply the requests, a batch in each round that finds no
//! timer due (and, see below, no callbacks in need of its CPU). So a
//! thread that arms a pile of timers (a server's timeouts at startup, or
//! after a reconnect storm) keeps no worker from the lock, and the
//! workers' time goes to the timers due first: one due meanwhile waits
//! for one batch of requests at most, some tens of microseconds, not for
//! the pile. (Applied in every round, as the workers first did, the
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
//! A worker that applies requests while another runs callbacks on the
//! same CPU still takes turns with them, and the timers waiting in the
//! other's batch wait out its turns. So where the callbacks leave no CPU
//! to spare (see `sharing`: two CPUs, one of them arming), the requests
//! wait for the callbacks, a batch going in each tick at least. (Fourteen
//! runs each way, alternating, same guest: with the requests waiting, 0
//! beyond the bound in seven runs and at most 74 in the others, against 0
//! in four and up to 1 294 without; the pile was in the wheel 67-152 ms
//! after the first arm, against 28-64 ms.)
//!
//! Several workers run rounds: each takes its own batch of due timers, and
//! one timer's callback never runs on two at once (see `control`: an expiry
//! that comes due while its callback runs on another worker waits for it).
//!
//! A round runs its timers earliest bound first, and those beyond their
//! bound already last (in the same round). Timers of one slack filed under
//! one tick have bounds up to a tick apart, or half the slack if that is
//! more (filed under the first tick after their deadline, or under a round
//! tick in the first half of their slack; see `wheel`), and the wheel
//! gives them in the order they were filed. With 1 ms of slack and some
//! 150 timers of 5 µs a tick, the timer with the least time to spare could
//! come last in the batch, with some 0.25 ms left, less the worker's
//! wakeup; earliest bound first leaves each at least 1 ms, less the
//! wakeup (the bounds spread over a tick, more than the batch's 0.75 ms).
//! A stop of the machine delays whatever runs after it: on a shared 2-vCPU
//! guest, both CPUs stopped for 0.35-1 ms a few times in ten seconds with
//! no steal time counted. A timer beyond its bound is late whatever runs
//! first; run first, it would make the others late too (earliest bound
//! first alone, after a stop longer than the time to spare, made every
//! timer after it late). (`timehands timers -D 3`, 22 runs each way,
//! alternating, on a shared 2-vCPU Intel Xeon guest: the steady state
//! within its 0.1 % in 19 runs with this order, 14 of them with none
//! beyond the bound, against 12 and 0 in the wheel's order; none beyond
//! the bound while a pile went in, in 21 runs against 7.)
//!
//! The alarm follows the queue: after every round that changed what it
//! must be, and before every wait, it is set to the queue's next work, or
//! in the past when the round left work behind (due timers beyond its
//! batch, requests not applied yet and allowed), which rings it at once
//! for another worker or this one's next round; requests that wait for
//! callbacks set it no later than their next batch. A caller whose timer
//! is due before the alarm rings it.

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
    /// was due, a batch of requests and what they made due (unless the
    /// requests wait for other workers' callbacks, see `sharing`); the
    /// alarm (unless the worker comes straight back for more requests);
    /// then the callbacks, without the lock.
    pub(crate) fn round(&self, rounds: &mut Rounds) -> Round {
        self.record().waited_for_cpu(rounds.worker.begin_round());
        let running = {
            let mut state = self.state.lock();
            if !self.begin_round(&mut state, rounds) {
                drop(state);
                self.end_stopped(rounds);
                return Round::Stopped;
            }
            self.take_due(&mut state, &mut rounds.fired);
            // Nothing due: a batch of the requests, and what it made due,
            // unless they wait for other workers' callbacks (see `sharing`).
            let tick = state.queue.tick_nanos();
            let now = self.now().as_nanos();
            if rounds.fired.is_empty() && self.sharing.next_batch_at(tick) <= now {
                self.apply_batch(&mut state, self.batch);
                self.sharing.applied(now);
                self.take_due(&mut state, &mut rounds.fired);
            }
            let running = (!rounds.fired.is_empty()).then(|| self.sharing.callbacks_taken());
            // Requests left, no callbacks to run, and the next batch
            // allowed: straight on to it, the alarm untouched (setting it
            // costs a system call, some microseconds on a virtual machine,
            // and before any wait the alarm is set, and the stack looked
            // at, again).
            let left = self.requests.pending() > 0;
            let next_batch = self.sharing.next_batch_at(tick);
            if rounds.fired.is_empty() && left && next_batch <= now {
                return Round::More;
            }
            // Before a wait the alarm is set even if unchanged: a ring
            // taken for a deadline that timehands' clock has not reached
            // yet (it may trail the kernel's by a little) must ring again.
            // Setting it takes the requests of callers that saw it as it
            // was. Requests left ring it for their next batch: at once
            // where a CPU is to spare, for another worker to apply them
            // while this one runs callbacks, else a tick after the last
            // batch at most (a request taken with the alarm waits as
            // long), and callers are told then not to ring it: their
            // requests could not be applied sooner.
            let now = self.now().as_nanos();
            let mut at = state.queue.next_deadline().unwrap_or(u64::MAX);
            if left {
                at = at.min(next_batch);
            }
            let rings_before = if left && next_batch > now { 0 } else { at };
            let unchanged = at == state.alarm_at && rings_before == self.requests.alarm_at();
            let took = (rounds.fired.is_empty() || !unchanged || at <= now)
                && self.set_alarm(&mut state, at, rings_before);
            if rounds.fired.is_empty() {
                // Requests taken with the alarm are applied now, unless
                // requests wait already.
                return if took && !left {
                    Round::More
                } else {
                    Round::Idle
                };
            }
            running
        };
        // Earliest bound first, those beyond theirs already last (see the
        // module docs).
        rounds.order_by_bound(self.now().as_nanos());
        self.run_fired(rounds);
        drop(running);
        Round::Fired
    }
}
