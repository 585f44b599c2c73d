//! `Side`: what the hard and the soft side are both made of: timers whose
//! state is a `Control`, armed, cancelled and rescheduled through lock-free
//! `Requests`, queued under the side's lock in the side's [`Queue`] (the
//! hard side's deadline heap, the soft side's wheel), and run and recorded
//! by the side's expiry threads. `hard` and `soft` add their rounds.
//!
//! No caller waits for a side's lock: each pushes a request (an arm, a
//! reschedule, or a cancel's taking its timer out of the queue) and rings
//! the side's alarm if its timer is due before it (see `requests`). Who
//! applies the requests depends on the side:
//!
//! - on the hard side, whose expiry thread is real-time, each caller applies
//!   a batch of the pending requests itself if the lock is free (see
//!   [`Side::help`]), so that the callers' work stays off the real-time
//!   thread (see `hard`), except around a deadline the thread sleeps for,
//!   when callers keep off the lock and leave it what they push;
//! - on the soft side, the workers apply them, a batch in each round that
//!   finds no timer due and no other worker's callbacks in need of its CPU
//!   (see `soft` and `sharing`), so that no caller holds the soft
//!   lock: one preempted while it held it would keep the workers waiting
//!   for as long as the scheduler kept it off the CPU (nothing lends a
//!   normal thread's priority to a lock's holder), and a pile of requests
//!   delays a due timer by one batch at most. Only past [`SOFT_BACKLOG`] requests not
//!   applied yet does a caller apply some, a batch a request, waiting for
//!   the lock if it must: the workers run at a lower priority, and threads
//!   arming timers non-stop could otherwise pile up requests, and memory,
//!   without end (four threads arming and cancelling 1.5 M soft timers
//!   each on two CPUs left 6 M requests, 1 GB, for the workers; trying the
//!   lock, as on the hard side, was no brake: the workers, preempted while
//!   they held it, kept the callers out).
//!
//! Whoever applies requests takes them as `requests` says: the stack whole,
//! with one exchange, walked [`WALK_BATCH`] nodes a call (the walk is kept
//! in the side's state between calls), its requests applied oldest first
//! once it is walked whole, and the stack taken again once they all are.
//! So no call of an expiry thread, nor a caller's batch, walks a pile.
//!
//! A round takes the due expiries out of the queue under the lock, at most
//! a batch, and runs their callbacks without it, so that a callback may arm,
//! cancel or reschedule timers, its own included (see `round`, and `queue`
//! for what a side asks of its heap or wheel).

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use timehands::{Clock, Instant};

use crate::alarm::Alarm;
use crate::control::Control;
use crate::expiry::{Armed, Callback};
use crate::lock::Lock;
use crate::record::Record;
use crate::requests::{Requests, Taken, Walk};
use crate::sharing::Sharing;
use crate::sync::{Ordering, fence};

mod queue;
mod round;

pub(crate) use queue::Queue;
pub(crate) use round::Rounds;

/// How many requests a caller applies per hold of a side's lock: the most
/// the hard thread waits for (some microseconds; a batch that freed the
/// lock after every request would make the hard thread's wait no shorter
/// and the callers' lock traffic 64 times larger).
const HELP_BATCH: usize = 64;

/// How long before the deadline the hard thread sleeps for hard callers
/// stop taking the lock to apply requests (see [`Side::help`]), in ns:
/// about a caller's batch (a walk of [`WALK_BATCH`] nodes took 18 µs in the
/// median), so that most batches begun before it are done when the timer
/// is due. (Looked at before each batch, with the window opening 60 µs
/// before the deadline, the callers left so much to the hard thread in one
/// run of three that its p99 rose to 93-116 µs, against 57-63 µs.)
const KEEP_OFF_BEFORE_NS: u64 = 20_000;

/// How long after that deadline callers still keep off the lock, in ns,
/// unless the hard thread has begun its round: its wakeup's usual lateness
/// (under 100 µs at the 99th percentile on a virtual machine). Beyond it,
/// a hard thread kept from the CPU finds the callers applying requests
/// again, so that they do not pile up.
const KEEP_OFF_AFTER_NS: u64 = 200_000;

/// How many nodes of a taken chain of requests a call walks at most (see
/// `requests`): some tens of microseconds. On a 2-vCPU Intel Xeon guest,
/// walks of 1024 nodes while four threads pushed took 18 µs of CPU in the
/// median and 40 µs at the 99th percentile (11-19 ns a node, a cache miss
/// each); the hard thread's first round after 400 000 requests piled up
/// took 21-50 µs, where walking the pile whole took 11-12 ms.
pub(crate) const WALK_BATCH: usize = 1024;

/// Requests not applied yet past which soft callers apply some too (see
/// the module docs): some 40 MB of requests, and more than a pile of
/// 100 000 timers armed at once.
const SOFT_BACKLOG: u64 = 1 << 18;

/// A timer's state, shared by its handles and its side.
pub(crate) type TimerControl = Control<Callback>;

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

/// What a caller asks of a side.
pub(crate) struct Request {
    control: Arc<TimerControl>,
    /// `Some` to queue the timer there (an arm, a reschedule), `None` to take
    /// a cancelled timer out of the queue.
    place: Option<Place>,
}

/// An expiry in a queue: of `control`, queued at `version`.
pub(crate) struct Queued {
    control: Arc<TimerControl>,
    version: u64,
    deadline: u64,
    late_from: u64,
}

/// What a side keeps under its lock.
pub(crate) struct State<Q> {
    pub(crate) queue: Q,
    /// Requests taken off the stack and not applied yet: a chain being
    /// walked, [`WALK_BATCH`] nodes a call, then applied oldest first (see
    /// `requests`). The stack is taken again once it is empty.
    pub(crate) walk: Walk<Request>,
    /// Expiries that came due while their timers' callbacks ran on another
    /// worker (see `control`): queued again, due, by the next round.
    busy: Vec<Queued>,
    /// What the alarm is set to (`u64::MAX` for nothing).
    pub(crate) alarm_at: u64,
    pub(crate) stopping: bool,
}

impl<Q: Queue> State<Q> {
    fn new(queue: Q) -> State<Q> {
        State {
            queue,
            walk: Walk::new(),
            busy: Vec::new(),
            alarm_at: u64::MAX,
            stopping: false,
        }
    }

    /// Queues an expiry of `control` at `version`, due at `deadline`.
    fn queue(&mut self, control: &Arc<TimerControl>, deadline: u64, late_from: u64, version: u64) {
        let expiry = Queued {
            control: Arc::clone(control),
            version,
            deadline,
            late_from,
        };
        let bits = self.queue.enqueue(deadline, control.slack(), expiry);
        control.set_queued(Some(bits));
        // A cancel that ran meanwhile may have looked at `queued` before it
        // was set, and sent no request (see `Side::cancel`): each side
        // writes, fences, then reads the other's word.
        fence(Ordering::SeqCst);
        if control.version().is_none() {
            self.unqueue(control);
        }
    }

    /// Takes `control`'s queued expiry out of the queue, if it has one.
    fn unqueue(&mut self, control: &TimerControl) {
        if let Some(bits) = control.queued() {
            self.queue.dequeue(bits);
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

/// One side's timers; see the module docs.
pub(crate) struct Side<Q> {
    pub(crate) state: Lock<State<Q>>,
    pub(crate) requests: Requests<Request>,
    pub(crate) alarm: Alarm,
    record: Record,
    pub(crate) batch: usize,
    /// Whether the side's expiry thread is real-time: its lock then lends
    /// priority, and callers apply requests (see the module docs).
    realtime: bool,
    clock: Clock,
    /// The deadline of a timer the expiry thread sleeps for, until its
    /// next round begins (`u64::MAX` for none, and while it sleeps only to
    /// come back for requests): hard callers keep off the lock around it
    /// (see [`Side::help`]). A hint, read and written relaxed: a stale one
    /// costs a batch applied, or not, a little early or late.
    sleeps_for: AtomicU64,
    /// The soft workers' callbacks and batches of requests (see `sharing`).
    pub(crate) sharing: Sharing,
}

impl<Q: Queue> Side<Q> {
    pub(crate) fn new(queue: Q, realtime: bool, batch: usize, clock: Clock) -> io::Result<Side<Q>> {
        Ok(Side {
            state: Lock::new(State::new(queue), realtime),
            requests: Requests::new(),
            alarm: Alarm::new()?,
            record: Record::new(realtime),
            batch,
            realtime,
            clock,
            sleeps_for: AtomicU64::new(u64::MAX),
            sharing: Sharing::for_this_process(),
        })
    }

    /// After a fork: the side afresh around `queue`, its timers, requests
    /// and statistics forgotten unread (see `fork`), and an alarm of the
    /// child's own; an error if that could not be made.
    ///
    /// # Safety
    ///
    /// No other thread may use the side during the call.
    pub(crate) unsafe fn reset_after_fork(&self, queue: Q) -> io::Result<()> {
        // SAFETY: passed on from the caller.
        unsafe {
            self.state.reset(State::new(queue));
            self.requests.reset_after_fork();
            self.record.reset_after_fork();
            self.sleeps_for.store(u64::MAX, Ordering::Relaxed);
            self.sharing.reset_after_fork();
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
        state.queue.count()
    }

    /// Now, on the side's clock.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// When the queue next has work, the requests applied first.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        let mut state = self.state.lock();
        self.apply_pending(&mut state);
        state.queue.next_work()
    }

    /// Arms a timer; its handle's control.
    pub(crate) fn arm(&self, timer: Armed) -> Arc<TimerControl> {
        let now = self.clock.now().as_nanos();
        let control = Arc::new(Control::new(timer.callback, timer.period, timer.slack));
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
    pub(crate) fn cancel(&self, control: &Arc<TimerControl>) -> bool {
        let Some(callback) = control.cancel() else {
            return false;
        };
        // Dropped here, on the caller's thread, without a lock.
        drop(callback);
        // A timer not in the queue (its arm not applied yet, or its expiry
        // taken) needs nothing more: a request still to come finds it done.
        // One being queued right now either is seen here or sees the
        // cancel (`State::queue`).
        fence(Ordering::SeqCst);
        if control.queued().is_some() {
            // Refused once the service has stopped: it cleared the queue.
            self.submit(control, None);
        }
        true
    }

    /// Moves a timer's next expiry; `false` if it is done.
    pub(crate) fn reschedule(&self, control: &Arc<TimerControl>, deadline: u64) -> bool {
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

    /// Hands the side a request, ringing its alarm if the timer is due
    /// before it; once the service has stopped, cancels the timer instead
    /// (nobody would apply the request) and returns `false`.
    fn submit(&self, control: &Arc<TimerControl>, place: Option<Place>) -> bool {
        let due = place.as_ref().map(|place| place.deadline);
        let request = Request {
            control: Arc::clone(control),
            place,
        };
        match self.requests.push(request, due) {
            Ok(ring) => {
                // On the hard side the caller does the work if the lock is
                // free, and past the soft backlog it does some in any case
                // (see the module docs); the alarm's ring does not wait for
                // it.
                if ring {
                    self.alarm.set(Some(0));
                }
                if self.realtime {
                    self.help();
                } else if self.requests.pending() > SOFT_BACKLOG {
                    self.apply_batch(&mut self.state.lock(), HELP_BATCH);
                }
                true
            }
            Err(refused) => {
                drop(refused);
                drop(control.cancel());
                false
            }
        }
    }

    /// A hard caller's share of the work, while the lock is free: the
    /// pending requests, oldest first, a batch at a time (at most
    /// [`WALK_BATCH`] nodes of the taken chain walked and [`HELP_BATCH`]
    /// requests applied), letting go of the lock between batches, so that
    /// the hard thread, should it need the lock, waits for no more than a
    /// batch (a priority-inheriting unlock hands the lock to its waiter).
    /// It stops once it has applied what it took: requests pushed
    /// meanwhile have callers of their own.
    ///
    /// Around the deadline the hard thread sleeps for (from
    /// [`KEEP_OFF_BEFORE_NS`] before it until the thread begins its round,
    /// or [`KEEP_OFF_AFTER_NS`] after it) the caller leaves the requests to
    /// later callers, so that the hard thread, waking for its timer, finds
    /// the lock free rather than waits for a batch: through a
    /// priority-inheriting lock, that wait is a sleep in the kernel and a
    /// wakeup after it, tens of microseconds on a virtual machine. (The
    /// window is the deadline the thread sleeps for, not the queue's
    /// earliest: a timer at the top whose cancel is not applied yet would
    /// keep callers off with no timer to fire.)
    fn help(&self) {
        // Looked at once: a caller that began before the window goes on
        // letting go between batches, so the hard thread waits for one at
        // most, as outside it.
        if self.hard_timer_due_about_now() {
            return;
        }
        let mut took = false;
        while let Some(mut state) = self.state.try_lock() {
            if state.walk.is_empty() && took {
                return;
            }
            took = true;
            if !self.apply_batch(&mut state, HELP_BATCH) {
                return;
            }
        }
    }

    /// Whether it is about time for the deadline the hard thread sleeps
    /// for (see [`help`](Side::help)).
    fn hard_timer_due_about_now(&self) -> bool {
        let due = self.sleeps_for.load(Ordering::Relaxed);
        if due == u64::MAX {
            return false;
        }
        let now = self.clock.now().as_nanos();
        now.saturating_add(KEEP_OFF_BEFORE_NS) >= due
            && now <= due.saturating_add(KEEP_OFF_AFTER_NS)
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
            let mut state = self.state.lock();
            self.requests.close(&mut state.walk, &mut requests);
            controls.extend(requests.iter().map(|request| Arc::clone(&request.control)));
            let busy = std::mem::take(&mut state.busy);
            controls.extend(busy.into_iter().map(|expiry| expiry.control));
            let mut unlimited = usize::MAX;
            while let Some(expiry) = state.queue.pop_due(u64::MAX, &mut unlimited) {
                controls.push(expiry.control);
            }
        }
        cancel_all(controls)
    }

    /// Walks at most [`WALK_BATCH`] nodes of the taken chain, taking the
    /// stack if nothing is taken, and, once the chain is walked whole,
    /// applies at most `batch` of its requests, oldest first; whether
    /// requests are left taken (to walk or to apply).
    pub(crate) fn apply_batch(&self, state: &mut State<Q>, batch: usize) -> bool {
        self.requests.take(&mut state.walk);
        state.walk.walk(WALK_BATCH);
        for _ in 0..batch {
            let Some(request) = state.walk.pop_oldest() else {
                break;
            };
            self.apply(state, request);
        }
        !state.walk.is_empty()
    }

    /// Applies every request taken so far, then every request on the stack
    /// now (one take: requests pushed meanwhile wait for the next). Each
    /// chain is walked whole at once: only `armed` and `next_deadline` call
    /// this, for `Debug` and simulated time, never an expiry thread.
    fn apply_pending(&self, state: &mut State<Q>) {
        self.apply_taken(state);
        self.requests.take(&mut state.walk);
        self.apply_taken(state);
    }

    /// Applies every request taken so far, walking the whole chain.
    fn apply_taken(&self, state: &mut State<Q>) {
        state.walk.walk(usize::MAX);
        while let Some(request) = state.walk.pop_oldest() {
            self.apply(state, request);
        }
    }

    /// Applies one request and gives it back for a caller to drop.
    fn apply(&self, state: &mut State<Q>, request: Taken<Request>) {
        state.apply(&request);
        self.requests.discard(request);
    }
}

/// Cancels each timer, returning the callbacks taken (for the caller to
/// drop outside any lock).
fn cancel_all(controls: Vec<Arc<TimerControl>>) -> Vec<Callback> {
    controls
        .into_iter()
        .filter_map(|control| control.cancel().flatten())
        .collect()
}

#[cfg(test)]
mod tests;
