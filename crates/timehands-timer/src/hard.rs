//! `Hard`: the hard timers, in a deadline heap under a lock that no caller
//! waits for.
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
//! the pending requests is applied and what it made due is taken, and if
//! still none is, the alarm is set to the heap's earliest deadline, or to
//! come back within 100 µs while requests are left to apply (see `requests`
//! for those pushed meanwhile). Then the callbacks run, without the lock, so
//! that one may arm, cancel or reschedule timers, its own included.

use std::io;
use std::sync::Arc;

use timehands::{Clock, Instant};

use crate::alarm::Alarm;
use crate::control::{Control, Take};
use crate::heap::{DeadlineHeap, HeapKey};
use crate::lock::Lock;
use crate::periodic::forward;
use crate::record::{Due, Record};
use crate::requests::{Requests, Taken};
use crate::side::{Armed, Callback, Expiry, Round};
use crate::sync::{Ordering, fence};

/// How many requests a caller applies per hold of the hard lock: the most
/// the hard thread waits for (some microseconds; a batch that freed the
/// lock after every request would make the hard thread's wait no shorter
/// and the callers' lock traffic 64 times larger).
const HELP_BATCH: usize = 64;

/// How many requests the hard thread applies in a round that finds nothing
/// due (some tens of microseconds).
const IDLE_BATCH: usize = 256;

/// With requests left to apply, the hard thread comes back this soon (in
/// nanoseconds) rather than apply them all at once: a pile of thousands
/// (callers push millions a second) would hold a due timer up for
/// milliseconds.
const BACKLOG_POLL_NS: u64 = 100_000;

/// A hard timer's state, shared by its handles and the hard thread.
pub(crate) type HardControl = Control<Callback>;

/// Where a request queues its timer.
struct Place {
    deadline: u64,
    /// Where its lateness counts from: the deadline, or when it was armed
    /// or rescheduled if that was later.
    late_from: u64,
    /// The timer's version when the request was made: a request older than
    /// the timer's version is stale (a later one follows).
    version: u64,
}

/// What a caller asks of the hard thread.
struct Request {
    control: Arc<HardControl>,
    /// `Some` to queue the timer there (an arm, a reschedule), `None` to take
    /// a cancelled timer out of the queue.
    place: Option<Place>,
}

/// An expiry in the heap: of `control`, queued at `version`.
struct Queued {
    control: Arc<HardControl>,
    version: u64,
    late_from: u64,
}

struct State {
    heap: DeadlineHeap<Queued>,
    /// Requests taken off the stack and not applied yet, newest first (see
    /// `Requests::take`).
    taken: Vec<Taken<Request>>,
    /// What the alarm is set to (`u64::MAX` for nothing).
    alarm_at: u64,
    stopping: bool,
}

impl State {
    fn new() -> State {
        State {
            heap: DeadlineHeap::new(),
            taken: Vec::new(),
            alarm_at: u64::MAX,
            stopping: false,
        }
    }

    /// Queues an expiry of `control` at `version`, due at `deadline`.
    fn queue(&mut self, control: &Arc<HardControl>, deadline: u64, late_from: u64, version: u64) {
        let key = self.heap.push(
            deadline,
            Queued {
                control: Arc::clone(control),
                version,
                late_from,
            },
        );
        control.set_queued(Some(key.to_bits()));
        // A cancel that ran meanwhile may have looked at `queued` before it
        // was set, and sent no request (see `Hard::cancel`): each side
        // writes, fences, then reads the other's word.
        fence(Ordering::SeqCst);
        if control.version().is_none() {
            self.unqueue(control);
        }
    }

    /// Takes `control`'s queued expiry out of the heap, if it has one.
    fn unqueue(&mut self, control: &HardControl) {
        if let Some(bits) = control.queued() {
            self.heap.remove(HeapKey::from_bits(bits));
            control.set_queued(None);
        }
    }

    /// Applies one request (see [`Request`]).
    fn apply(&mut self, Request { control, place }: &Request) {
        match (place, control.version()) {
            // Current: the timer moves there.
            (Some(place), Some(version)) if place.version == version => {
                self.unqueue(control);
                self.queue(control, place.deadline, place.late_from, version);
            }
            // Done: out of the queue. (A stale place waits for the later
            // request that made it stale.)
            (_, None) => self.unqueue(control),
            (_, Some(_)) => {}
        }
    }
}

/// A timer taken out of the heap in a round, its callback the round's.
struct Fired {
    control: Arc<HardControl>,
    callback: Callback,
    due: Due,
    /// A periodic timer's next expiry, and the version it runs at.
    next: Option<(u64, u64)>,
}

/// A periodic timer whose callback ran, to queue again at `next`.
struct Ran {
    control: Arc<HardControl>,
    version: u64,
    next: u64,
}

/// The hard thread's buffers, kept from one round to the next.
pub(crate) struct HardRounds {
    fired: Vec<Fired>,
    ran: Vec<Ran>,
    unrecorded: Vec<u64>,
}

impl HardRounds {
    pub(crate) fn new() -> HardRounds {
        HardRounds {
            fired: Vec::new(),
            ran: Vec::new(),
            unrecorded: Vec::new(),
        }
    }

    /// Whether the last round left periodic timers for the next to queue.
    pub(crate) fn lent(&self) -> bool {
        !self.ran.is_empty()
    }
}

/// The hard timers; see the module docs.
pub(crate) struct Hard {
    state: Lock<State>,
    requests: Requests<Request>,
    alarm: Alarm,
    record: Record,
    batch: usize,
    clock: Clock,
}

impl Hard {
    pub(crate) fn new(batch: usize, clock: Clock) -> io::Result<Hard> {
        Ok(Hard {
            state: Lock::new(State::new(), true),
            requests: Requests::new(),
            alarm: Alarm::new()?,
            record: Record::new(true),
            batch,
            clock,
        })
    }

    /// After a fork: no timers, requests or statistics (the parent's are
    /// forgotten unread, see `fork`), and an alarm of the child's own; an
    /// error if that could not be made.
    ///
    /// # Safety
    ///
    /// No other thread may use the side during the call.
    pub(crate) unsafe fn reset_after_fork(&self) -> io::Result<()> {
        // SAFETY: passed on from the caller.
        unsafe {
            self.state.reset(State::new());
            self.requests.reset_after_fork();
            self.record.reset_after_fork();
            self.alarm.reset_after_fork()
        }
    }

    /// What the side keeps of its expiries.
    pub(crate) fn record(&self) -> &Record {
        &self.record
    }

    /// How many expiries are queued, the requests applied first.
    pub(crate) fn armed(&self) -> usize {
        let mut state = self.state.lock();
        self.apply_pending(&mut state);
        state.heap.len()
    }

    /// Arms a timer; its handle's control.
    pub(crate) fn arm(&self, timer: Armed) -> Arc<HardControl> {
        let now = self.clock.now().as_nanos();
        let control = Arc::new(Control::new(timer.callback, timer.period));
        let place = Place {
            deadline: timer.deadline,
            late_from: timer.deadline.max(now),
            version: 0,
        };
        // Refused only once the service has stopped: the timer is then
        // cancelled, and its handle's cancel says `false`.
        self.submit(&control, Some(place));
        control
    }

    /// Cancels a timer: whether its callback will not run again.
    pub(crate) fn cancel(&self, control: &Arc<HardControl>) -> bool {
        let Some(callback) = control.cancel() else {
            return false;
        };
        // Dropped here, on the caller's thread, without a lock.
        drop(callback);
        // A timer not in the heap (its arm not applied yet, or its expiry
        // taken) needs nothing more: a request still to come finds it done.
        // One being queued right now either is seen here or sees the
        // cancel (`State::queue`).
        fence(Ordering::SeqCst);
        if control.queued().is_some() {
            // Refused once the service has stopped: it cleared the heap.
            self.submit(control, None);
        }
        true
    }

    /// Moves a timer's next expiry; `false` if it is done.
    pub(crate) fn reschedule(&self, control: &Arc<HardControl>, deadline: u64) -> bool {
        let now = self.clock.now().as_nanos();
        let Some(version) = control.bump() else {
            return false;
        };
        let place = Place {
            deadline,
            late_from: deadline.max(now),
            version,
        };
        self.submit(control, Some(place))
    }

    /// Hands the hard thread a request, ringing its alarm if the timer is
    /// due before it; once the service has stopped, cancels the timer
    /// instead (nobody would apply the request) and returns `false`.
    fn submit(&self, control: &Arc<HardControl>, place: Option<Place>) -> bool {
        let due = place.as_ref().map(|place| place.deadline);
        let request = Request {
            control: Arc::clone(control),
            place,
        };
        match self.requests.push(request, due) {
            Ok(ring) => {
                // The caller does the work if the lock is free (see the
                // module docs); the alarm's ring does not wait for it.
                if ring {
                    self.alarm.set(Some(0));
                }
                self.help();
                true
            }
            Err(refused) => {
                drop(refused);
                drop(control.cancel());
                false
            }
        }
    }

    pub(crate) fn stop(&self) {
        let mut state = self.state.lock();
        state.stopping = true;
        self.alarm.set(Some(0));
    }

    /// Takes every timer out, for the caller to drop after the lock is
    /// released: the requests are refused from now on, and each timer is
    /// cancelled (its callback may hold handles on the service: dropped
    /// under the lock, one would take it again).
    #[must_use = "the callbacks are dropped after the lock is released"]
    pub(crate) fn clear(&self) -> Vec<Callback> {
        let mut controls = Vec::new();
        {
            let mut requests = Vec::new();
            self.requests.close(&mut requests);
            let mut state = self.state.lock();
            requests.append(&mut state.taken);
            controls.extend(requests.iter().map(|request| Arc::clone(&request.control)));
            while let Some((_, queued)) = state.heap.pop_expired(u64::MAX) {
                controls.push(queued.control);
            }
        }
        cancel_all(controls)
    }

    /// The hard thread: rounds until stopped.
    pub(crate) fn run(&self) {
        let mut rounds = HardRounds::new();
        loop {
            match self.round(&mut rounds) {
                Round::Stopped => return,
                Round::Idle => self.alarm.wait(),
                Round::Fired => {}
            }
        }
    }

    /// Now, on the side's clock.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// When the heap next has a timer due, the requests applied first.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        let mut state = self.state.lock();
        self.apply_pending(&mut state);
        state.heap.peek()
    }

    /// One round; see the module docs.
    pub(crate) fn round(&self, rounds: &mut HardRounds) -> Round {
        let HardRounds {
            fired,
            ran,
            unrecorded,
        } = rounds;
        {
            let mut state = self.state.lock();
            if state.stopping {
                drop(state);
                // Their callbacks are back in their controls, which only
                // this list still reaches besides the handles.
                drop(cancel_all(ran.drain(..).map(|ran| ran.control).collect()));
                return Round::Stopped;
            }
            for Ran {
                control,
                version,
                next,
            } in ran.drain(..)
            {
                // Rescheduled meanwhile: its request queues it; cancelled:
                // it is done.
                if control.version() == Some(version) {
                    state.queue(&control, next, next, version);
                }
            }
            let now = self.clock.now().as_nanos();
            self.take_expired(&mut state, now, fired);
            if fired.is_empty() {
                // Nothing due: a batch of the requests, and what it made due.
                self.apply_batch(&mut state, IDLE_BATCH);
                self.take_expired(&mut state, self.clock.now().as_nanos(), fired);
            }
            if fired.is_empty() {
                // The alarm is set only here, before a wait (the round after
                // one that fired follows at once), and even if unchanged: a
                // ring taken for a deadline that timehands' clock has not
                // reached yet (it may trail the kernel's by a little) must
                // ring again. Requests left to apply (the thread applies a
                // batch a round, so that no pile of them holds it, and a
                // due timer, up) bring it back soon.
                let soon = now.saturating_add(BACKLOG_POLL_NS);
                let mut at = state.heap.peek().unwrap_or(u64::MAX);
                loop {
                    self.set_alarm(&mut state, at);
                    // A caller that pushed before the alarm was set may
                    // have seen an earlier one and not rung: its request is
                    // taken now (one that pushes later sees this alarm, and
                    // rings if its timer is due before it), and looked at
                    // soon. Setting the alarm again drops any ring meanwhile,
                    // so the look is made again.
                    self.requests.take_after_alarm(&mut state.taken);
                    if state.taken.is_empty() || soon >= at {
                        return Round::Idle;
                    }
                    at = soon;
                }
            }
        }
        for Fired {
            control,
            mut callback,
            due,
            next,
        } in fired.drain(..)
        {
            let start = self.clock.now().as_nanos();
            let returned = self.record.run(&mut callback, due, start, unrecorded);
            let Some((next, version)) = next else {
                continue;
            };
            if !returned {
                // Left armed, a timer whose callback panicked would be
                // re-armed every period with nothing to run, for ever.
                control.disarm();
            } else if control.give_back(callback).is_none() {
                ran.push(Ran {
                    control,
                    version,
                    next,
                });
            }
        }
        Round::Fired
    }

    /// A caller's share of the work, while the lock is free: the pending
    /// requests, oldest first, [`HELP_BATCH`] at a time, letting go of the
    /// lock between batches, so that the hard thread, should it need the
    /// lock, waits for no more than a batch (a priority-inheriting unlock
    /// hands the lock to its waiter). It stops once it has applied what it
    /// took: requests pushed meanwhile have callers of their own.
    fn help(&self) {
        let mut took = false;
        while let Some(mut state) = self.state.try_lock() {
            if state.taken.is_empty() && took {
                return;
            }
            took = true;
            if !self.apply_batch(&mut state, HELP_BATCH) {
                return;
            }
        }
    }

    /// Applies at most `batch` requests, oldest first, taking the stack if
    /// none is taken; whether requests are left taken.
    fn apply_batch(&self, state: &mut State, batch: usize) -> bool {
        if state.taken.is_empty() {
            self.requests.take(&mut state.taken);
        }
        for _ in 0..batch {
            let Some(request) = state.taken.pop() else {
                return false;
            };
            self.apply(state, request);
        }
        !state.taken.is_empty()
    }

    /// Applies every request taken so far, then every request on the stack
    /// now (one take: requests pushed meanwhile wait for the next).
    fn apply_pending(&self, state: &mut State) {
        self.apply_taken(state);
        self.requests.take(&mut state.taken);
        self.apply_taken(state);
    }

    /// Applies every request taken so far.
    fn apply_taken(&self, state: &mut State) {
        while let Some(request) = state.taken.pop() {
            self.apply(state, request);
        }
    }

    /// Applies one request and gives it back for a caller to drop.
    fn apply(&self, state: &mut State, request: Taken<Request>) {
        state.apply(&request);
        self.requests.discard(request);
    }

    /// Sets the alarm to `at` (`u64::MAX` for none), telling callers first.
    fn set_alarm(&self, state: &mut State, at: u64) {
        self.requests.set_alarm_at(at);
        self.alarm.set((at != u64::MAX).then_some(at));
        state.alarm_at = at;
    }

    /// Takes due timers out of the heap, at most a batch; a periodic one's
    /// next expiry is computed now and queued when its callback is back.
    fn take_expired(&self, state: &mut State, now: u64, fired: &mut Vec<Fired>) {
        for _ in 0..self.batch {
            let Some((deadline, queued)) = state.heap.pop_expired(now) else {
                return;
            };
            let Queued {
                control,
                version,
                late_from,
            } = queued;
            control.set_queued(None);
            // At the end of time (u64::MAX ns, reached only on simulated
            // time) a periodic timer's next expiry saturates at `now`: the
            // series has no expiry after it, so it ends there, as a
            // one-shot timer.
            let series = control
                .period()
                .map(|period| forward(deadline, now, period))
                .filter(|&(next, _)| next > now);
            let Take::Fire(callback) = control.take(version, series.is_some()) else {
                continue;
            };
            fired.push(Fired {
                control,
                callback,
                due: Due {
                    expiry: Expiry {
                        deadline: Instant::from_nanos(deadline),
                        overruns: series.map_or(0, |(_, overruns)| overruns),
                    },
                    late_from,
                    bound: None,
                },
                next: series.map(|(next, _)| (next, version)),
            });
        }
    }
}

/// Cancels each timer, returning the callbacks taken (for the caller to
/// drop outside any lock).
fn cancel_all(controls: Vec<Arc<HardControl>>) -> Vec<Callback> {
    controls
        .into_iter()
        .filter_map(|control| control.cancel().flatten())
        .collect()
}

// Priority inheritance is Linux's (see `lock`), and so is /proc/thread-self.
#[cfg(all(test, target_os = "linux"))]
mod tests;
