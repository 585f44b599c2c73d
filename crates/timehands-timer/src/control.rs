//! `Control`: a timer's state, shared by its handles and its side's expiry
//! threads, which decides without a lock who has the timer's callback.
//!
//! Callers never wait for a side's lock (see `requests`), yet
//! [`Timer::cancel`] must answer at once, and its `true` must mean that the
//! callback will not run again. So each hard timer has one word: a version,
//! bumped by every reschedule, and a status:
//!
//! - **Armed**: the callback is in its cell. Whoever moves the word out of
//!   Armed has it: an expiry thread to run it (Running, or Done for a
//!   one-shot timer), a cancel to drop it (Done).
//! - **Running**: a periodic timer's callback is out, on an expiry thread.
//!   A cancel moves the word to Done (that thread then drops the callback
//!   after the run); a reschedule bumps the version. The thread puts the
//!   callback back *before* it moves the word back to Armed.
//! - **Done**: fired (one-shot), cancelled, or disarmed by its callback's
//!   panic. Final.
//!
//! An expiry thread fires an expiry only if the word still holds the version
//! the expiry was queued with: a reschedule in between bumped it (the
//! expiry is stale) and sent a request that queues the timer again. On the
//! soft side, whose workers are several, that request may be applied, and
//! its expiry come due, while the callback still runs on another worker:
//! the expiry is then busy, and waits for the callback to be back.
//!
//! [`Timer::cancel`]: crate::Timer::cancel

use crate::sync::{AtomicU64, Ordering, UnsafeCell};

const STATUS_BITS: u32 = 2;
const STATUS: u64 = (1 << STATUS_BITS) - 1;
const ARMED: u64 = 0;
const RUNNING: u64 = 1;
const DONE: u64 = 2;

/// `Control::queued` when the timer is in no queue: the bits of no
/// `HeapKey` (an arena index of `u32::MAX` needs 2^32 entries).
const NOWHERE: u64 = u64::MAX;

/// A version one reschedule later than `word`'s, same status.
const ONE_VERSION: u64 = 1 << STATUS_BITS;

fn version(word: u64) -> u64 {
    word >> STATUS_BITS
}

fn status(word: u64) -> u64 {
    word & STATUS
}

/// What an expiry thread found when an expiry of the timer came due.
pub(crate) enum Take<C> {
    /// The expiry is the timer's: its callback, now the thread's.
    Fire(C),
    /// The expiry is the timer's, but its callback still runs on another
    /// thread (see the module docs).
    Busy,
    /// Rescheduled or cancelled since the expiry was queued.
    Stale,
}

/// One timer's state; see the module docs. `C` is the callback (a type
/// parameter for the model checker's tests).
pub(crate) struct Control<C> {
    word: AtomicU64,
    callback: UnsafeCell<Option<C>>,
    /// The period of a periodic timer, in nanoseconds (at least 1).
    period: Option<u64>,
    /// How late it may fire, in nanoseconds (0 for a hard timer).
    slack: u64,
    /// Where its side has the timer queued: a queue key's bits, or
    /// `NOWHERE`. Written only under the side's lock (atomic to be shared
    /// without `unsafe`, and for a cancel's look; see `Side::cancel`).
    queued: AtomicU64,
}

// SAFETY: the callback cell is reached only by the one thread the word's
// protocol gives it to (see the module docs); the rest is atomic.
unsafe impl<C: Send> Sync for Control<C> {}

impl<C> Control<C> {
    /// An armed timer, at version 0.
    pub(crate) fn new(callback: C, period: Option<u64>, slack: u64) -> Control<C> {
        Control {
            word: AtomicU64::new(ARMED),
            callback: UnsafeCell::new(Some(callback)),
            period,
            slack,
            queued: AtomicU64::new(NOWHERE),
        }
    }

    pub(crate) fn period(&self) -> Option<u64> {
        self.period
    }

    pub(crate) fn slack(&self) -> u64 {
        self.slack
    }

    /// The timer's version, `None` once it is done.
    pub(crate) fn version(&self) -> Option<u64> {
        let word = self.word.load(Ordering::Acquire);
        (status(word) != DONE).then_some(version(word))
    }

    /// Disarms the timer: `Some` if its callback will not run again (with
    /// the callback, for the caller to drop, if it was not out running);
    /// `None` if it was done already.
    pub(crate) fn cancel(&self) -> Option<Option<C>> {
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if status(word) == DONE {
                return None;
            }
            let done = (word & !STATUS) | DONE;
            match self
                .word
                .compare_exchange(word, done, Ordering::AcqRel, Ordering::Acquire)
            {
                // Armed: the callback is in its cell, and now this thread's.
                Ok(previous) if status(previous) == ARMED => return Some(self.take_callback()),
                // Running: the hard thread drops it after the run.
                Ok(_) => return Some(None),
                Err(actual) => word = actual,
            }
        }
    }

    /// Bumps the version for a reschedule: the new version, or `None` if
    /// the timer is done.
    pub(crate) fn bump(&self) -> Option<u64> {
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if status(word) == DONE {
                return None;
            }
            let bumped = word + ONE_VERSION;
            match self
                .word
                .compare_exchange(word, bumped, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(version(bumped)),
                Err(actual) => word = actual,
            }
        }
    }

    /// An expiry thread, at an expiry queued at `version`: the callback if
    /// the timer is still armed at that version, the word moved to Running
    /// if `again` (a periodic timer that has a next expiry), else to Done.
    pub(crate) fn take(&self, version: u64, again: bool) -> Take<C> {
        let armed = (version << STATUS_BITS) | ARMED;
        let next = (armed & !STATUS) | if again { RUNNING } else { DONE };
        match self
            .word
            .compare_exchange(armed, next, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Take::Fire(
                self.take_callback()
                    .expect("an armed timer has its callback"),
            ),
            Err(actual) if actual == (armed & !STATUS) | RUNNING => Take::Busy,
            Err(_) => Take::Stale,
        }
    }

    /// The expiry thread, after a periodic callback's run: puts it back and
    /// re-arms the timer at its current version; the callback back if the
    /// timer was cancelled meanwhile, for the caller to drop.
    pub(crate) fn give_back(&self, callback: C) -> Option<C> {
        // Back in the cell first: once the word says Armed, a cancel may
        // take it.
        self.callback.with_mut(|cell| {
            // SAFETY: the word is Running, or Done from Running: the cell
            // is this (the expiry) thread's alone.
            unsafe { *cell = Some(callback) }
        });
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if status(word) == DONE {
                return self.take_callback();
            }
            let armed = word & !STATUS;
            match self
                .word
                .compare_exchange(word, armed, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return None,
                Err(actual) => word = actual,
            }
        }
    }

    /// The expiry thread, after a periodic callback panicked: the timer is
    /// done (left armed, it would be re-armed every period with nothing to
    /// run).
    pub(crate) fn disarm(&self) {
        // Never fails: the closure always has a new word.
        let _ = self
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                Some((word & !STATUS) | DONE)
            });
    }

    /// The callback out of its cell.
    fn take_callback(&self) -> Option<C> {
        self.callback.with_mut(|cell| {
            // SAFETY: called only by the thread the protocol gives the cell
            // to: the one that moved the word out of Armed, or the expiry
            // thread while the word is Running or Done from Running.
            unsafe { (*cell).take() }
        })
    }

    /// Where its side has the timer queued (see the field).
    pub(crate) fn queued(&self) -> Option<u64> {
        Some(self.queued.load(Ordering::Relaxed)).filter(|&bits| bits != NOWHERE)
    }

    pub(crate) fn set_queued(&self, key: Option<u64>) {
        self.queued.store(key.unwrap_or(NOWHERE), Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_takes_an_armed_callback_and_ends_the_timer() {
        let control = Control::new("callback", None, 0);
        assert_eq!(control.cancel(), Some(Some("callback")));
        assert!(control.version().is_none());
        assert_eq!(control.cancel(), None);
        assert_eq!(control.bump(), None);
        assert!(matches!(control.take(0, false), Take::Stale));
    }

    #[test]
    fn a_reschedule_makes_the_queued_expiry_stale() {
        let control = Control::new("callback", Some(5), 0);
        assert_eq!(control.bump(), Some(1));
        assert!(matches!(control.take(0, true), Take::Stale));
        let Take::Fire(callback) = control.take(1, true) else {
            panic!("the expiry at the current version is the timer's");
        };
        // Rescheduled while it runs: its new expiry is busy until the
        // callback is given back, armed at the new version.
        assert_eq!(control.bump(), Some(2));
        assert!(matches!(control.take(2, true), Take::Busy));
        assert_eq!(control.give_back(callback), None);
        assert!(matches!(control.take(1, true), Take::Stale));
        assert!(matches!(control.take(2, false), Take::Fire("callback")));
        assert!(control.version().is_none());
    }

    #[test]
    fn a_cancel_while_the_callback_runs_leaves_it_to_the_hard_thread() {
        let control = Control::new("callback", Some(5), 0);
        let Take::Fire(callback) = control.take(0, true) else {
            panic!("armed at version 0");
        };
        assert_eq!(control.cancel(), Some(None));
        assert_eq!(control.give_back(callback), Some("callback"));
        assert!(control.version().is_none());
    }

    #[test]
    fn a_panicked_callbacks_timer_is_disarmed() {
        let control = Control::new("callback", Some(5), 0);
        let Take::Fire(_) = control.take(0, true) else {
            panic!("armed at version 0");
        };
        control.disarm();
        assert!(control.version().is_none());
        assert_eq!(control.cancel(), None);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicUsize;
    use loom::thread;

    use super::*;

    /// Counts its drops.
    struct Callback(Arc<AtomicUsize>);

    impl Drop for Callback {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The hard thread fires a periodic timer (at version 0, then at
    /// whatever version a reschedule left it) while one caller cancels and
    /// another reschedules it. In every interleaving the callback's cell is
    /// never reached by two threads at once (loom's cell checks that), the
    /// callback is dropped exactly once, and once the cancel has said the
    /// callback will not run again, no expiry can take it.
    #[test]
    fn the_callback_has_one_owner_at_a_time_and_a_cancel_is_final() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let control = Arc::new(Control::new(Callback(Arc::clone(&drops)), Some(1), 0));
            let canceller = {
                let control = Arc::clone(&control);
                thread::spawn(move || control.cancel().map(drop).is_some())
            };
            let rescheduler = {
                let control = Arc::clone(&control);
                thread::spawn(move || control.bump())
            };
            let mut version = 0;
            for _ in 0..3 {
                match control.take(version, true) {
                    Take::Fire(callback) => {
                        if let Some(cancelled) = control.give_back(callback) {
                            drop(cancelled);
                            break;
                        }
                    }
                    Take::Stale if control.version().is_none() => break,
                    Take::Stale => version += 1,
                    Take::Busy => unreachable!("the callback is out on no other thread"),
                }
            }
            assert!(canceller.join().unwrap(), "nothing else ends the timer");
            rescheduler.join().unwrap();
            for version in 0..3 {
                assert!(matches!(control.take(version, true), Take::Stale));
            }
            assert_eq!(drops.load(Ordering::Relaxed), 1, "dropped once");
        });
    }

    /// A soft worker runs a periodic timer's callback (taken at version 0)
    /// while a caller reschedules the timer, and another worker takes the
    /// rescheduled expiry (at version 1) as the first gives the callback
    /// back. In every interleaving the second worker finds the expiry busy
    /// (and, once the callback is back, fires it) or fires it at once, never
    /// stale, and the callback's cell is never reached by two at once.
    #[test]
    fn an_expiry_due_while_its_callback_is_out_is_busy_not_stale() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let control = Arc::new(Control::new(Callback(Arc::clone(&drops)), Some(1), 0));
            let Take::Fire(callback) = control.take(0, true) else {
                panic!("armed at version 0");
            };
            let first_worker = {
                let control = Arc::clone(&control);
                thread::spawn(move || assert!(control.give_back(callback).is_none()))
            };
            assert_eq!(control.bump(), Some(1), "the reschedule");
            // Busy, the expiry is queued again by the next round: here,
            // once the first worker is done.
            let mut first_worker = Some(first_worker);
            let callback = loop {
                match control.take(1, true) {
                    Take::Fire(callback) => break callback,
                    Take::Busy => first_worker
                        .take()
                        .expect("busy only while the callback is out")
                        .join()
                        .unwrap(),
                    Take::Stale => panic!("the expiry at the current version is stale"),
                }
            };
            if let Some(first_worker) = first_worker {
                first_worker.join().unwrap();
            }
            drop(callback);
            assert_eq!(drops.load(Ordering::Relaxed), 1);
        });
    }
}
