//! `Record`: what a side keeps of its expiries (a lateness histogram, counts,
//! the last panic's message), and the one way both sides run a callback.
//! A soft expiry beyond its bound is counted with its cause, which the
//! worker that runs it tells from where it stands (`Worker`: when it last
//! woke, and how long it has waited for a CPU, see `stall`).
//!
//! The expiry threads write it, users read it ([`TimerService::statistics`],
//! the lateness histograms), and no expiry thread ever waits for a reader:
//! the counts are atomics, the histogram is filled only when its lock is
//! free (figures are kept aside meanwhile), and the last panic's message is
//! taken, rarely, under a lock that a reader holds only to clone it.
//!
//! [`TimerService::statistics`]: crate::TimerService::statistics

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::expiry::{Callback, Expiry, SideStatistics};
use crate::lock::Lock;
use crate::stall::RunDelay;

/// The lateness histograms count nanoseconds up to an hour; later is
/// recorded as an hour.
const LATENESS_MAX_NS: u64 = 3_600_000_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_max(LATENESS_MAX_NS, 3).expect("valid histogram bounds")
}

/// An expiry about to run: when it is late from (its deadline, or when it
/// was armed if that was later), and by when a soft timer's bound has it
/// run (`None` on the hard side, which promises no bound).
pub(crate) struct Due {
    pub(crate) expiry: Expiry,
    pub(crate) late_from: u64,
    pub(crate) bound: Option<u64>,
}

/// Where an expiry thread stands, kept by the soft workers to tell why an
/// expiry beyond its bound was late (see [`SideStatistics`]'s causes).
#[derive(Default)]
pub(crate) struct Worker {
    /// When it last returned from waiting for its alarm (0: never waited).
    pub(crate) woke_at: u64,
    /// The thread's run delay (`None` until a soft worker opens it, and
    /// where the OS does not say).
    pub(crate) run_delay: Option<RunDelay>,
    /// It yielded its CPU after its last round (between two batches of
    /// requests), so a wait for a CPU then is its next round's.
    pub(crate) yielded: bool,
    /// The run delay an expiry's stall is counted from: when the round
    /// began, or the round before it when the worker yielded between them.
    since_delay: Option<u64>,
    /// The run delay when the round began.
    round_delay: Option<u64>,
}

impl Worker {
    /// Whether the thread, starting at `at` an expiry due to have started
    /// by `bound`, was kept from it by the machine rather than by work: it
    /// was still waiting for its alarm after the bound, or it waited for a
    /// CPU (its run delay is `delay` now) for at least half the time the
    /// expiry is late, since its round began (or, after a yield, since the
    /// round before).
    fn stalled(&self, at: u64, bound: u64, delay: Option<u64>) -> bool {
        if self.woke_at > bound {
            return true;
        }
        let Some((then, now)) = self.since_delay.zip(delay) else {
            return false;
        };
        now.saturating_sub(then).saturating_mul(2) >= at - bound
    }

    /// At a round's start: how much the run delay grew since the last
    /// round began.
    pub(crate) fn begin_round(&mut self) -> u64 {
        let delay = self.run_delay.as_ref().and_then(RunDelay::nanos);
        self.begin_round_at(delay)
    }

    /// [`begin_round`](Worker::begin_round) with the run delay read, `delay`.
    fn begin_round_at(&mut self, delay: Option<u64>) -> u64 {
        let last = self.round_delay;
        self.since_delay = if std::mem::take(&mut self.yielded) {
            last
        } else {
            delay
        };
        self.round_delay = delay;
        delay
            .zip(last)
            .map_or(0, |(now, then)| now.saturating_sub(then))
    }
}

/// One side's record; see the module docs.
pub(crate) struct Record {
    lateness: Lock<Histogram<u64>>,
    fired: AtomicU64,
    behind_callbacks: AtomicU64,
    stalled: AtomicU64,
    /// The expiry threads' run delay, in nanoseconds.
    waited_for_cpu: AtomicU64,
    panics: AtomicU64,
    last_panic: Lock<Option<String>>,
}

impl Record {
    /// An empty record; its locks inherit priority if `realtime` (the hard
    /// thread takes them).
    pub(crate) fn new(realtime: bool) -> Record {
        Record {
            lateness: Lock::new(histogram(), realtime),
            fired: AtomicU64::new(0),
            behind_callbacks: AtomicU64::new(0),
            stalled: AtomicU64::new(0),
            waited_for_cpu: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            last_panic: Lock::new(None, realtime),
        }
    }

    /// After a fork: the record from zero, the parent's forgotten unread.
    ///
    /// # Safety
    ///
    /// No other thread may use the record during the call.
    pub(crate) unsafe fn reset_after_fork(&self) {
        // SAFETY: passed on from the caller.
        unsafe {
            self.lateness.reset(histogram());
            self.last_panic.reset(None);
        }
        for counter in [
            &self.fired,
            &self.behind_callbacks,
            &self.stalled,
            &self.waited_for_cpu,
            &self.panics,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    pub(crate) fn lateness(&self) -> Histogram<u64> {
        self.lateness.lock().clone()
    }

    pub(crate) fn statistics(&self) -> SideStatistics {
        let behind_callbacks = self.behind_callbacks.load(Ordering::Relaxed);
        let stalled = self.stalled.load(Ordering::Relaxed);
        SideStatistics {
            fired: self.fired.load(Ordering::Relaxed),
            beyond_bound: behind_callbacks + stalled,
            beyond_bound_behind_callbacks: behind_callbacks,
            beyond_bound_stalled: stalled,
            waited_for_cpu: Duration::from_nanos(self.waited_for_cpu.load(Ordering::Relaxed)),
            panics: self.panics.load(Ordering::Relaxed),
            last_panic: self.last_panic.lock().clone(),
        }
    }

    /// Runs `callback` for `due`, which starts `at` on `worker`, and records
    /// it (`unrecorded` is the expiry thread's own buffer of lateness
    /// figures that a reader kept out of the histogram); whether it
    /// returned (a panic is caught, counted and its message kept: a
    /// panicking callback loses its timer, not the thread).
    pub(crate) fn run(
        &self,
        callback: &mut Callback,
        due: Due,
        (at, worker): (u64, &Worker),
        unrecorded: &mut Vec<u64>,
    ) -> bool {
        unrecorded.push(at.saturating_sub(due.late_from));
        self.record_lateness(unrecorded);
        self.fired.fetch_add(1, Ordering::Relaxed);
        if let Some(bound) = due.bound.filter(|&bound| at > bound) {
            let delay = worker.run_delay.as_ref().and_then(RunDelay::nanos);
            let cause = if worker.stalled(at, bound, delay) {
                &self.stalled
            } else {
                &self.behind_callbacks
            };
            cause.fetch_add(1, Ordering::Relaxed);
        }
        match catch_unwind(AssertUnwindSafe(|| callback(due.expiry))) {
            Ok(()) => true,
            Err(payload) => {
                self.record_panic(payload.as_ref());
                false
            }
        }
    }

    /// Adds `nanos` to the time the expiry threads waited for a CPU.
    pub(crate) fn waited_for_cpu(&self, nanos: u64) {
        self.waited_for_cpu.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Counts a callback's panic and keeps its message.
    fn record_panic(&self, payload: &(dyn Any + Send)) {
        self.panics.fetch_add(1, Ordering::Relaxed);
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
}

#[cfg(test)]
mod tests {
    use super::Worker;

    /// A wait for a CPU in the yield between two rounds is the next
    /// round's: an expiry that round finds late by no more than twice the
    /// wait was kept from it by the machine. Without the yield the round
    /// begins after such a wait, and the same expiry is counted as the
    /// work's; and a round counts from the round before only once.
    #[test]
    fn a_wait_for_a_cpu_in_a_yield_is_the_next_rounds() {
        const MS: u64 = 1_000_000;
        let (bound, at) = (10 * MS, 11 * MS + MS / 2);
        let mut worker = Worker::default();
        assert_eq!(worker.begin_round_at(Some(100)), 0);
        worker.yielded = true;
        // 1 ms waited for a CPU in the yield.
        assert_eq!(worker.begin_round_at(Some(MS + 100)), MS);
        assert!(worker.stalled(at, bound, Some(MS + 100)));
        // The round after counts from its own start.
        worker.begin_round_at(Some(MS + 100));
        assert!(!worker.stalled(at, bound, Some(MS + 100)));

        let mut worker = Worker::default();
        worker.begin_round_at(Some(100));
        worker.begin_round_at(Some(MS + 100));
        assert!(!worker.stalled(at, bound, Some(MS + 100)));
        // Waited in the round itself: the machine's, as before.
        assert!(worker.stalled(at, bound, Some(2 * MS + 100)));
    }
}
