//! `TimerService`: hard timers on a real-time thread, soft timers on a
//! worker of their own; see [`TimerService`].

use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use hdrhistogram::Histogram;
use timehands::{Clock, Instant};

use crate::alarm::Alarm;
use crate::arena::{Arena, Key};
use crate::heap::{DeadlineHeap, HeapKey};
use crate::periodic::forward;
use crate::sched::{self, Scheduling};
use crate::wheel::{Wheel, WheelKey};

/// What a callback is told when its timer fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The deadline this expiry is for.
    pub deadline: Instant,
    /// For a periodic timer, how many expiries after this one were already
    /// past when it fired and are skipped (see [`forward`]); 0 for a
    /// one-shot timer.
    pub overruns: u64,
}

type Callback = Box<dyn FnMut(Expiry) + Send>;

/// The lateness histograms count nanoseconds up to an hour; later is
/// recorded as an hour.
const LATENESS_MAX_NS: u64 = 3_600_000_000_000;

/// Builds a [`TimerService`] with non-default settings.
#[derive(Clone, Debug)]
pub struct Builder {
    soft_tick_shift: u32,
    batch: usize,
    priority: Option<i32>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            soft_tick_shift: 20,
            batch: 64,
            priority: Some(50),
        }
    }
}

impl Builder {
    /// The defaults: soft ticks of 2^20 ns (about 1 ms), batches of 64
    /// expiries, SCHED_FIFO priority 50 asked for the hard thread.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Soft-timer ticks of 2^`shift` ns: a soft timer may fire up to one
    /// tick after its deadline plus slack. At most 40 (about 18 minutes).
    pub fn soft_tick_shift(mut self, shift: u32) -> Builder {
        self.soft_tick_shift = shift.min(40);
        self
    }

    /// The most steps an expiry thread takes per round (at least 1) before
    /// it lets go of its queue's lock: a step is an expiry, or on the soft
    /// side also the move of a timer down the wheel.
    pub fn batch(mut self, batch: usize) -> Builder {
        self.batch = batch.max(1);
        self
    }

    /// The SCHED_FIFO priority asked for the hard thread, or `None` to leave
    /// it at SCHED_OTHER.
    pub fn realtime_priority(mut self, priority: Option<i32>) -> Builder {
        self.priority = priority;
        self
    }

    /// The two queues, on `clock`.
    pub(crate) fn shared(&self, clock: Clock) -> io::Result<Arc<Shared>> {
        Ok(Arc::new(Shared {
            hard: Side::new(DeadlineHeap::new(), self.batch, clock.clone())?,
            soft: Side::new(Wheel::new(self.soft_tick_shift), self.batch, clock)?,
        }))
    }

    /// Starts the two expiry threads.
    pub fn build(self) -> io::Result<TimerService> {
        let shared = self.shared(Clock::new())?;
        // The service exists before its threads so that, if one cannot be
        // started, dropping it stops and joins the one that was; the
        // placeholder scheduling is replaced before anyone can read it.
        let mut service = TimerService {
            shared,
            threads: Vec::with_capacity(2),
            scheduling: Scheduling::Normal {
                reason: "the hard thread has not started".into(),
            },
        };
        let (tx, rx) = mpsc::channel();
        let hard = {
            let shared = Arc::clone(&service.shared);
            let priority = self.priority;
            thread::Builder::new()
                .name("timehands-hard".into())
                .spawn(move || {
                    let scheduling = sched::precise_thread(priority);
                    // The builder waits for this; it cannot have gone.
                    let _ = tx.send(scheduling);
                    shared.hard.run();
                })?
        };
        service.threads.push(hard);
        let soft = {
            let shared = Arc::clone(&service.shared);
            thread::Builder::new()
                .name("timehands-soft".into())
                .spawn(move || {
                    sched::lower_priority(10);
                    shared.soft.run();
                })?
        };
        service.threads.push(soft);
        service.scheduling = rx
            .recv()
            .map_err(|_| io::Error::other("hard thread died"))?;
        Ok(service)
    }
}

/// The timer service: hard timers on a real-time thread, soft timers on a
/// worker of their own, so that no pile of soft timers delays a hard one.
///
/// This is the user-space answer to the hrtimer stacking seen on PREEMPT_RT: there,
/// the expiry work of many sloppy timers (sleeps and timeouts of ordinary
/// threads) ran in the same queue, in front of the one precise deadline of a
/// real-time thread. Here the two kinds never share anything on the expiry
/// path:
///
/// - hard timers live in a [`DeadlineHeap`], under their own lock, expired by
///   a thread that asks for SCHED_FIFO (see [`TimerService::scheduling`]) and
///   a 1 ns timer slack;
/// - soft timers live in a [`Wheel`], under another lock, expired by a
///   worker at a lower nice value, coalesced within their slack.
///
/// Each thread sleeps on a timerfd set to the absolute deadline of its queue
/// (CLOCK_MONOTONIC, the origin of `timehands::Instant`); arming an earlier
/// timer moves the timerfd earlier. Each expiry round takes at most a batch
/// of timers out under the lock (on the soft side, the moves down the wheel
/// that reach them count against the same batch), then runs their
/// callbacks without it (so a callback may arm, cancel or reschedule
/// timers, its own included), and records each one's lateness (callback
/// start minus deadline) in the side's histogram.
///
/// What is due is decided on timehands' clock, so that no callback sees
/// `timehands::now()` before its deadline, while the kernel wakes the thread
/// on CLOCK_MONOTONIC: should timehands' clock trail the kernel's, a thread
/// woken at the deadline finds nothing due yet and sets its alarm again,
/// spinning for as long as the clocks differ.
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use timehands_timer::TimerService;
///
/// let service = TimerService::new()?;
/// let (tx, rx) = mpsc::channel();
/// let soon = timehands::now() + Duration::from_millis(1);
/// service.hard_at(soon, move |expiry| tx.send(expiry.deadline).unwrap());
/// assert_eq!(rx.recv().unwrap(), soon);
/// assert_eq!(service.hard_lateness().len(), 1);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// Dropping the service stops its threads once their current callbacks
/// return; timers still armed never fire. A callback may drop it too (when
/// it holds the last reference): its own thread then ends after it returns.
pub struct TimerService {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    scheduling: Scheduling,
}

/// A handle on an armed timer. Dropping it leaves the timer armed.
#[derive(Clone)]
pub struct Timer {
    shared: Arc<Shared>,
    id: Key,
    hard: bool,
}

pub(crate) struct Shared {
    pub(crate) hard: Side<DeadlineHeap<Key>>,
    pub(crate) soft: Side<Wheel<Key>>,
}

impl TimerService {
    /// A service on `shared` with no expiry threads (simulated time fires
    /// its timers), scheduled as `scheduling` says.
    pub(crate) fn without_threads(shared: Arc<Shared>, scheduling: Scheduling) -> TimerService {
        TimerService {
            shared,
            threads: Vec::new(),
            scheduling,
        }
    }

    /// A service with the [`Builder`]'s defaults.
    pub fn new() -> io::Result<TimerService> {
        Builder::new().build()
    }

    /// How the hard expiry thread is scheduled: SCHED_FIFO, or why not.
    pub fn scheduling(&self) -> &Scheduling {
        &self.scheduling
    }

    /// A hard timer: `callback` runs on the hard thread at `deadline`.
    pub fn hard_at(
        &self,
        deadline: Instant,
        callback: impl FnMut(Expiry) + Send + 'static,
    ) -> Timer {
        self.arm(true, deadline, Duration::ZERO, None, Box::new(callback))
    }

    /// A periodic hard timer: first at `first`, then every `period` (a
    /// period of zero is taken as 1 ns).
    pub fn hard_periodic(
        &self,
        first: Instant,
        period: Duration,
        callback: impl FnMut(Expiry) + Send + 'static,
    ) -> Timer {
        self.arm(
            true,
            first,
            Duration::ZERO,
            Some(period),
            Box::new(callback),
        )
    }

    /// A soft timer: `callback` runs on the soft worker between `deadline`
    /// and `deadline + slack` (plus one soft tick).
    pub fn soft_at(
        &self,
        deadline: Instant,
        slack: Duration,
        callback: impl FnMut(Expiry) + Send + 'static,
    ) -> Timer {
        self.arm(false, deadline, slack, None, Box::new(callback))
    }

    /// A periodic soft timer: first at `first`, then every `period` (zero
    /// is taken as 1 ns), each expiry within `slack` (plus one soft tick).
    pub fn soft_periodic(
        &self,
        first: Instant,
        period: Duration,
        slack: Duration,
        callback: impl FnMut(Expiry) + Send + 'static,
    ) -> Timer {
        self.arm(false, first, slack, Some(period), Box::new(callback))
    }

    /// The hard timers' lateness so far, in nanoseconds.
    ///
    /// The copy is made under a lock that the expiry thread never waits
    /// for: an expiry it records while a copy is being made joins the
    /// histogram at the thread's next expiry.
    pub fn hard_lateness(&self) -> Histogram<u64> {
        self.shared.hard.lateness()
    }

    /// The soft timers' lateness so far (from the deadline, so slack
    /// included), in nanoseconds; copied as [`TimerService::hard_lateness`]
    /// is.
    pub fn soft_lateness(&self) -> Histogram<u64> {
        self.shared.soft.lateness()
    }

    fn arm(
        &self,
        hard: bool,
        deadline: Instant,
        slack: Duration,
        period: Option<Duration>,
        callback: Callback,
    ) -> Timer {
        let timer = Armed {
            deadline: deadline.as_nanos(),
            slack: saturating_nanos(slack),
            period: period.map(saturating_nanos),
            callback,
        };
        let id = if hard {
            self.shared.hard.arm(timer)
        } else {
            self.shared.soft.arm(timer)
        };
        Timer {
            shared: Arc::clone(&self.shared),
            id,
            hard,
        }
    }
}

impl Drop for TimerService {
    fn drop(&mut self) {
        self.shared.hard.stop();
        self.shared.soft.stop();
        let current = thread::current().id();
        for thread in self.threads.drain(..) {
            // Dropped by one of its own callbacks: that thread stops when the
            // callback returns, and joining it would wait for itself.
            if thread.thread().id() != current {
                // A thread only ends by stopping; callbacks' panics are caught.
                let _ = thread.join();
            }
        }
    }
}

impl fmt::Debug for TimerService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerService")
            .field("scheduling", &self.scheduling)
            .field("hard_armed", &lock(&self.shared.hard.state).timers.len())
            .field("soft_armed", &lock(&self.shared.soft.state).timers.len())
            .finish()
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("hard", &self.hard)
            .field("id", &self.id)
            .finish()
    }
}

impl Timer {
    /// Disarms the timer: `true` means its callback will not run again.
    /// `false` if it was cancelled already, or is a one-shot timer that has
    /// fired: taken out of its queue by the expiry thread, so that its
    /// callback has run, runs or is about to (a periodic timer cancelled
    /// while its callback runs stops after that run), or a periodic timer
    /// whose callback panicked.
    pub fn cancel(&self) -> bool {
        if self.hard {
            self.shared.hard.cancel(self.id)
        } else {
            self.shared.soft.cancel(self.id)
        }
    }

    /// Moves the timer's next expiry to `deadline` (a periodic timer keeps
    /// its period from there); `false` if it had already fired or was
    /// cancelled.
    pub fn reschedule(&self, deadline: Instant) -> bool {
        if self.hard {
            self.shared.hard.reschedule(self.id, deadline.as_nanos())
        } else {
            self.shared.soft.reschedule(self.id, deadline.as_nanos())
        }
    }
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

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
struct Armed {
    deadline: u64,
    slack: u64,
    period: Option<u64>,
    callback: Callback,
}

/// A timer in a side's registry.
struct Entry<K> {
    /// Its key in the queue.
    queued: K,
    deadline: u64,
    slack: u64,
    period: Option<u64>,
    /// `None` while the callback of a periodic timer runs (it is lent to
    /// the expiry thread).
    callback: Option<Callback>,
}

/// One timer taken out of the queue in an expiry round.
struct Fired {
    id: Key,
    expiry: Expiry,
    periodic: bool,
    callback: Callback,
}

/// One kind of timer: its queue and registry under one lock, the alarm its
/// expiry thread sleeps on, its lateness histogram, and the clock that says
/// what is due.
pub(crate) struct Side<Q: Queue> {
    state: Mutex<State<Q>>,
    alarm: Alarm,
    lateness: Mutex<Histogram<u64>>,
    batch: usize,
    clock: Clock,
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

/// An expiry round's buffers, kept from one round to the next.
pub(crate) struct Rounds {
    fired: Vec<Fired>,
    unrecorded: Vec<u64>,
}

impl Rounds {
    pub(crate) fn new() -> Rounds {
        Rounds {
            fired: Vec::new(),
            unrecorded: Vec::new(),
        }
    }
}

struct State<Q: Queue> {
    queue: Q,
    timers: Arena<Entry<Q::QueueKey>>,
    /// The alarm's deadline while the expiry thread sleeps (`u64::MAX` for
    /// none); `None` while it is awake and will look at the queue again.
    sleeping_until: Option<u64>,
    stopping: bool,
}

impl<Q: Queue> State<Q> {
    /// Removes timer `id` from the registry and its queue, and returns its
    /// entry; `None` if it is not registered.
    #[must_use = "an entry's callback is dropped after the lock is released"]
    fn disarm(&mut self, id: Key) -> Option<Entry<Q::QueueKey>> {
        let entry = self.timers.remove(id)?;
        self.queue.disarm(entry.queued);
        Some(entry)
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Callbacks run outside the locks and their panics are caught, so a
    // poisoned lock still guards consistent data.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<Q: Queue> Side<Q> {
    fn new(queue: Q, batch: usize, clock: Clock) -> io::Result<Side<Q>> {
        Ok(Side {
            state: Mutex::new(State {
                queue,
                timers: Arena::new(),
                sleeping_until: None,
                stopping: false,
            }),
            alarm: Alarm::new()?,
            lateness: Mutex::new(
                Histogram::new_with_max(LATENESS_MAX_NS, 3).expect("valid histogram bounds"),
            ),
            batch,
            clock,
        })
    }

    fn lateness(&self) -> Histogram<u64> {
        lock(&self.lateness).clone()
    }

    fn arm(&self, timer: Armed) -> Key {
        let mut state = lock(&self.state);
        let State { queue, timers, .. } = &mut *state;
        let id = timers.insert_with(|id| Entry {
            queued: queue.arm(timer.deadline, timer.slack, id),
            deadline: timer.deadline,
            slack: timer.slack,
            period: timer.period,
            callback: Some(timer.callback),
        });
        self.wake_for(&mut state, timer.deadline);
        id
    }

    fn cancel(&self, id: Key) -> bool {
        // The entry outlives the guard: dropping its callback runs the
        // destructors of what it captured, which may call into the service
        // (dropping the last reference to it stops its threads, under this
        // lock).
        let entry = lock(&self.state).disarm(id);
        entry.is_some()
    }

    fn reschedule(&self, id: Key, deadline: u64) -> bool {
        let mut state = lock(&self.state);
        let State { queue, timers, .. } = &mut *state;
        let Some(entry) = timers.get_mut(id) else {
            return false;
        };
        queue.disarm(entry.queued);
        entry.deadline = deadline;
        entry.queued = queue.arm(deadline, entry.slack, id);
        self.wake_for(&mut state, deadline);
        true
    }

    /// After arming a timer due at `deadline`: moves a sleeping expiry
    /// thread's alarm earlier if the queue's next deadline now is.
    fn wake_for(&self, state: &mut State<Q>, deadline: u64) {
        // The queue files a timer at or after its deadline, so a deadline
        // at or after the alarm cannot make the alarm early enough already.
        let Some(alarm) = state.sleeping_until else {
            return;
        };
        if deadline >= alarm {
            return;
        }
        if let Some(next) = state.queue.next_deadline().filter(|&n| n < alarm) {
            self.alarm.set(Some(next));
            state.sleeping_until = Some(next);
        }
    }

    fn stop(&self) {
        let mut state = lock(&self.state);
        state.stopping = true;
        self.alarm.set(Some(0));
    }

    /// The expiry thread: rounds of at most `batch` steps until stopped.
    fn run(&self) {
        let mut rounds = Rounds::new();
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

    /// When the queue next has work (see [`Queue::next_deadline`]).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        lock(&self.state).queue.next_deadline()
    }

    /// One expiry round: takes at most `batch` steps' worth of due timers
    /// out of the queue, then runs their callbacks without the lock.
    pub(crate) fn round(&self, rounds: &mut Rounds) -> Round {
        let Rounds { fired, unrecorded } = rounds;
        {
            let mut state = lock(&self.state);
            if state.stopping {
                return Round::Stopped;
            }
            state.sleeping_until = None;
            self.take_expired(&mut state, fired);
            if fired.is_empty() {
                // After a round that ran out of steps moving soft timers
                // down the wheel, the next deadline is now: the wait
                // returns at once.
                let next = state.queue.next_deadline();
                state.sleeping_until = Some(next.unwrap_or(u64::MAX));
                self.alarm.set(next);
                return Round::Idle;
            }
        }
        for mut f in fired.drain(..) {
            let start = self.clock.now().as_nanos();
            unrecorded.push(start.saturating_sub(f.expiry.deadline.as_nanos()));
            self.record_lateness(unrecorded);
            // A panicking callback loses its own timer, not the thread.
            let unwound = catch_unwind(AssertUnwindSafe(|| (f.callback)(f.expiry))).is_err();
            if f.periodic {
                let mut state = lock(&self.state);
                if unwound {
                    // Left armed, it would be re-armed every period
                    // with no callback to run, for ever. (Its entry has
                    // no callback, which `f` holds: it may be dropped
                    // here.)
                    let _ = state.disarm(f.id);
                } else if let Some(entry) = state.timers.get_mut(f.id) {
                    // Still registered unless cancelled while it ran.
                    entry.callback = Some(f.callback);
                }
            }
        }
        Round::Fired
    }

    /// Moves `unrecorded` lateness figures into the histogram, unless a
    /// reader is copying it: the copy of a histogram with an hour's range
    /// (some 270 kB) takes microseconds, which a timer must not wait for.
    fn record_lateness(&self, unrecorded: &mut Vec<u64>) {
        let mut histogram = match self.lateness.try_lock() {
            Ok(histogram) => histogram,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        for lateness in unrecorded.drain(..) {
            histogram.saturating_record(lateness);
        }
    }

    /// Takes due timers out of the queue, in at most `batch` steps; a
    /// periodic one is re-armed at its next expiry right away, its callback
    /// lent out.
    fn take_expired(&self, state: &mut State<Q>, fired: &mut Vec<Fired>) {
        let now = self.clock.now().as_nanos();
        let State { queue, timers, .. } = state;
        let mut budget = self.batch;
        while let Some(id) = queue.poll(now, &mut budget) {
            let Some(entry) = timers.get_mut(id) else {
                continue;
            };
            let deadline = entry.deadline;
            let (callback, overruns, periodic) = match entry.period {
                Some(period) => {
                    let (next, overruns) = forward(deadline, now, period);
                    entry.deadline = next;
                    entry.queued = queue.arm(next, entry.slack, id);
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
                    periodic,
                    callback,
                });
            }
        }
    }
}
