//! `Soft`: the soft timers: their wheel and registry under one lock, the
//! alarm their workers sleep on, their record, and the clock that says what
//! is due. Callers take the lock to arm, cancel and reschedule: no thread
//! here is real-time, so none can be held up by a preempted caller the way
//! the hard thread could (see `hard`).
//!
//! An expiry round takes at most a batch of due timers out of the queue
//! under the lock, then runs their callbacks without it, so that a callback
//! may arm, cancel or reschedule timers (its own included); the periodic
//! ones' callbacks are given back under the next round's lock. Several threads
//! may run rounds on one side (the soft workers): each takes its own batch,
//! and one timer's callback never runs on two at once (a periodic timer's
//! callback is lent to the thread that runs it; an expiry that comes due
//! meanwhile is parked, out of the queue, and queued again, due, when the
//! callback is back, as if one thread had run them in turn).
//!
//! The alarm follows the queue: after every round that changed the queue's
//! next deadline, and before every wait, it is set to it (in the past when
//! the round left due work behind, which rings it at once for another
//! worker), and arming a timer earlier than it moves it earlier. So whenever
//! the lock is free the alarm rings no later than the earliest work,
//! whichever threads are asleep.

use std::io;

use timehands::{Clock, Instant};

use crate::alarm::Alarm;
use crate::arena::{Arena, Key};
use crate::lock::Lock;
use crate::periodic::forward;
use crate::record::{Due, Record};
use crate::side::{Armed, Callback, Expiry, Round};
use crate::wheel::{Wheel, WheelKey};

/// A timer in the registry.
struct Entry {
    /// Its key in the wheel.
    queued: WheelKey,
    deadline: u64,
    /// Where its lateness counts from: its deadline, or when it was armed
    /// or rescheduled if that was later (a timer armed in the past is not
    /// late by the time before it existed).
    late_from: u64,
    slack: u64,
    period: Option<u64>,
    /// A periodic timer that came due while its callback was out: out of
    /// the queue (its `queued` key stale) until the callback is back.
    parked: bool,
    /// `None` while the callback of a periodic timer runs (it is lent to
    /// the expiry thread).
    callback: Option<Callback>,
}

/// One timer taken out of the queue in an expiry round.
struct Fired {
    id: Key,
    due: Due,
    periodic: bool,
    callback: Callback,
}

/// A periodic timer's callback after its run in a round, to be given back
/// to its entry; `None` if it panicked (the timer is then disarmed).
struct Ran {
    id: Key,
    callback: Option<Callback>,
}

/// An expiry round's buffers, kept from one round to the next; the
/// callbacks a round lent out are given back by the next.
pub(crate) struct SoftRounds {
    fired: Vec<Fired>,
    ran: Vec<Ran>,
    /// Callbacks whose timers went while they ran, dropped after the lock.
    orphans: Vec<Callback>,
    unrecorded: Vec<u64>,
}

impl SoftRounds {
    pub(crate) fn new() -> SoftRounds {
        SoftRounds {
            fired: Vec::new(),
            ran: Vec::new(),
            orphans: Vec::new(),
            unrecorded: Vec::new(),
        }
    }

    /// Whether the last round lent callbacks out that the next gives back.
    pub(crate) fn lent(&self) -> bool {
        !self.ran.is_empty()
    }
}

struct State {
    queue: Wheel<Key>,
    timers: Arena<Entry>,
    /// What the alarm is set to (`u64::MAX` for nothing); never later than
    /// the queue's next deadline while the lock is free.
    alarm_at: u64,
    stopping: bool,
}

impl State {
    fn new(queue: Wheel<Key>) -> State {
        State {
            queue,
            timers: Arena::new(),
            alarm_at: u64::MAX,
            stopping: false,
        }
    }

    /// Removes timer `id` from the registry and its queue, and returns its
    /// entry; `None` if it is not registered.
    #[must_use = "an entry's callback is dropped after the lock is released"]
    fn disarm(&mut self, id: Key) -> Option<Entry> {
        let entry = self.timers.remove(id)?;
        self.queue.remove(entry.queued);
        Some(entry)
    }
}

/// The soft timers; see the module docs.
pub(crate) struct Soft {
    state: Lock<State>,
    alarm: Alarm,
    record: Record,
    batch: usize,
    /// How late past its deadline and slack a timer may fire and still be
    /// within the bound: one tick.
    grace: u64,
    clock: Clock,
}

impl Soft {
    pub(crate) fn new(queue: Wheel<Key>, batch: usize, clock: Clock) -> io::Result<Soft> {
        Ok(Soft {
            grace: queue.tick_nanos(),
            state: Lock::new(State::new(queue), false),
            alarm: Alarm::new()?,
            record: Record::new(false),
            batch,
            clock,
        })
    }

    /// After a fork: the side afresh around `queue`, its timers, callbacks
    /// and statistics forgotten unread (see `fork`). An error if the side's
    /// alarm could not be replaced: its expiry threads must not start.
    ///
    /// # Safety
    ///
    /// No other thread may use the side during the call.
    pub(crate) unsafe fn reset_after_fork(&self, queue: Wheel<Key>) -> io::Result<()> {
        // SAFETY: passed on from the caller.
        unsafe {
            self.state.reset(State::new(queue));
            self.record.reset_after_fork();
            self.alarm.reset_after_fork()
        }
    }

    /// What the side keeps of its expiries.
    pub(crate) fn record(&self) -> &Record {
        &self.record
    }

    /// How many timers are armed.
    pub(crate) fn armed(&self) -> usize {
        self.state.lock().timers.len()
    }

    pub(crate) fn arm(&self, timer: Armed) -> Key {
        let now = self.clock.now().as_nanos();
        let mut state = self.state.lock();
        let State { queue, timers, .. } = &mut *state;
        let id = timers.insert_with(|id| Entry {
            queued: queue.insert(timer.deadline, timer.slack, id),
            deadline: timer.deadline,
            late_from: timer.deadline.max(now),
            slack: timer.slack,
            period: timer.period,
            parked: false,
            callback: Some(timer.callback),
        });
        self.wake_for(&mut state, timer.deadline);
        id
    }

    pub(crate) fn cancel(&self, id: Key) -> bool {
        // The entry outlives the guard: dropping its callback runs the
        // destructors of what it captured, which may call into the service
        // (dropping the last reference to it stops its threads, under this
        // lock).
        let entry = self.state.lock().disarm(id);
        entry.is_some()
    }

    pub(crate) fn reschedule(&self, id: Key, deadline: u64) -> bool {
        let now = self.clock.now().as_nanos();
        let mut state = self.state.lock();
        let State { queue, timers, .. } = &mut *state;
        let Some(entry) = timers.get_mut(id) else {
            return false;
        };
        // A parked timer's key is stale, which the queue ignores.
        queue.remove(entry.queued);
        entry.deadline = deadline;
        entry.late_from = deadline.max(now);
        entry.queued = queue.insert(deadline, entry.slack, id);
        entry.parked = false;
        self.wake_for(&mut state, deadline);
        true
    }

    /// Takes every timer out, for the caller to drop after the lock is
    /// released (their callbacks may hold handles on the service: dropped
    /// under the lock, one would take it again).
    #[must_use = "the callbacks are dropped after the lock is released"]
    pub(crate) fn clear(&self) -> Vec<Callback> {
        let mut state = self.state.lock();
        let state = &mut *state;
        let ids = state.timers.keys();
        ids.into_iter()
            .filter_map(|id| state.disarm(id)?.callback)
            .collect()
    }

    /// After arming a timer due at `deadline`: moves the alarm earlier if
    /// the queue's next deadline now is.
    fn wake_for(&self, state: &mut State, deadline: u64) {
        // The queue files a timer at or after its deadline, so a deadline
        // at or after the alarm cannot make the alarm early enough already.
        if deadline >= state.alarm_at {
            return;
        }
        if let Some(next) = state.queue.next_deadline().filter(|&n| n < state.alarm_at) {
            self.alarm.set(Some(next));
            state.alarm_at = next;
        }
    }

    pub(crate) fn stop(&self) {
        let mut state = self.state.lock();
        state.stopping = true;
        self.alarm.set(Some(0));
    }

    /// An expiry thread: rounds of at most `batch` steps until stopped.
    pub(crate) fn run(&self) {
        let mut rounds = SoftRounds::new();
        loop {
            match self.round(&mut rounds) {
                Round::Stopped => {
                    // Rung once, the alarm woke one thread; this one wakes
                    // the next, until every worker has stopped.
                    self.alarm.set(Some(0));
                    return;
                }
                Round::Idle => self.alarm.wait(),
                Round::Fired => {}
            }
        }
    }

    /// Now, on the side's clock.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// When the wheel next has work (see [`Wheel::next_deadline`]).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.state.lock().queue.next_deadline()
    }

    /// One expiry round: gives the periodic timers of the last round their
    /// callbacks back, takes at most `batch` steps' worth of due timers out
    /// of the queue, then runs their callbacks without the lock. (Giving
    /// the callbacks back in the next round's lock, which follows at once,
    /// saves taking the lock once more per round: on the hard side, a
    /// contended acquisition per expiry.)
    pub(crate) fn round(&self, rounds: &mut SoftRounds) -> Round {
        let SoftRounds {
            fired,
            ran,
            orphans,
            unrecorded,
        } = rounds;
        let ended = {
            let mut state = self.state.lock();
            self.give_back(&mut state, ran, orphans);
            if state.stopping {
                Some(Round::Stopped)
            } else {
                let now = self.clock.now().as_nanos();
                self.take_expired(&mut state, now, fired);
                // Due work left behind (the batch ran out) rings the alarm
                // at once, for another worker or this one's next wait.
                // Before a wait it is set even if unchanged: a ring taken
                // for a deadline that timehands' clock has not reached yet
                // (it may trail the kernel's by a little) must ring again.
                let next = state.queue.next_deadline().unwrap_or(u64::MAX);
                if fired.is_empty() || next != state.alarm_at || next <= now {
                    self.alarm.set((next != u64::MAX).then_some(next));
                    state.alarm_at = next;
                }
                fired.is_empty().then_some(Round::Idle)
            }
        };
        orphans.clear();
        if let Some(round) = ended {
            return round;
        }
        for mut f in fired.drain(..) {
            let start = self.clock.now().as_nanos();
            let returned = self.record.run(&mut f.callback, f.due, start, unrecorded);
            if f.periodic {
                ran.push(Ran {
                    id: f.id,
                    // Left armed, a timer whose callback panicked would be
                    // re-armed every period with nothing to run, for ever.
                    callback: returned.then_some(f.callback),
                });
            }
        }
        Round::Fired
    }

    /// Gives periodic timers their callbacks back after a round, queueing
    /// those parked meanwhile; the callbacks of timers cancelled while they
    /// ran go to `orphans`, for the caller to drop without the lock.
    fn give_back(&self, state: &mut State, ran: &mut Vec<Ran>, orphans: &mut Vec<Callback>) {
        for Ran { id, callback } in ran.drain(..) {
            let Some(callback) = callback else {
                // Its entry has no callback: dropping it is harmless here.
                let _ = state.disarm(id);
                continue;
            };
            let State { queue, timers, .. } = &mut *state;
            let Some(entry) = timers.get_mut(id) else {
                orphans.push(callback);
                continue;
            };
            entry.callback = Some(callback);
            if std::mem::take(&mut entry.parked) {
                entry.queued = queue.insert(entry.deadline, entry.slack, id);
                let deadline = entry.deadline;
                self.wake_for(state, deadline);
            }
        }
    }

    /// Takes due timers out of the queue, in at most `batch` steps; a
    /// periodic one is re-armed at its next expiry right away, its callback
    /// lent out.
    fn take_expired(&self, state: &mut State, now: u64, fired: &mut Vec<Fired>) {
        let State { queue, timers, .. } = state;
        let mut budget = self.batch;
        while let Some(id) = queue.poll_bounded(now, &mut budget) {
            let Some(entry) = timers.get_mut(id) else {
                continue;
            };
            let (deadline, late_from, slack) = (entry.deadline, entry.late_from, entry.slack);
            // At the end of time (u64::MAX ns, reached only on simulated
            // time) a periodic timer's next expiry saturates at `now`: the
            // series has no expiry after it, and re-arming it at `now` would
            // fire it again in the same round, for ever. So it ends there,
            // as a one-shot timer.
            let series = entry
                .period
                .map(|period| forward(deadline, now, period))
                .filter(|&(next, _)| next > now);
            let (callback, overruns, periodic) = match series {
                Some(_) if entry.callback.is_none() => {
                    // Its callback still runs on another worker.
                    entry.parked = true;
                    (None, 0, true)
                }
                Some((next, overruns)) => {
                    entry.deadline = next;
                    entry.late_from = next;
                    entry.queued = queue.insert(next, slack, id);
                    (entry.callback.take(), overruns, true)
                }
                None => (timers.remove(id).and_then(|e| e.callback), 0, false),
            };
            if let Some(callback) = callback {
                fired.push(Fired {
                    id,
                    due: Due {
                        expiry: Expiry {
                            deadline: Instant::from_nanos(deadline),
                            overruns,
                        },
                        late_from,
                        bound: Some(late_from.saturating_add(slack).saturating_add(self.grace)),
                    },
                    periodic,
                    callback,
                });
            }
        }
    }
}
