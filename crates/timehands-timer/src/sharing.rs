//! `Sharing`: the soft workers' callbacks before their requests, where the
//! machine has no CPU to spare for both.
//!
//! A round takes a batch of due timers and runs their callbacks one after
//! another, without the lock; the timers at the end of the batch wait for
//! the worker to run. A worker that applies requests meanwhile (a pile of
//! them, armed by another thread) needs a CPU of its own, or it takes turns
//! with the callbacks: on two CPUs, one held by the thread arming the pile,
//! the fair scheduler gave the two workers turns of a millisecond on the
//! other, and the timers waiting in a batch waited as long (see `soft` for
//! the measurements). So when the workers running callbacks, with one CPU
//! left for the program's threads that arm, take every CPU the process
//! has, the other workers apply a batch of requests only once a tick has
//! passed since the last one was applied, and otherwise sleep until then
//! (or until a timer is due). Requests still go in, a batch a tick at
//! least, and at full speed once the callbacks are done or where a CPU is
//! to spare (two soft workers on four CPUs or more never wait). While
//! they wait, callers are told not to ring the alarm: a request could not
//! be applied sooner, and the alarm is set for the next batch.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The soft workers' callbacks and batches of requests; see the module
/// docs. Each figure is a hint, read and written relaxed: a stale one
/// applies a batch a little early or late.
#[derive(Debug)]
pub(crate) struct Sharing {
    /// The CPUs the process may run on.
    cpus: AtomicUsize,
    /// How many workers run callbacks they took.
    running: AtomicUsize,
    /// When a batch of requests was last walked or applied.
    applied_at: AtomicU64,
}

impl Sharing {
    /// For a process that may run on `cpus` CPUs.
    pub(crate) fn new(cpus: usize) -> Sharing {
        Sharing {
            cpus: AtomicUsize::new(cpus),
            running: AtomicUsize::new(0),
            applied_at: AtomicU64::new(0),
        }
    }

    /// For this process: as many CPUs as it may run on (its affinity, and
    /// on Linux its cgroup's quota), one if that is not known.
    pub(crate) fn for_this_process() -> Sharing {
        Sharing::new(std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// A test's machine of `cpus` CPUs.
    #[cfg(test)]
    pub(crate) fn set_cpus(&self, cpus: usize) {
        self.cpus.store(cpus, Ordering::Relaxed);
    }

    /// After a fork: no worker runs callbacks (the child has none yet).
    pub(crate) fn reset_after_fork(&self) {
        self.running.store(0, Ordering::Relaxed);
        self.applied_at.store(0, Ordering::Relaxed);
    }

    /// A worker has taken callbacks to run: counted until the guard is
    /// dropped, once they have run (or unwound).
    pub(crate) fn callbacks_taken(&self) -> Running<'_> {
        self.running.fetch_add(1, Ordering::Relaxed);
        Running(&self.running)
    }

    /// When a worker may walk or apply the next batch of requests: at once
    /// (0) while a CPU is left for it, besides the callbacks' and one for
    /// the threads that arm; else a `tick` (in nanoseconds) after the last.
    pub(crate) fn next_batch_at(&self, tick: u64) -> u64 {
        let running = self.running.load(Ordering::Relaxed);
        if running == 0 || running + 2 <= self.cpus.load(Ordering::Relaxed) {
            0
        } else {
            self.applied_at.load(Ordering::Relaxed).saturating_add(tick)
        }
    }

    /// A batch of requests was walked or applied at `now`.
    pub(crate) fn applied(&self, now: u64) {
        self.applied_at.store(now, Ordering::Relaxed);
    }
}

/// A worker's callbacks, counted while they run (see
/// [`Sharing::callbacks_taken`]).
pub(crate) struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::Sharing;

    /// Requests wait only while callbacks leave no CPU to spare, and then
    /// a tick from the last batch at most; each worker running callbacks
    /// counts, until its callbacks have run.
    #[test]
    fn requests_wait_a_tick_at_most_while_callbacks_leave_no_cpu() {
        let tick = 1_000;
        let two = Sharing::new(2);
        two.applied(5_000);
        assert_eq!(two.next_batch_at(tick), 0, "no callbacks");
        let (a, b) = (two.callbacks_taken(), two.callbacks_taken());
        assert_eq!(two.next_batch_at(tick), 6_000);
        drop(a);
        assert_eq!(two.next_batch_at(tick), 6_000, "one still runs");
        drop(b);
        assert_eq!(two.next_batch_at(tick), 0);

        let four = Sharing::new(4);
        four.applied(5_000);
        let _running = [four.callbacks_taken(), four.callbacks_taken()];
        assert_eq!(four.next_batch_at(tick), 0, "a CPU to spare");
        let _third = four.callbacks_taken();
        assert_eq!(four.next_batch_at(tick), 6_000);

        let one = Sharing::new(1);
        assert_eq!(one.next_batch_at(tick), 0, "no callbacks");
        let _running = one.callbacks_taken();
        assert_eq!(one.next_batch_at(tick), tick);
    }
}
