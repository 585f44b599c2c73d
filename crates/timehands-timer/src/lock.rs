//! `Lock`: a mutex that lends the priority of its waiters to its holder,
//! where the OS can.
//!
//! The hard expiry thread asks for SCHED_FIFO. Callers of `hard_at`,
//! `cancel` and `reschedule` never wait for its lock (see `hard`), but a
//! caller that finds it free takes it to apply a batch of requests, and
//! `Debug` and dropping the service take it too; all run at normal
//! priority. With a plain mutex, such a thread preempted while it holds the
//! lock (by any other normal thread) keeps the real-time thread waiting for
//! as long as the scheduler leaves it off the CPU: priority inversion,
//! milliseconds late.
//!
//! On Linux the lock is a POSIX mutex with `PTHREAD_PRIO_INHERIT`, a PI
//! futex: while a higher-priority thread waits, the kernel runs the holder
//! at the waiter's priority, so the wait lasts one critical section, as an
//! `rt_mutex` on PREEMPT_RT does for the kernel's own hrtimer bases. The
//! uncontended path is a compare-and-swap in user space, as for any mutex; a
//! contended one always goes through the kernel, which is slower than a
//! plain mutex's (a third of the arm+cancel rate with four threads on two
//! CPUs, when callers queued for the hard lock), so locks that no real-time
//! thread takes are made plain (`PTHREAD_PRIO_NONE`).
//!
//! Elsewhere the lock is std's mutex, which inherits no priority: the libc
//! crate declares `pthread_mutexattr_setprotocol` for Linux's C libraries
//! only (not for Android's bionic, macOS, the BSDs or illumos), and Windows
//! and WASI have no such protocol. There a caller preempted while it applies
//! a batch of requests holds the real-time hard thread up until it runs
//! again.
//!
//! After a fork the child has none of the parent's threads, but their locks
//! as they were: [`Lock::reset`] makes one afresh for the child, forgetting
//! what it guarded (see `fork`).

// Each has the same interface: `new(value, inherit)`, `lock`, `try_lock`,
// and `reset` after a fork; a guard that unlocks when dropped.
#[cfg(target_os = "linux")]
mod pi;
#[cfg(target_os = "linux")]
pub(crate) use pi::Lock;

#[cfg(not(target_os = "linux"))]
mod plain;
#[cfg(not(target_os = "linux"))]
pub(crate) use plain::Lock;

#[cfg(all(test, not(loom)))]
mod tests {
    use std::hint::black_box;
    use std::thread;

    use super::Lock;

    /// A `try_lock` that finds the lock held gives nothing back and leaves
    /// the lock with its holder: a guard made and dropped on the way would
    /// unlock another thread's lock. (A plain POSIX mutex lets any thread
    /// unlock it; a priority-inheriting one refuses, so there the mistake
    /// shows only as glibc's bookkeeping gone wrong.)
    #[test]
    fn a_failed_try_leaves_the_lock_with_its_holder() {
        for inherit in [false, true] {
            let lock = Lock::new(0_u64, inherit);
            let held = lock.lock();
            thread::scope(|s| {
                s.spawn(|| {
                    for attempt in 0..3 {
                        assert!(
                            lock.try_lock().is_none(),
                            "attempt {attempt} got a lock held elsewhere (inherit: {inherit})"
                        );
                    }
                });
            });
            drop(held);
            assert!(lock.try_lock().is_some(), "the lock is free once let go");
        }
    }

    /// Threads that take the lock both ways, waiting and trying, never hold
    /// it at once: every increment made under it is kept.
    #[test]
    fn threads_locking_and_trying_never_hold_the_lock_at_once() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 20_000;
        for inherit in [false, true] {
            let lock = Lock::new(0_u64, inherit);
            let taken: u64 = thread::scope(|s| {
                let workers: Vec<_> = (0..THREADS)
                    .map(|_| {
                        s.spawn(|| {
                            let mut taken = 0;
                            for round in 0..ROUNDS {
                                let guard = if round % 2 == 0 {
                                    Some(lock.lock())
                                } else {
                                    lock.try_lock()
                                };
                                if let Some(mut count) = guard {
                                    // A read and a write apart, so that two
                                    // holders at once would lose updates.
                                    let seen = black_box(*count);
                                    thread::yield_now();
                                    *count = seen + 1;
                                    taken += 1;
                                }
                            }
                            taken
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).sum()
            });
            assert_eq!(*lock.lock(), taken, "inherit: {inherit}");
        }
    }
}
