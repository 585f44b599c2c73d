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
