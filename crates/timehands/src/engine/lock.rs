//! The writer lock: one writer at a time, and the state only writers touch.
//!
//! Readers never come here. Writers (windups, slews, frequency and realtime
//! changes) take turns: `windup` tries once and leaves the work to the writer
//! that holds the lock; the others wait for it, as writers may.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};

use crate::engine::sync::{AtomicBool, Ordering, back_off};

/// A spin lock around `T`: the smallest lock that works without an OS
/// (with one, a waiter sleeps between tries after a few microseconds).
pub(crate) struct WriterLock<T> {
    locked: AtomicBool,
    state: UnsafeCell<T>,
}

// SAFETY: the state is reached only through a `WriterGuard`, and at most one
// guard exists at a time (see `try_lock`), so sharing the lock between threads
// shares the state with one thread at a time: `T: Send` is all that needs.
unsafe impl<T: Send> Sync for WriterLock<T> {}

/// Access to the writer state, for as long as the lock is held.
pub(crate) struct WriterGuard<'a, T> {
    lock: &'a WriterLock<T>,
}

impl<T> WriterLock<T> {
    pub(crate) fn new(state: T) -> WriterLock<T> {
        WriterLock {
            locked: AtomicBool::new(false),
            state: UnsafeCell::new(state),
        }
    }

    /// The lock, if no other writer holds it.
    pub(crate) fn try_lock(&self) -> Option<WriterGuard<'_, T>> {
        // The guard is made only on success: dropping one unlocks.
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| WriterGuard { lock: self })
    }

    /// Lets go of a lock whose holder no longer exists: in a `fork()`ed
    /// child, where only the forking thread goes on. The state is as the
    /// holder left it (a writer publishes first and updates its state after,
    /// so at worst it lacks the last windup's accounting).
    ///
    /// # Safety
    /// No thread of this process may hold a guard.
    #[cfg(feature = "std")]
    pub(crate) unsafe fn release_after_fork(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// The lock, once the writer that holds it lets go: spinning for a
    /// while (a writer holds it for a windup, a microsecond or so), then,
    /// where there is an OS, sleeping between tries, so that a holder the
    /// scheduler took off its CPU gets one. (A real-time thread that spun
    /// here, steering the host clock, kept a normal-priority holder from
    /// the CPU for 97 ms while four other threads ran on two vCPUs.)
    pub(crate) fn lock(&self) -> WriterGuard<'_, T> {
        let mut tries: u32 = 0;
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            tries = tries.saturating_add(1);
            back_off(tries);
        }
    }
}

impl<T> Deref for WriterGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (acquired in `try_lock`, released in
        // `drop`), so no other guard, and no other reference to the state, exists.
        unsafe { &*self.lock.state.get() }
    }
}

impl<T> DerefMut for WriterGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.lock.state.get() }
    }
}

impl<T> Drop for WriterGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(all(test, feature = "std", not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::WriterLock;
    use crate::os::thread_cpu_nanos;

    /// A writer that waits for the lock while its holder keeps it (as one
    /// the scheduler took off the CPU does) sleeps rather than spins: its
    /// CPU time is a small part of the wait. (Spinning, it was all of it,
    /// and a real-time waiter kept the holder from the CPU.)
    #[test]
    #[cfg_attr(miri, ignore = "the thread's CPU time is the OS's")]
    fn a_waiter_sleeps_while_the_holder_keeps_the_lock() {
        if let Err(why) = thread_cpu_nanos() {
            println!("skipped: no thread CPU time here ({why})");
            return;
        }
        let lock = Arc::new(WriterLock::new(0));
        let guard = lock.lock();
        let waiter = std::thread::spawn({
            let lock = Arc::clone(&lock);
            move || {
                let (wall, cpu) = (Instant::now(), thread_cpu_nanos().unwrap_or(0));
                *lock.lock() += 1;
                let cpu = thread_cpu_nanos().unwrap_or(0).saturating_sub(cpu);
                (wall.elapsed(), Duration::from_nanos(cpu))
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        drop(guard);
        let (waited, cpu) = waiter.join().expect("the waiter returns");
        assert_eq!(*lock.lock(), 1);
        assert!(
            cpu < waited / 4,
            "{cpu:?} of CPU while waiting {waited:?} for the lock"
        );
    }
}
