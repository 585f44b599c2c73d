//! What the two sides (`hard`, `soft`) share: a timer as the user armed it,
//! its callback, what it is told when it fires, what an expiry round did,
//! and the counts each side keeps. Below both sides and the service, which
//! all name these.

use std::time::Duration;

use timehands::Instant;

/// What a callback is told when its timer fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The deadline this expiry is for.
    pub deadline: Instant,
    /// For a periodic timer, how many expiries after this one were already
    /// past when it fired and are skipped (see
    /// [`forward`](crate::periodic::forward)); 0 for a one-shot timer. (An
    /// expiry due while the timer's callback still runs on another soft
    /// worker waits for it, as on one thread.)
    pub overruns: u64,
}

/// A timer's callback, run on its side's expiry thread.
pub(crate) type Callback = Box<dyn FnMut(Expiry) + Send>;

/// A timer as the user armed it.
pub(crate) struct Armed {
    pub(crate) deadline: u64,
    pub(crate) slack: u64,
    /// At least 1 ns: a period of zero is refused before it gets here.
    pub(crate) period: Option<u64>,
    pub(crate) callback: Callback,
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
    /// Nothing fired, but work is left that needs no wait (soft requests
    /// to apply): the next round follows, once a soft worker has yielded
    /// its CPU (see `soft`).
    More,
}

/// One side's counts: see [`Statistics`](crate::Statistics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SideStatistics {
    /// Expiries whose callbacks ran (or started to).
    pub fired: u64,
    /// Soft expiries whose callbacks started after the soft bound,
    /// `deadline + slack + one soft tick` (from when the timer was armed if
    /// that was later): the soft workers did not keep up. Always 0 on the
    /// hard side, which promises no bound (see
    /// [`TimerService::hard_lateness`](crate::TimerService::hard_lateness)).
    /// The sum of the two causes below.
    pub beyond_bound: u64,
    /// Of those, the ones whose worker was busy from before the bound to
    /// the callback's start, taking and running other timers' callbacks:
    /// the callbacks' work due then was more than the workers could do
    /// within the bound (callbacks too slow or too many, or one that
    /// blocks; see [`TimerService::soft_at`](crate::TimerService::soft_at)).
    /// A stop of the whole machine by its hypervisor while a worker runs
    /// callbacks counts here too, and shows in
    /// [`Statistics::steal`](crate::Statistics::steal) where the
    /// hypervisor counts it: a shared 2-vCPU guest had both CPUs stopped
    /// for 0.35-1 ms a few times in ten seconds, with no steal time.
    pub beyond_bound_behind_callbacks: u64,
    /// Of those, the ones whose worker was kept from them by the machine:
    /// it was still waiting for its alarm after the bound (woken, or given
    /// the CPU, too late), or, where the OS tells (Linux, Android), it
    /// waited for a CPU, preempted by other threads or processes, for at
    /// least half the time the expiry is late since its round began.
    pub beyond_bound_stalled: u64,
    /// How long the soft workers, between them, waited for a CPU while
    /// they could run (preempted by other threads or processes), where the
    /// OS tells (Linux, Android; zero elsewhere, and on the hard side): the
    /// machine's share of a backlog, which `beyond_bound_behind_callbacks`
    /// counts from the moment it formed, whatever formed it.
    pub waited_for_cpu: Duration,
    /// Callbacks that panicked.
    pub panics: u64,
    /// The message of the last callback that panicked, if it was a string.
    pub last_panic: Option<String>,
}
