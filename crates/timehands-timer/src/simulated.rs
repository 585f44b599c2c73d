//! `Simulation`: a [`TimerService`] on a mock clock,
//! moved by hand.

use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use timehands::{Clock, Instant, Mock};

use crate::expiry::Round;
use crate::hard::Hard;
use crate::sched::Scheduling;
use crate::service::{Builder, Shared, TimerService};
use crate::side::{Queue, Rounds, Side};
use crate::soft::Soft;

impl Builder {
    /// A service on simulated time, and the [`Simulation`] that moves it: no
    /// threads, and timers fire in [`Simulation::advance`], on the thread
    /// that calls it (the realtime priority is not used).
    pub fn simulated(self) -> io::Result<(TimerService, Simulation)> {
        let (clock, mock) = Clock::mock();
        let shared = self.shared(clock.clone(), false)?;
        let service = TimerService::without_threads(
            Arc::clone(&shared),
            Scheduling::Normal {
                reason: "simulated time: timers fire on the thread that advances it".into(),
            },
        );
        Ok((service, Simulation::new(shared, clock, mock)))
    }
}

impl TimerService {
    /// A service on simulated time with the [`Builder`]'s defaults; see
    /// [`Builder::simulated`].
    pub fn simulated() -> io::Result<(TimerService, Simulation)> {
        Builder::new().simulated()
    }
}

/// Simulated time for a [`TimerService`] made by
/// [`TimerService::simulated`](crate::TimerService::simulated): the service
/// has no threads, and its timers fire when the simulation's clock is moved
/// past their deadlines, on the thread that moves it. Deterministic: nothing
/// sleeps, and the order is the deadlines'.
///
/// - [`advance`](Simulation::advance) moves the clock from one deadline to the
///   next, firing the timers due at each, hard and soft, in deadline order (at
///   one instant, hard ones first; soft ones that one round takes together
///   earliest bound first, as the workers run them): a periodic timer fires
///   every period, with no overrun, and a callback sees
///   [`clock().now()`](Simulation::clock) at its deadline (a soft timer's,
///   at the wheel's tick that expires it);
/// - [`jump`](Simulation::jump) moves the clock at once, as if the expiry
///   threads had been held up, then fires what is due: each periodic timer
///   once, with the periods it missed as [`Expiry::overruns`](crate::Expiry)
///   (soft timers beyond their bound by then after the others);
/// - [`sleep_until`](Simulation::sleep_until) blocks a thread until the
///   clock reaches a deadline, as [`sleep_until`](crate::sleep_until) does on
///   the real one.
///
/// Code under test takes [`clock()`](Simulation::clock) where it would read
/// `timehands::now()`.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use timehands_timer::TimerService;
///
/// let (service, simulation) = TimerService::simulated()?;
/// let start = simulation.now();
/// let fired = Arc::new(Mutex::new(Vec::new()));
/// let log = Arc::clone(&fired);
/// service.hard_periodic(start + Duration::from_secs(1), Duration::from_secs(1), move |e| {
///     log.lock().unwrap().push((e.deadline - start, e.overruns));
/// })?;
/// simulation.advance(Duration::from_secs(2));
/// simulation.jump(Duration::from_secs(3)); // held up for 3 s
/// let secs = Duration::from_secs;
/// assert_eq!(*fired.lock().unwrap(), [(secs(1), 0), (secs(2), 0), (secs(3), 2)]);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Simulation {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    clock: Clock,
    mock: Mock,
    /// Taken by sleepers while they look at the clock; notified when it moves.
    sleepers: Mutex<()>,
    moved: Condvar,
}

impl Simulation {
    pub(crate) fn new(shared: Arc<Shared>, clock: Clock, mock: Mock) -> Simulation {
        Simulation {
            inner: Arc::new(Inner {
                shared,
                clock,
                mock,
                sleepers: Mutex::new(()),
                moved: Condvar::new(),
            }),
        }
    }

    /// The simulated clock, for the code under test.
    pub fn clock(&self) -> Clock {
        self.inner.clock.clone()
    }

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.inner.mock.now()
    }

    /// Moves the clock forward by `d` (see [`advance_to`](Simulation::advance_to)),
    /// stopping at the end of time (`u64::MAX` ns), as the mock clock does.
    pub fn advance(&self, d: Duration) {
        self.advance_to(self.later_by(d));
    }

    /// Moves the clock to `target` from deadline to deadline, firing at each
    /// the timers due then, and waking the sleepers whose deadline it
    /// reached. A `target` in the past fires what is due now and moves
    /// nothing.
    pub fn advance_to(&self, target: Instant) {
        let target = target.as_nanos();
        let mut rounds = (Rounds::new(), Rounds::new());
        loop {
            self.fire_due(&mut rounds);
            let now = self.now().as_nanos();
            if now >= target {
                return;
            }
            let shared = &self.inner.shared;
            let next = [shared.hard.next_deadline(), shared.soft.next_deadline()]
                .into_iter()
                .flatten()
                .filter(|&deadline| deadline > now)
                .min()
                .map_or(target, |deadline| deadline.min(target));
            self.set(next);
        }
    }

    /// Moves the clock forward by `d` at once, then fires what is due (see
    /// [`jump_to`](Simulation::jump_to)); at most to the end of time.
    pub fn jump(&self, d: Duration) {
        self.jump_to(self.later_by(d));
    }

    /// `d` after now, or the end of time if that is later.
    fn later_by(&self, d: Duration) -> Instant {
        self.now()
            .checked_add(d)
            .unwrap_or(Instant::from_nanos(u64::MAX))
    }

    /// Sets the clock to `t` at once, as if the expiry threads had been held
    /// up until then, and fires what is due: each periodic timer once, with
    /// the periods it missed as overruns. A `t` in the past moves the clock
    /// back (as a test may want); nothing fires early for it.
    pub fn jump_to(&self, t: Instant) {
        self.set(t.as_nanos());
        self.fire_due(&mut (Rounds::new(), Rounds::new()));
    }

    /// Blocks the calling thread until the clock reaches `deadline`; returns
    /// at once for one that has passed.
    pub fn sleep_until(&self, deadline: Instant) {
        let mut sleepers = self.sleepers();
        while self.now() < deadline {
            sleepers = self
                .inner
                .moved
                .wait(sleepers)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn sleepers(&self) -> MutexGuard<'_, ()> {
        // It guards nothing but the wait, which a panic cannot leave halfway.
        self.inner
            .sleepers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the clock and wakes the sleepers to look at it.
    fn set(&self, nanos: u64) {
        self.inner.mock.set(Instant::from_nanos(nanos));
        // Under the sleepers' lock: one that saw the old time is waiting
        // already, and gets the notification.
        let _sleepers = self.sleepers();
        self.inner.moved.notify_all();
    }

    /// Fires every timer due now, hard ones first, until none is (callbacks
    /// may arm timers that are due already).
    fn fire_due(&self, (hard, soft): &mut (Rounds, Rounds)) {
        let shared = &self.inner.shared;
        shared.enter();
        while fire_side(&shared.hard, hard) | fire_side(&shared.soft, soft) {}
    }
}

/// A side's expiry round, as its own threads run it.
trait Expire {
    fn round(&self, rounds: &mut Rounds) -> Round;
}

impl Expire for Hard {
    fn round(&self, rounds: &mut Rounds) -> Round {
        Hard::round(self, rounds)
    }
}

impl Expire for Soft {
    fn round(&self, rounds: &mut Rounds) -> Round {
        Soft::round(self, rounds)
    }
}

/// Runs `side`'s expiry rounds while it has work due on its clock, or
/// callbacks to give back; whether any timer fired.
fn fire_side<Q: Queue>(side: &Side<Q>, rounds: &mut Rounds) -> bool
where
    Side<Q>: Expire,
{
    let mut fired = false;
    // A last round gives back the callbacks the one before lent out.
    while rounds.lent()
        || side
            .next_deadline()
            .is_some_and(|deadline| deadline <= side.now().as_nanos())
    {
        match side.round(rounds) {
            Round::Stopped => break,
            Round::Fired => fired = true,
            // The round's steps went to moving soft timers down the wheel,
            // or to applying requests.
            Round::Idle | Round::More => {}
        }
    }
    fired
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("now", &self.now())
            .finish()
    }
}
