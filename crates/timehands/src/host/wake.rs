//! The upkeep thread's sleep, and the reads that wake it.
//!
//! The thread sleeps for good (it parks) while nobody reads: a process that
//! stopped reading pays nothing. Readers write nothing in the common case,
//! so the thread cannot see reads; it sees *demand*, two counts that only
//! readers' rare paths bump: a windup a precise read found due (readers
//! wind up themselves, see `upkeep.rs`), and a coarse read that found the
//! coarse time not kept. The first such read after the thread parked wakes
//! it: one more store and a wake on a path that already winds up.
//!
//! Parking and waking race: a reader may bump the demand just as the thread
//! decides that nobody reads. The handshake is Dekker's, with a `SeqCst`
//! fence on each side: the thread says it parks, then looks at the demand
//! once more; a reader bumps the demand, then looks at the thread. One of
//! the two sees the other, so the thread never sleeps through a read that
//! needed it (the `loom` model below checks every interleaving), and a
//! wake that races a park is the park's token, not lost.
//!
//! The thread's timed sleeps (a tick, a watch) are a wait on the OS's
//! notice of a step of Realtime where it has one (Linux's timerfd, see
//! `os/realtime_notice.rs`), which a coarse read's nudge also ends: a step
//! while reads come is followed at once, at no wakeup more. A park waits
//! on nothing but a read: a step while nothing reads wakes nobody, and the
//! first read after it finds a windup due (which follows it).

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, Ordering, fence};
#[cfg(loom)]
use loom::thread::{Thread, current, park};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, Ordering, fence};
#[cfg(not(loom))]
use std::thread::{Thread, current, park};
use std::time::Duration;

use crate::os::RealtimeNotice;

/// No thread (not started yet, or forgotten in a `fork()`ed child).
pub(super) const IDLE: u8 = 0;
/// A reader asks the OS for the thread.
pub(super) const SPAWNING: u8 = 1;
/// The thread runs (it said so itself).
pub(super) const AWAKE: u8 = 2;
/// The thread sleeps until a read needs it.
pub(super) const PARKED: u8 = 3;
/// The operating system refused the thread: not asked again.
pub(super) const REFUSED: u8 = 4;

/// What a read may need of the upkeep thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Need {
    /// Windups and steering: a precise read found a windup due.
    Precise,
    /// The coarse time kept fresh: a coarse read found it not kept.
    Coarse,
}

/// The demand readers made so far: precise, coarse.
pub(super) type Demand = (u64, u64);

/// The upkeep thread's state, its demand, and its handle to wake it by.
pub(super) struct Wake {
    state: AtomicU8,
    precise: AtomicU64,
    coarse: AtomicU64,
    /// Whether the thread keeps the coarse time fresh (a tick apart).
    ticking: AtomicBool,
    /// Whether a coarse read woke the thread from a timed sleep since it
    /// last started or stopped ticking: one wake is enough.
    nudged: AtomicBool,
    /// The thread, set by itself before it first parks; leaked, as a
    /// `fork()`ed child may copy it while a reader uses it.
    thread: AtomicPtr<Thread>,
    /// The notice its timed sleeps wait on, where the OS has one: set and
    /// leaked with the handle (a `fork()`ed child drops its copy).
    notice: AtomicPtr<RealtimeNotice>,
    /// How many times the thread woke (from a sleep or a park), and the CPU
    /// time it had used at its last wakeup, in ns: what keeping time cost.
    wakeups: AtomicU64,
    cpu_nanos: AtomicU64,
}

impl Wake {
    /// No thread, no demand.
    pub(super) fn new() -> Wake {
        Wake {
            state: AtomicU8::new(IDLE),
            precise: AtomicU64::new(0),
            coarse: AtomicU64::new(0),
            ticking: AtomicBool::new(false),
            nudged: AtomicBool::new(false),
            thread: AtomicPtr::new(std::ptr::null_mut()),
            notice: AtomicPtr::new(std::ptr::null_mut()),
            wakeups: AtomicU64::new(0),
            cpu_nanos: AtomicU64::new(0),
        }
    }

    /// The thread woke, having used `cpu_nanos` of CPU time so far (where
    /// the OS tells it).
    pub(super) fn woke(&self, cpu_nanos: Option<u64>) {
        self.wakeups.fetch_add(1, Ordering::Relaxed);
        if let Some(ns) = cpu_nanos {
            self.cpu_nanos.store(ns, Ordering::Relaxed);
        }
    }

    /// The thread's wakeups so far, and its CPU time at the last one, in ns
    /// (of this process's threads: a `fork()`ed child counts its own from
    /// its parent's).
    pub(super) fn cost(&self) -> (u64, u64) {
        (
            self.wakeups.load(Ordering::Relaxed),
            self.cpu_nanos.load(Ordering::Relaxed),
        )
    }

    /// The thread's state: [`IDLE`] to [`REFUSED`].
    #[cfg(test)]
    pub(super) fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// A read needs the thread: counts the demand and wakes the thread if it
    /// parked, or, for a coarse read, if it sleeps without ticking (once).
    /// True when there is no thread, `may_spawn` says this caller may start
    /// one (asked only then), and it should (it then owns the spawn: the
    /// state is [`SPAWNING`]).
    pub(super) fn need(&self, need: Need, may_spawn: impl FnOnce() -> bool) -> bool {
        let count = match need {
            Need::Precise => &self.precise,
            Need::Coarse => &self.coarse,
        };
        count.fetch_add(1, Ordering::Relaxed);
        // Pairs with the fence in `park`: either the thread sees this
        // demand, or this load sees it parked.
        fence(Ordering::SeqCst);
        match self.state.load(Ordering::Acquire) {
            AWAKE
                if need == Need::Coarse
                    && !self.ticking.load(Ordering::Acquire)
                    && !self.nudged.swap(true, Ordering::AcqRel) =>
            {
                self.nudge();
                false
            }
            IDLE => {
                may_spawn()
                    && self
                        .state
                        .compare_exchange(IDLE, SPAWNING, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
            }
            PARKED => {
                if self
                    .state
                    .compare_exchange(PARKED, AWAKE, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    self.unpark();
                }
                false
            }
            _ => false,
        }
    }

    /// Unparks the thread, which is awake or parked.
    fn unpark(&self) {
        let thread = self.thread.load(Ordering::Acquire);
        // SAFETY: an awake or parked thread stored its handle before it said
        // so (Release, seen through the state's Acquire); handles are
        // leaked, never freed.
        if let Some(thread) = unsafe { thread.as_ref() } {
            thread.unpark();
        }
    }

    /// Ends the awake thread's timed sleep, or its next one at once.
    fn nudge(&self) {
        match self.notice() {
            Some(notice) => notice.nudge(),
            None => self.unpark(),
        }
    }

    /// The notice the thread's timed sleeps wait on.
    fn notice(&self) -> Option<&RealtimeNotice> {
        // SAFETY: set before the thread said it runs (Release, seen through
        // the state's Acquire by a reader, and the thread's own); leaked,
        // but in a `fork()`ed child, whose one thread drops it in `forget`.
        unsafe { self.notice.load(Ordering::Acquire).as_ref() }
    }

    /// The thread sleeps `timeout`, or until a coarse read nudges it; true
    /// when a step of the OS's Realtime woke it (where the OS says so).
    pub(super) fn sleep(&self, timeout: Duration) -> bool {
        match self.notice() {
            Some(notice) => notice.wait(timeout),
            None => {
                std::thread::park_timeout(timeout);
                false
            }
        }
    }

    /// The demand so far.
    pub(super) fn demand(&self) -> Demand {
        (
            self.precise.load(Ordering::Relaxed),
            self.coarse.load(Ordering::Relaxed),
        )
    }

    /// The thread runs: it says so, with its handle to wake it by and the
    /// notice its timed sleeps wait on, if any.
    pub(super) fn started(&self, notice: Option<RealtimeNotice>) {
        if let Some(notice) = notice {
            self.notice
                .store(Box::into_raw(Box::new(notice)), Ordering::Release);
        }
        let handle = Box::into_raw(Box::new(current()));
        self.thread.store(handle, Ordering::Release);
        let _ = self
            .state
            .compare_exchange(SPAWNING, AWAKE, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// The OS refused the thread that [`need`](Wake::need) said to spawn.
    pub(super) fn refused(&self) {
        self.state.store(REFUSED, Ordering::Release);
    }

    /// The thread, when no read needed it since it saw `seen`: sleeps until
    /// one does; returns at once if one did meanwhile.
    pub(super) fn park(&self, seen: Demand) {
        // Release: a reader that sees PARKED sees the handle stored before.
        self.state.store(PARKED, Ordering::Release);
        // Pairs with the fence in `need` (see the module docs).
        fence(Ordering::SeqCst);
        if self.demand() != seen {
            let _ = self
                .state
                .compare_exchange(PARKED, AWAKE, Ordering::AcqRel, Ordering::Relaxed);
            return;
        }
        // A wake sets the state before it unparks; a spurious return of
        // `park` parks again.
        while self.state.load(Ordering::Acquire) == PARKED {
            park();
        }
    }

    /// Whether the thread keeps the coarse time fresh.
    pub(super) fn ticking(&self) -> bool {
        self.ticking.load(Ordering::Acquire)
    }

    /// The thread starts or stops keeping the coarse time fresh. It stops
    /// before it takes the coarse time away, so that a read that finds it
    /// gone finds the thread not ticking (and winds up itself).
    pub(super) fn set_ticking(&self, ticking: bool) {
        self.ticking.store(ticking, Ordering::Release);
        self.nudged.store(false, Ordering::Release);
    }

    /// In a `fork()`ed child: the thread did not come along (nor one being
    /// asked for); the next read that needs one starts it, with a notice of
    /// its own (the parent's descriptors are shared, so they are closed
    /// here). A refusal stays (the child is in the same sandbox).
    pub(super) fn forget(&self) {
        let notice = self.notice.swap(std::ptr::null_mut(), Ordering::Relaxed);
        if !notice.is_null() {
            // SAFETY: from `Box::into_raw` in `started`; this is the child's
            // one thread, and no reader of it holds the notice.
            drop(unsafe { Box::from_raw(notice) });
        }
        if self.state.load(Ordering::Relaxed) != REFUSED {
            self.state.store(IDLE, Ordering::Relaxed);
        }
        self.ticking.store(false, Ordering::Relaxed);
        self.nudged.store(false, Ordering::Relaxed);
        self.thread.store(std::ptr::null_mut(), Ordering::Relaxed);
        // The parent's demand is not the child's: its thread starts from
        // none (and counts the read that starts it).
        self.precise.store(0, Ordering::Relaxed);
        self.coarse.store(0, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// The first read that needs the thread says to spawn it (once); a read
    /// while it is parked wakes it, and the demand it counted is there; a
    /// `fork()`ed child forgets it.
    #[test]
    fn a_read_wakes_the_parked_thread() {
        let wake = Arc::new(Wake::new());
        // A read that may not start the thread (in a signal handler)
        // counts its demand and leaves the start to the next read.
        assert!(!wake.need(Need::Precise, || false));
        assert_eq!((wake.state(), wake.demand()), (IDLE, (1, 0)));
        assert!(wake.need(Need::Precise, || true));
        assert!(!wake.need(Need::Precise, || true), "a second spawn");
        let thread = {
            let wake = wake.clone();
            std::thread::spawn(move || {
                wake.started(None);
                let seen = wake.demand();
                wake.park(seen);
                wake.demand()
            })
        };
        while wake.state() != PARKED {
            std::thread::yield_now();
        }
        assert!(!wake.need(Need::Coarse, || true));
        assert_eq!(thread.join().expect("the thread woke"), (3, 1));
        assert_eq!(wake.state(), AWAKE);
        let handle = wake.thread.load(Ordering::Relaxed);
        wake.forget();
        assert_eq!(wake.state(), IDLE);
        assert!(wake.thread.load(Ordering::Relaxed).is_null());
        // SAFETY: the handle came from `Box::into_raw` in `started`, its
        // thread has ended, and nothing else holds it (leaked on purpose
        // outside tests; freed here so that miri sees no leak).
        drop(unsafe { Box::from_raw(handle) });
    }

    /// A coarse read wakes the thread from a timed sleep when it does not
    /// tick (once: the next coarse read finds it nudged), and not when it
    /// ticks; on the OS's notice of a step of Realtime where it has one (a
    /// nudge is no step), a timed park elsewhere.
    #[test]
    fn a_coarse_read_nudges_a_thread_that_does_not_tick() {
        let wake = Arc::new(Wake::new());
        assert!(wake.need(Need::Precise, || true));
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = {
            let wake = wake.clone();
            std::thread::spawn(move || {
                wake.started(RealtimeNotice::new().ok());
                tx.send(()).expect("the test waits");
                let slept = Instant::now();
                let stepped = wake.sleep(Duration::from_secs(60));
                (slept.elapsed(), stepped)
            })
        };
        rx.recv().expect("the thread started");
        assert!(!wake.need(Need::Coarse, || true));
        assert!(wake.nudged.load(Ordering::Acquire));
        assert!(!wake.need(Need::Coarse, || true));
        let (slept, stepped) = thread.join().expect("the thread woke");
        assert!(slept < Duration::from_secs(60), "slept {slept:?}");
        assert!(!stepped, "a nudge said Realtime stepped");
        wake.set_ticking(true);
        assert!(!wake.nudged.load(Ordering::Acquire));
        assert!(!wake.need(Need::Coarse, || true));
        assert!(
            !wake.nudged.load(Ordering::Acquire),
            "a ticking thread nudged"
        );
        let handle = wake.thread.swap(std::ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: from `Box::into_raw` in `started`; the thread has ended.
        drop(unsafe { Box::from_raw(handle) });
        // Drops the notice, as a forked child does.
        wake.forget();
        assert!(wake.notice().is_none());
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A `Wake` whose thread (this one) runs.
    fn running() -> Arc<Wake> {
        let wake = Arc::new(Wake::new());
        wake.state.store(SPAWNING, Ordering::Relaxed);
        wake.started(None);
        wake
    }

    /// A thread parks while a reader needs it: whatever the interleaving,
    /// the thread does not sleep through the reader's demand (loom fails a
    /// model where every thread is blocked), and the demand is seen.
    #[test]
    fn loom_a_park_never_sleeps_through_a_read() {
        loom::model(|| {
            let wake = running();
            let seen = wake.demand();
            let reader = {
                let wake = wake.clone();
                loom::thread::spawn(move || {
                    assert!(!wake.need(Need::Precise, || true));
                })
            };
            wake.park(seen);
            reader.join().unwrap();
            assert_ne!(wake.demand(), seen);
            assert_eq!(wake.state(), AWAKE);
        });
    }

    /// A reader that needs the thread while it is still starting: whatever
    /// the interleaving with its start and its park, the thread does not
    /// sleep through the demand, and no second thread is asked for.
    #[test]
    fn loom_a_read_during_the_start_is_not_lost() {
        loom::model(|| {
            let wake = Arc::new(Wake::new());
            wake.state.store(SPAWNING, Ordering::Relaxed);
            let reader = {
                let wake = wake.clone();
                loom::thread::spawn(move || {
                    assert!(!wake.need(Need::Precise, || true));
                })
            };
            wake.started(None);
            wake.park((0, 0));
            reader.join().unwrap();
            assert_eq!(wake.demand(), (1, 0));
        });
    }

    /// Two readers need the parked thread at once: one wakes it, neither
    /// spawns another. (The thread ticked before it parked, so that no
    /// coarse read nudges it from a timed sleep, which loom does not model.)
    #[test]
    fn loom_two_readers_wake_one_thread() {
        loom::model(|| {
            let wake = running();
            wake.set_ticking(true);
            let seen = wake.demand();
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let wake = wake.clone();
                    loom::thread::spawn(move || wake.need(Need::Coarse, || true))
                })
                .collect();
            wake.park(seen);
            for reader in readers {
                assert!(!reader.join().unwrap());
            }
            assert_eq!(wake.state(), AWAKE);
        });
    }
}
