//! `Side`: one kind of timer (hard or soft): its queue and registry under
//! one lock, the alarm its expiry threads sleep on, its statistics, and the
//! clock that says what is due.
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

use std::any::Any;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;
use timehands::{Clock, Instant};

use crate::alarm::Alarm;
use crate::arena::{Arena, Key};
use crate::heap::{DeadlineHeap, HeapKey};
use crate::lock::Lock;
use crate::periodic::forward;
use crate::service::{Expiry, SideStatistics};
use crate::wheel::{Wheel, WheelKey};

pub(crate) type Callback = Box<dyn FnMut(Expiry) + Send>;

/// The lateness histograms count nanoseconds up to an hour; later is
/// recorded as an hour.
const LATENESS_MAX_NS: u64 = 3_600_000_000_000;

/// A queue of timer ids by deadline: the heap for hard timers, the wheel for
/// soft ones.
pub(crate) trait Queue: Send {
    /// Names a timer in the queue.
    type QueueKey: Copy + Send;
    fn arm(&mut self, deadline: u64, slack: u64, id: Key) -> Self::QueueKey;
    fn disarm(&mut self, key: Self::QueueKey);
    /// A timer due at `now`, in at most `budget` steps counted off it;
    /// `None` when none is due or the budget ran out.
    fn poll(&mut self, now: u64, budget: &mut usize) -> Option<Key>;
    fn next_deadline(&self) -> Option<u64>;
}

impl Queue for DeadlineHeap<Key> {
    type QueueKey = HeapKey;
    fn arm(&mut self, deadline: u64, _slack: u64, id: Key) -> HeapKey {
        self.push(deadline, id)
    }
    fn disarm(&mut self, key: HeapKey) {
        self.remove(key);
    }
    fn poll(&mut self, now: u64, budget: &mut usize) -> Option<Key> {
        *budget = budget.checked_sub(1)?;
        self.pop_expired(now).map(|(_, id)| id)
    }
    fn next_deadline(&self) -> Option<u64> {
        self.peek()
    }
}

impl Queue for Wheel<Key> {
    type QueueKey = WheelKey;
    fn arm(&mut self, deadline: u64, slack: u64, id: Key) -> WheelKey {
        self.insert(deadline, slack, id)
    }
    fn disarm(&mut self, key: WheelKey) {
        self.remove(key);
    }
    fn poll(&mut self, now: u64, budget: &mut usize) -> Option<Key> {
        self.poll_bounded(now, budget)
    }
    fn next_deadline(&self) -> Option<u64> {
        Wheel::next_deadline(self)
    }
}

/// A timer as the user armed it.
pub(crate) struct Armed {
    pub(crate) deadline: u64,
    pub(crate) slack: u64,
    /// At least 1 ns: a period of zero is refused before it gets here.
    pub(crate) period: Option<u64>,
    pub(crate) callback: Callback,
}

/// A timer in a side's registry.
struct Entry<K> {
    /// Its key in the queue.
    queued: K,
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
    expiry: Expiry,
    /// When it is late from, and by when the soft bound has it fired.
    late_from: u64,
    bound: u64,
    periodic: bool,
    callback: Callback,
}

/// What an expiry round did.
pub(crate) enum Round {
    /// The service is stopping: nothing was taken.
    Stopped,
    /// Nothing was due (or the round's steps all went to moving soft
    /// timers down the wheel); the alarm is set for the next deadline.
    Idle,
    /// Timers fired.
    Fired,
}

/// A periodic timer's callback after its run in a round, to be given back
/// to its entry; `None` if it panicked (the timer is then disarmed).
struct Ran {
    id: Key,
    callback: Option<Callback>,
}

/// An expiry round's buffers, kept from one round to the next; the
/// callbacks a round lent out are given back by the next.
pub(crate) struct Rounds {
    fired: Vec<Fired>,
    ran: Vec<Ran>,
    /// Callbacks whose timers went while they ran, dropped after the lock.
    orphans: Vec<Callback>,
    unrecorded: Vec<u64>,
}

impl Rounds {
    pub(crate) fn new() -> Rounds {
        Rounds {
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

struct State<Q: Queue> {
    queue: Q,
    timers: Arena<Entry<Q::QueueKey>>,
    /// What the alarm is set to (`u64::MAX` for nothing); never later than
    /// the queue's next deadline while the lock is free.
    alarm_at: u64,
    stopping: bool,
}

impl<Q: Queue> State<Q> {
    fn new(queue: Q) -> State<Q> {
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
    fn disarm(&mut self, id: Key) -> Option<Entry<Q::QueueKey>> {
        let entry = self.timers.remove(id)?;
        self.queue.disarm(entry.queued);
        Some(entry)
    }
}

/// A side's counters, read without a lock.
#[derive(Default)]
struct Counters {
    fired: AtomicU64,
    beyond_bound: AtomicU64,
    panics: AtomicU64,
}

/// One kind of timer; see the module docs. The hard side's locks inherit
/// priority where the OS can (see `lock`): its expiry thread is real-time.
pub(crate) struct Side<Q: Queue> {
    state: Lock<State<Q>>,
    alarm: Alarm,
    lateness: Lock<Histogram<u64>>,
    counters: Counters,
    last_panic: Lock<Option<String>>,
    batch: usize,
    /// How late past its deadline and slack a timer may fire and still be
    /// within the side's bound: one soft tick; `None` on the hard side,
    /// which promises no bound.
    grace: Option<u64>,
    clock: Clock,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_max(LATENESS_MAX_NS, 3).expect("valid histogram bounds")
}

impl<Q: Queue> Side<Q> {
    pub(crate) fn new(
        queue: Q,
        batch: usize,
        grace: Option<u64>,
        realtime: bool,
        clock: Clock,
    ) -> io::Result<Side<Q>> {
        Ok(Side {
            state: Lock::new(State::new(queue), realtime),
            alarm: Alarm::new()?,
            lateness: Lock::new(histogram(), realtime),
            counters: Counters::default(),
            last_panic: Lock::new(None, realtime),
            batch,
            grace,
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
    pub(crate) unsafe fn reset_after_fork(&self, queue: Q) -> io::Result<()> {
        // SAFETY: passed on from the caller.
        unsafe {
            self.state.reset(State::new(queue));
            self.lateness.reset(histogram());
            self.last_panic.reset(None);
        }
        for counter in [
            &self.counters.fired,
            &self.counters.beyond_bound,
            &self.counters.panics,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        // SAFETY: passed on from the caller.
        unsafe { self.alarm.reset_after_fork() }
    }

    pub(crate) fn lateness(&self) -> Histogram<u64> {
        self.lateness.lock().clone()
    }

    pub(crate) fn statistics(&self) -> SideStatistics {
        SideStatistics {
            fired: self.counters.fired.load(Ordering::Relaxed),
            beyond_bound: self.counters.beyond_bound.load(Ordering::Relaxed),
            panics: self.counters.panics.load(Ordering::Relaxed),
            last_panic: self.last_panic.lock().clone(),
        }
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
            queued: queue.arm(timer.deadline, timer.slack, id),
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
        queue.disarm(entry.queued);
        entry.deadline = deadline;
        entry.late_from = deadline.max(now);
        entry.queued = queue.arm(deadline, entry.slack, id);
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
    fn wake_for(&self, state: &mut State<Q>, deadline: u64) {
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
        let mut rounds = Rounds::new();
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

    /// When the queue next has work (see [`Queue::next_deadline`]).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.state.lock().queue.next_deadline()
    }

    /// One expiry round: gives the periodic timers of the last round their
    /// callbacks back, takes at most `batch` steps' worth of due timers out
    /// of the queue, then runs their callbacks without the lock. (Giving
    /// the callbacks back in the next round's lock, which follows at once,
    /// saves taking the lock once more per round: on the hard side, a
    /// contended acquisition per expiry.)
    pub(crate) fn round(&self, rounds: &mut Rounds) -> Round {
        let Rounds {
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
            unrecorded.push(start.saturating_sub(f.late_from));
            self.record_lateness(unrecorded);
            self.counters.fired.fetch_add(1, Ordering::Relaxed);
            if self.grace.is_some() && start > f.bound {
                self.counters.beyond_bound.fetch_add(1, Ordering::Relaxed);
            }
            // A panicking callback loses its own timer, not the thread.
            let unwound = catch_unwind(AssertUnwindSafe(|| (f.callback)(f.expiry))).err();
            if let Some(payload) = &unwound {
                self.record_panic(payload.as_ref());
            }
            if f.periodic {
                ran.push(Ran {
                    id: f.id,
                    // Left armed, a timer whose callback panicked would be
                    // re-armed every period with nothing to run, for ever.
                    callback: unwound.is_none().then_some(f.callback),
                });
            }
        }
        Round::Fired
    }

    /// Gives periodic timers their callbacks back after a round, queueing
    /// those parked meanwhile; the callbacks of timers cancelled while they
    /// ran go to `orphans`, for the caller to drop without the lock.
    fn give_back(&self, state: &mut State<Q>, ran: &mut Vec<Ran>, orphans: &mut Vec<Callback>) {
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
                entry.queued = queue.arm(entry.deadline, entry.slack, id);
                let deadline = entry.deadline;
                self.wake_for(state, deadline);
            }
        }
    }

    /// Counts a callback's panic and keeps its message.
    fn record_panic(&self, payload: &(dyn Any + Send)) {
        self.counters.panics.fetch_add(1, Ordering::Relaxed);
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with a payload that is not a string".into());
        *self.last_panic.lock() = Some(message);
    }

    /// Moves `unrecorded` lateness figures into the histogram, unless a
    /// reader is copying it: the copy of a histogram with an hour's range
    /// (some 270 kB) takes microseconds, which a timer must not wait for.
    fn record_lateness(&self, unrecorded: &mut Vec<u64>) {
        let Some(mut histogram) = self.lateness.try_lock() else {
            return;
        };
        for lateness in unrecorded.drain(..) {
            histogram.saturating_record(lateness);
        }
    }

    /// Takes due timers out of the queue, in at most `batch` steps; a
    /// periodic one is re-armed at its next expiry right away, its callback
    /// lent out.
    fn take_expired(&self, state: &mut State<Q>, now: u64, fired: &mut Vec<Fired>) {
        let State { queue, timers, .. } = state;
        let mut budget = self.batch;
        while let Some(id) = queue.poll(now, &mut budget) {
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
                    entry.queued = queue.arm(next, slack, id);
                    (entry.callback.take(), overruns, true)
                }
                None => (timers.remove(id).and_then(|e| e.callback), 0, false),
            };
            if let Some(callback) = callback {
                fired.push(Fired {
                    id,
                    expiry: Expiry {
                        deadline: Instant::from_nanos(deadline),
                        overruns,
                    },
                    late_from,
                    bound: late_from
                        .saturating_add(slack)
                        .saturating_add(self.grace.unwrap_or(0)),
                    periodic,
                    callback,
                });
            }
        }
    }
}

// Priority inheritance is Linux's (see `lock`), and so is /proc/thread-self.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    use super::*;
    use crate::Scheduling;

    /// The calling thread's priority as the kernel runs it now (field 18 of
    /// its stat: -1 - rt_priority for a real-time priority, boosted or not).
    fn effective_priority() -> i64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name, in parentheses, may hold spaces: count after it.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        fields[15].parse().unwrap()
    }

    #[test]
    fn a_caller_holding_the_hard_lock_runs_at_the_waiting_expiry_threads_priority() {
        const PRIORITY: i32 = 50;
        // The service's hard side, with an expiry thread of the test's own.
        let shared = crate::Builder::new().shared(Clock::new(), false).unwrap();
        let side = &shared.hard;
        let (tx, fired) = mpsc::channel();
        side.arm(Armed {
            deadline: timehands::now().as_nanos(),
            slack: 0,
            period: None,
            callback: Box::new(move |_| {
                let _ = tx.send(());
            }),
        });
        // This (normal-priority) thread holds the lock the expiry thread
        // needs for the due timer.
        let held = side.state.lock();
        let normal = effective_priority();
        let (scheduled, scheduling) = mpsc::channel();
        let expiry = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let _ = scheduled.send(crate::sched::request_fifo(PRIORITY));
                shared.hard.run();
            })
        };
        match scheduling.recv().unwrap() {
            Scheduling::Fifo { .. } => {}
            Scheduling::Normal { reason } => {
                eprintln!("skipped: the expiry thread may not have SCHED_FIFO ({reason})");
                drop(held);
                side.stop();
                expiry.join().unwrap();
                return;
            }
        }
        // Once the expiry thread blocks on the lock, the kernel lends its
        // priority to the holder (a plain mutex never would: this would
        // time out).
        let until = timehands::now() + Duration::from_secs(60);
        while effective_priority() != -1 - i64::from(PRIORITY) {
            assert!(
                timehands::now() < until,
                "the holder was not boosted: it runs at {}",
                effective_priority()
            );
            std::thread::yield_now();
        }
        drop(held);
        assert_eq!(effective_priority(), normal, "the boost ends with the lock");
        fired.recv_timeout(Duration::from_secs(60)).unwrap();
        side.stop();
        expiry.join().unwrap();
    }
}
