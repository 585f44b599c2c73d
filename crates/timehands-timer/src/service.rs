//! `TimerService`: hard timers on a real-time thread, soft timers on
//! workers of their own; see [`TimerService`].

use std::fmt;
use std::io;
use std::sync::{Arc, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use hdrhistogram::Histogram;
use timehands::{Clock, Instant};

use crate::expiry::{Armed, Callback, Expiry, SideStatistics};
use crate::fork::Epoch;
use crate::hard::Hard;
use crate::heap::DeadlineHeap;
use crate::lock::Lock;
use crate::sched::{self, Scheduling};
use crate::side::{Side, TimerControl};
use crate::soft::Soft;
use crate::stall::steal_nanos;
use crate::wheel::Wheel;

/// Builds a [`TimerService`] with non-default settings.
#[derive(Clone, Debug)]
pub struct Builder {
    soft_tick_shift: u32,
    batch: usize,
    priority: Option<i32>,
    soft_workers: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            soft_tick_shift: 20,
            batch: 256,
            priority: Some(50),
            soft_workers: 2,
        }
    }
}

impl Builder {
    /// The defaults: soft ticks of 2^20 ns (about 1 ms), batches of 256
    /// steps (a round's lock is held some microseconds; with 64, the moves
    /// of a wheel slot's timers down a level took so many rounds that
    /// timers due behind them missed the soft bound two to three times as
    /// often),
    /// SCHED_FIFO priority 50 asked for the hard thread, two soft workers.
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

    /// How many threads expire soft timers (at least 1): the soft bound
    /// holds while they keep up with the soft callbacks' work, so a load
    /// of more work per soft tick than one thread does in a tick needs more
    /// of them (see [`TimerService::soft_at`]).
    pub fn soft_workers(mut self, workers: usize) -> Builder {
        self.soft_workers = workers.max(1);
        self
    }

    /// The two queues, on `clock`, with expiry threads to come if
    /// `threaded` (none on simulated time).
    pub(crate) fn shared(&self, clock: Clock, threaded: bool) -> io::Result<Arc<Shared>> {
        Ok(Arc::new(Shared {
            hard: Side::new(DeadlineHeap::new(), true, self.batch, clock.clone())?,
            soft: Side::new(Wheel::new(self.soft_tick_shift), false, self.batch, clock)?,
            builder: self.clone(),
            threaded,
            threads: Lock::new(Vec::new(), false),
            epoch: Epoch::new(),
            steal_at_start: threaded.then(steal_nanos).flatten(),
        }))
    }

    /// Starts the expiry threads: the hard one and the soft workers.
    ///
    /// # Errors
    ///
    /// A thread the OS would not start, named with the OS and the remedy:
    /// always on a target without threads, such as wasm32-wasip1, where
    /// only [`simulated`](Builder::simulated) time runs.
    pub fn build(self) -> io::Result<TimerService> {
        // The service exists before its threads so that, if one cannot be
        // started, dropping it stops and joins those that were; the
        // placeholder scheduling is replaced before anyone can read it.
        let mut service = TimerService {
            shared: self.shared(Clock::new(), true)?,
            scheduling: Scheduling::Normal {
                reason: "the hard thread has not started".into(),
            },
        };
        service.scheduling = service.shared.start()?;
        Ok(service)
    }
}

/// The timer service: hard timers on a real-time thread, soft timers on
/// workers of their own, so that no pile of soft timers delays a hard one.
///
/// This is the user-space answer to the hrtimer stacking seen on PREEMPT_RT: there,
/// the expiry work of many sloppy timers (sleeps and timeouts of ordinary
/// threads) ran in the same queue, in front of the one precise deadline of a
/// real-time thread. Here the two kinds never share anything on the expiry
/// path:
///
/// - hard timers live in a [`DeadlineHeap`],
///   expired by a thread that asks for SCHED_FIFO (see
///   [`TimerService::scheduling`]) and a 1 ns timer slack (where the OS has
///   timer slack);
/// - soft timers live in a [`Wheel`], under another (plain) lock, expired by
///   workers (two by default: [`Builder::soft_workers`]), coalesced within
///   the first half of their slack. Where the hard thread has no real-time
///   priority, the workers run at a lower one (nice 10, where nice values
///   are per thread: Linux, Android), so that the fair scheduler favours
///   the hard thread.
///
/// Arming, cancelling or rescheduling a timer never waits for a lock an
/// expiry thread takes: the caller pushes a request onto a lock-free stack
/// of its timer's side. A cancel still answers at once and truly: each
/// timer's state is one atomic word that says who has its callback.
///
/// - On the hard side the caller then applies pending requests itself, a
///   few dozen at a time, only if the hard lock is free (otherwise its
///   holder, or the hard thread, does). So a caller preempted at any point
///   holds nothing the hard thread needs, and the hard thread waits for the
///   lock at most while one caller applies one such batch (on Linux the
///   lock inherits priority, so even a preempted caller finishes it at
///   once), and the callers' work stays off the real-time thread. Callers
///   keep off the lock from shortly before a hard timer is due until the
///   hard thread's round begins, so that it finds the lock free.
/// - On the soft side the workers apply the requests, a batch a round after
///   the timers due, so a thread arming 100 000 soft timers at once (a
///   server's timeouts after a reconnect storm) delays a soft timer due
///   meanwhile by one batch at most, tens of microseconds. Only past 2^18
///   requests waiting (threads arming faster than the workers apply, for
///   long) does a caller apply a batch itself, waiting for the soft lock:
///   memory stays bounded.
///
/// Each thread sleeps on an alarm set to the absolute deadline of its queue
/// (on Linux and Android a timerfd on CLOCK_MONOTONIC, the origin of
/// `timehands::Instant`; elsewhere a condition variable's timed wait on
/// std's monotonic clock); arming an earlier timer moves the alarm
/// earlier. Each expiry round takes at most a batch of timers out under the
/// lock (on the soft side, the moves down the wheel that reach them count
/// against the same batch), then runs their callbacks without it (so a
/// callback may arm, cancel or reschedule timers, its own included), and
/// records each one's lateness (callback start minus deadline, or minus the
/// time it was armed if that was later) in the side's histogram.
///
/// A callback runs on its side's thread, so one that blocks holds that
/// thread: a hard callback that sleeps 300 ms makes every hard timer due
/// meanwhile 300 ms late, and a soft one takes a soft worker away for as
/// long. Hand blocking work to a thread of its own (send it on a channel
/// from the callback). A callback that panics loses its timer (a periodic
/// one is disarmed), not the thread: the panic is counted in
/// [`TimerService::statistics`], with its message.
///
/// What is due is decided on timehands' clock, so that no callback sees
/// `timehands::now()` before its deadline, while the kernel wakes the thread
/// on its monotonic clock: should timehands' clock trail the kernel's, a
/// thread woken at the deadline finds nothing due yet and sets its alarm
/// again, spinning for as long as the clocks differ.
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
/// return, and drops the callbacks of the timers still armed, which never
/// fire (so a callback that holds its own [`Timer`] does not keep the
/// service's memory and descriptors alive). A callback may drop it too
/// (when it holds the last reference): its own thread then ends after it
/// returns.
///
/// # Fork
///
/// On Unix, a child process forked while the service runs gets a service of its own,
/// on the first call it makes to it (or to a [`Timer`]): new expiry threads
/// (the parent's are not in the child), no timers (those armed before the
/// fork stay the parent's, as POSIX timers do: in the child they never fire,
/// their handles cancel and reschedule nothing, and their callbacks are
/// forgotten, never dropped, as they may hold locks of the parent's threads)
/// and statistics from zero. No lock is taken around the fork, so a fork is
/// never held up by the service, and none the parent's threads held is
/// inherited held. The [`scheduling`](TimerService::scheduling) reported is
/// the parent's.
pub struct TimerService {
    shared: Arc<Shared>,
    scheduling: Scheduling,
}

/// A handle on an armed timer. Dropping it leaves the timer armed.
#[derive(Clone)]
pub struct Timer {
    shared: Arc<Shared>,
    /// Its state, shared with its side (see `control`).
    control: Arc<TimerControl>,
    /// Whether it is a hard timer.
    hard: bool,
    /// The process it was armed in (see [`Epoch`]): in a forked child, a
    /// handle from the parent names nothing.
    epoch: u64,
}

/// What the service has done since it started, from
/// [`TimerService::statistics`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    /// The hard timers'.
    pub hard: SideStatistics,
    /// The soft timers'.
    pub soft: SideStatistics,
    /// The time the hypervisor ran other guests on the machine's CPUs
    /// while they had work (steal time, summed over the CPUs) since the
    /// service started: a stall of the whole machine, which delays timers
    /// of every kind. `None` where the OS does not say (it does on Linux
    /// and Android, in clock ticks of 10 ms on most kernels), and on
    /// simulated time.
    pub steal: Option<Duration>,
}

pub(crate) struct Shared {
    pub(crate) hard: Hard,
    pub(crate) soft: Soft,
    builder: Builder,
    /// Whether the service has expiry threads (not on simulated time).
    threaded: bool,
    threads: Lock<Vec<JoinHandle<()>>>,
    epoch: Epoch,
    /// The machine's steal time when the service started (see
    /// `Statistics::steal`); `None` on simulated time.
    steal_at_start: Option<u64>,
}

impl Shared {
    /// Starts the expiry threads; how the hard one is scheduled.
    ///
    /// The soft workers run at a lower priority (nice 10) only where the
    /// hard thread has no real-time one, so that the fair scheduler still
    /// favours it. Beside a SCHED_FIFO hard thread they keep the process's:
    /// niced, they lost a CPU ten to one to any other thread of the machine,
    /// the program's own included (one arming a pile of timers), and the
    /// soft timers due meanwhile their bound.
    fn start(self: &Arc<Self>) -> io::Result<Scheduling> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::clone(self);
        let priority = self.builder.priority;
        let hard = spawn("timehands-hard", move || {
            let scheduling = sched::precise_thread(priority);
            // `start` waits for this; it cannot have gone.
            let _ = tx.send(scheduling);
            shared.hard.run();
        })?;
        self.threads.lock().push(hard);
        let scheduling = rx
            .recv()
            .map_err(|_| io::Error::other("hard thread died"))?;
        let niced = matches!(scheduling, Scheduling::Normal { .. });
        for _ in 0..self.builder.soft_workers {
            let shared = Arc::clone(self);
            let soft = spawn("timehands-soft", move || {
                if niced {
                    sched::lower_priority(10);
                }
                shared.soft.run();
            })?;
            self.threads.lock().push(soft);
        }
        Ok(scheduling)
    }

    /// Every call into the service enters here first: in a forked child,
    /// the first one gives the child a service of its own (see
    /// [`TimerService`]'s "Fork").
    pub(crate) fn enter(self: &Arc<Self>) {
        self.epoch.enter(|| {
            // SAFETY: `Epoch::enter` runs this on one thread, others
            // waiting for it, and the service's own threads are the
            // parent's: none is in this process.
            let alarms = unsafe {
                // Joining a thread of the parent fails; its handle is
                // forgotten.
                self.threads.reset(Vec::new());
                let hard = self.hard.reset_after_fork(DeadlineHeap::new());
                let soft = self
                    .soft
                    .reset_after_fork(Wheel::new(self.builder.soft_tick_shift));
                hard.and(soft)
            };
            if self.threaded && alarms.is_ok() {
                // No call can report threads that do not start (nor alarms
                // that could not be made): the child's timers then stay
                // armed, unfired.
                let _ = self.start();
            }
        });
    }
}

impl TimerService {
    /// A service on `shared` with no expiry threads (simulated time fires
    /// its timers), scheduled as `scheduling` says.
    pub(crate) fn without_threads(shared: Arc<Shared>, scheduling: Scheduling) -> TimerService {
        TimerService { shared, scheduling }
    }

    /// A service with the [`Builder`]'s defaults.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`].
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

    /// A periodic hard timer: first at `first`, then every `period`; a
    /// period of zero is an error of kind `InvalidInput`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use timehands_timer::TimerService;
    ///
    /// let service = TimerService::new()?;
    /// let refused = service.hard_periodic(timehands::now(), Duration::ZERO, |_| {});
    /// assert_eq!(
    ///     refused.unwrap_err().to_string(),
    ///     "hard_periodic: a period of 0 ns: a periodic timer needs at least 1 ns"
    /// );
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn hard_periodic(
        &self,
        first: Instant,
        period: Duration,
        callback: impl FnMut(Expiry) + Send + 'static,
    ) -> io::Result<Timer> {
        let period = period_nanos("hard_periodic", period)?;
        Ok(self.arm(
            true,
            first,
            Duration::ZERO,
            Some(period),
            Box::new(callback),
        ))
    }

    /// A soft timer: `callback` runs on a soft worker between `deadline`
    /// and `deadline + slack + one soft tick` (from when it is armed, for a
    /// deadline already past).
    ///
    /// That bound holds while the soft workers keep up. The wheel files a
    /// timer under a tick in the first half of its slack (or the first
    /// tick after its deadline, when that half holds none), so that timers
    /// share ticks, and the rest is left for running the callbacks gathered
    /// there: a timer may start up to `margin = min(slack, slack / 2 +
    /// tick)` after its tick. With `w` workers that have the CPU, the soft
    /// callbacks' work due in any stretch of time must fit in `w ×
    /// (stretch + margin)`. A timer comes out late when the workers are
    /// busier than that (callbacks due before it, one that blocks) or kept
    /// off the CPU for longer (a stall of the machine longer than the
    /// margin can put the timers due in it beyond). The wheel's own work is
    /// not in the way: it moves timers down its levels ahead of time, in
    /// polls that find nothing due, and neither is a thread that arms a pile
    /// of timers (see [`TimerService`]). Timers fired beyond the bound are
    /// counted in [`SideStatistics::beyond_bound`].
    pub fn soft_at(
        &self,
        deadline: Instant,
        slack: Duration,
        callback: impl FnMut(Expiry) + Send + 'static,
    ) -> Timer {
        self.arm(false, deadline, slack, None, Box::new(callback))
    }

    /// A periodic soft timer: first at `first`, then every `period`, each
    /// expiry within `slack` (plus one soft tick, as
    /// [`soft_at`](TimerService::soft_at) says); a period of zero is an
    /// error of kind `InvalidInput`.
    pub fn soft_periodic(
        &self,
        first: Instant,
        period: Duration,
        slack: Duration,
        callback: impl FnMut(Expiry) + Send + 'static,
    ) -> io::Result<Timer> {
        let period = period_nanos("soft_periodic", period)?;
        Ok(self.arm(false, first, slack, Some(period), Box::new(callback)))
    }

    /// The hard timers' lateness so far, in nanoseconds.
    ///
    /// The copy is made under a lock that the expiry thread never waits
    /// for: an expiry it records while a copy is being made joins the
    /// histogram at the thread's next expiry.
    pub fn hard_lateness(&self) -> Histogram<u64> {
        self.shared.enter();
        self.shared.hard.record().lateness()
    }

    /// The soft timers' lateness so far (from the deadline, so slack
    /// included), in nanoseconds; copied as [`TimerService::hard_lateness`]
    /// is.
    pub fn soft_lateness(&self) -> Histogram<u64> {
        self.shared.enter();
        self.shared.soft.record().lateness()
    }

    /// The service's counts: expiries, soft ones beyond their bound (and
    /// why: the workers busy with callbacks, or the machine stalled), the
    /// callbacks' panics, and the machine's steal time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use timehands_timer::TimerService;
    ///
    /// let (service, simulation) = TimerService::simulated()?;
    /// service.hard_at(simulation.now(), |_| panic!("out of range"));
    /// simulation.advance(Duration::from_millis(1));
    /// let statistics = service.statistics();
    /// assert_eq!(statistics.hard.panics, 1);
    /// assert_eq!(statistics.hard.last_panic.as_deref(), Some("out of range"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn statistics(&self) -> Statistics {
        self.shared.enter();
        let steal = self
            .shared
            .steal_at_start
            .zip(steal_nanos())
            .map(|(start, now)| Duration::from_nanos(now.saturating_sub(start)));
        Statistics {
            hard: self.shared.hard.record().statistics(),
            soft: self.shared.soft.record().statistics(),
            steal,
        }
    }

    fn arm(
        &self,
        hard: bool,
        deadline: Instant,
        slack: Duration,
        period: Option<u64>,
        callback: Callback,
    ) -> Timer {
        self.shared.enter();
        let timer = Armed {
            deadline: deadline.as_nanos(),
            slack: saturating_nanos(slack),
            period,
            callback,
        };
        let control = if hard {
            self.shared.hard.arm(timer)
        } else {
            self.shared.soft.arm(timer)
        };
        Timer {
            shared: Arc::clone(&self.shared),
            control,
            hard,
            epoch: Epoch::current(),
        }
    }
}

impl Drop for TimerService {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.enter();
        shared.hard.stop();
        shared.soft.stop();
        // The callbacks go before the threads are joined, and outside the
        // queues' locks: one that holds its own `Timer` holds the shared
        // state, which would otherwise never be freed.
        drop((shared.hard.clear(), shared.soft.clear()));
        let threads = std::mem::take(&mut *shared.threads.lock());
        let current = thread::current().id();
        for thread in threads {
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
        self.shared.enter();
        f.debug_struct("TimerService")
            .field("scheduling", &self.scheduling)
            .field("hard_armed", &self.shared.hard.armed())
            .field("soft_armed", &self.shared.soft.armed())
            .finish()
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = if self.hard { "hard" } else { "soft" };
        f.debug_struct("Timer")
            .field(side, &Arc::as_ptr(&self.control))
            .finish()
    }
}

impl Timer {
    /// Disarms the timer: `true` means its callback will not run again.
    /// `false` if it was cancelled already, or is a one-shot timer that has
    /// fired: taken out of its queue by the expiry thread, so that its
    /// callback has run, runs or is about to (a periodic timer cancelled
    /// while its callback runs stops after that run), or a periodic timer
    /// whose callback panicked, or a timer armed before a fork, in the
    /// child.
    pub fn cancel(&self) -> bool {
        if !self.enter() {
            return false;
        }
        if self.hard {
            self.shared.hard.cancel(&self.control)
        } else {
            self.shared.soft.cancel(&self.control)
        }
    }

    /// Moves the timer's next expiry to `deadline` (a periodic timer keeps
    /// its period from there); `false` if it had already fired or was
    /// cancelled, or was armed before a fork, in the child.
    pub fn reschedule(&self, deadline: Instant) -> bool {
        if !self.enter() {
            return false;
        }
        let deadline = deadline.as_nanos();
        if self.hard {
            self.shared.hard.reschedule(&self.control, deadline)
        } else {
            self.shared.soft.reschedule(&self.control, deadline)
        }
    }

    /// Enters the service; whether the timer was armed in this process.
    fn enter(&self) -> bool {
        self.shared.enter();
        self.epoch == Epoch::current()
    }
}

/// Starts the expiry thread `name`, or says why it could not.
fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map_err(|refused| not_started(name, &refused))
}

/// The error for expiry thread `name`, which the OS would not start: a
/// target without threads (wasm32-wasip1) can have no timer service.
fn not_started(name: &str, refused: &io::Error) -> io::Error {
    let remedy = if refused.kind() == io::ErrorKind::Unsupported {
        "this target has no threads: only TimerService::simulated, which needs none, runs here"
    } else {
        "the process may be at its limit of threads or memory"
    };
    io::Error::new(
        refused.kind(),
        format!(
            "the timer service's thread {name} could not start on {}-{} ({refused}): {remedy}",
            std::env::consts::ARCH,
            std::env::consts::OS
        ),
    )
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A periodic timer's period in nanoseconds, refused if zero (a timer that
/// is always due: its thread would do nothing else).
fn period_nanos(method: &str, period: Duration) -> io::Result<u64> {
    if period.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{method}: a period of 0 ns: a periodic timer needs at least 1 ns"),
        ));
    }
    Ok(saturating_nanos(period))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_the_os_refuses_is_named_with_the_os_and_the_remedy() {
        // What std's spawn returns on wasm32-wasip1, which has no threads.
        let refused = io::Error::from(io::ErrorKind::Unsupported);
        let error = not_started("timehands-hard", &refused);
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
        let message = error.to_string();
        for part in [
            "timehands-hard",
            std::env::consts::OS,
            "no threads",
            "simulated",
        ] {
            assert!(message.contains(part), "{message:?} does not name {part:?}");
        }
    }
}
