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
//! to spare (two soft workers on four CPUs or more never wait).

/// The soft workers' callbacks and batches of requests; see the module
/// docs. Kept under the soft lock.
#[derive(Debug)]
pub(crate) struct Sharing {
    /// The CPUs the process may run on.
    cpus: usize,
    /// How many workers run callbacks they took.
    running: usize,
    /// When a batch of requests was last applied.
    applied_at: u64,
}

impl Sharing {
    /// For a process that may run on `cpus` CPUs.
    pub(crate) fn new(cpus: usize) -> Sharing {
        Sharing {
            cpus,
            running: 0,
            applied_at: 0,
        }
    }

    /// For this process: as many CPUs as it may run on (its affinity, and
    /// on Linux its cgroup's quota), one if that is not known.
    pub(crate) fn for_this_process() -> Sharing {
        Sharing::new(std::thread::available_parallelism().map_or(1, usize::from))
    }

    /// A worker has taken callbacks to run.
    pub(crate) fn callbacks_taken(&mut self) {
        self.running += 1;
    }

    /// A worker's callbacks have run.
    pub(crate) fn callbacks_done(&mut self) {
        self.running = self.running.saturating_sub(1);
    }

    /// When a worker may apply the next batch of requests: at once (0)
    /// while a CPU is left for it, besides the callbacks' and one for the
    /// threads that arm; else a `tick` (in nanoseconds) after the last.
    pub(crate) fn next_batch_at(&self, tick: u64) -> u64 {
        if self.running == 0 || self.running + 2 <= self.cpus {
            0
        } else {
            self.applied_at.saturating_add(tick)
        }
    }

    /// A batch of requests was applied at `now`.
    pub(crate) fn applied(&mut self, now: u64) {
        self.applied_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::Sharing;

    /// Requests wait only while callbacks leave no CPU to spare, and then
    /// a tick from the last batch at most; each worker running callbacks
    /// counts.
    #[test]
    fn requests_wait_a_tick_at_most_while_callbacks_leave_no_cpu() {
        let tick = 1_000;
        let mut two = Sharing::new(2);
        two.applied(5_000);
        assert_eq!(two.next_batch_at(tick), 0, "no callbacks");
        two.callbacks_taken();
        two.callbacks_taken();
        assert_eq!(two.next_batch_at(tick), 6_000);
        two.callbacks_done();
        assert_eq!(two.next_batch_at(tick), 6_000, "one still runs");
        two.callbacks_done();
        assert_eq!(two.next_batch_at(tick), 0);

        let mut four = Sharing::new(4);
        four.applied(5_000);
        four.callbacks_taken();
        four.callbacks_taken();
        assert_eq!(four.next_batch_at(tick), 0, "a CPU to spare");
        four.callbacks_taken();
        assert_eq!(four.next_batch_at(tick), 6_000);

        let mut one = Sharing::new(1);
        assert_eq!(one.next_batch_at(tick), 0, "no callbacks");
        one.callbacks_taken();
        assert_eq!(one.next_batch_at(tick), tick);
    }
}
