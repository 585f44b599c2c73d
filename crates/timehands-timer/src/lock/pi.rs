//! The Linux lock: a POSIX mutex with `PTHREAD_PRIO_INHERIT` (a PI futex)
//! where it must inherit, `PTHREAD_PRIO_NONE` where not (see `lock`).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::ptr;

/// A mutual-exclusion lock around a `T`, with priority inheritance or
/// without.
pub(crate) struct Lock<T> {
    /// Boxed: a POSIX mutex must not move once initialized.
    mutex: Box<UnsafeCell<libc::pthread_mutex_t>>,
    /// `PTHREAD_PRIO_INHERIT` or `PTHREAD_PRIO_NONE`.
    protocol: libc::c_int,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which exists while the
// mutex is held by the thread that has it.
unsafe impl<T: Send> Send for Lock<T> {}
// SAFETY: as above: one thread at a time reaches the data.
unsafe impl<T: Send> Sync for Lock<T> {}

/// The lock, held; released when dropped, on the thread that took it (a
/// POSIX mutex is unlocked by its owner).
pub(crate) struct Guard<'a, T> {
    lock: &'a Lock<T>,
    not_send: PhantomData<*const ()>,
}

impl<T> Lock<T> {
    /// A lock around `value` that lends a waiter's priority to its holder
    /// if `inherit`.
    pub(crate) fn new(value: T, inherit: bool) -> Lock<T> {
        let protocol = if inherit {
            libc::PTHREAD_PRIO_INHERIT
        } else {
            libc::PTHREAD_PRIO_NONE
        };
        let lock = Lock {
            mutex: Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)),
            protocol,
            data: UnsafeCell::new(value),
        };
        init(lock.mutex.get(), protocol);
        lock
    }

    /// Waits for the lock, lending this thread's priority to its holder.
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        // SAFETY: the mutex was initialized in `new` and never moves.
        let rc = unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
        // EDEADLK (held by this thread) is a bug; a PI mutex has no other
        // error but resource limits on the futex, which the kernel does not
        // reach for one waiter per thread.
        assert_eq!(rc, 0, "pthread_mutex_lock: error {rc}");
        Guard {
            lock: self,
            not_send: PhantomData,
        }
    }

    /// The lock if it is free now.
    pub(crate) fn try_lock(&self) -> Option<Guard<'_, T>> {
        // SAFETY: as in `lock`.
        let rc = unsafe { libc::pthread_mutex_trylock(self.mutex.get()) };
        // A guard unlocks when dropped: it is made only if the lock is ours
        // (`then_some` would make one anyway and drop it, unlocking the
        // holder's mutex).
        (rc == 0).then(|| Guard {
            lock: self,
            not_send: PhantomData,
        })
    }

    /// Makes the lock afresh around `value`, held by nobody, and forgets
    /// (never drops nor reads) what it guarded: after a fork, where it may
    /// have been held, mid-change, by a thread of the parent.
    ///
    /// # Safety
    ///
    /// No other thread may use the lock during the call.
    pub(crate) unsafe fn reset(&self, value: T) {
        // SAFETY: the caller keeps every other thread away; the old value is
        // overwritten without being dropped.
        unsafe {
            ptr::write(self.data.get(), value);
            ptr::write(self.mutex.get(), libc::PTHREAD_MUTEX_INITIALIZER);
        }
        init(self.mutex.get(), self.protocol);
    }
}

/// Initializes the mutex at `mutex` with `protocol`.
fn init(mutex: *mut libc::pthread_mutex_t, protocol: libc::c_int) {
    let mut attr = MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
    // SAFETY: `attr` is initialized by the first call before the others use
    // it; `mutex` points at a mutex nobody else uses yet. The calls cannot
    // fail on Linux with these arguments (glibc supports both protocols).
    let rc = unsafe {
        libc::pthread_mutexattr_init(attr.as_mut_ptr());
        let rc = libc::pthread_mutexattr_setprotocol(attr.as_mut_ptr(), protocol)
            | libc::pthread_mutex_init(mutex, attr.as_ptr());
        libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
        rc
    };
    assert_eq!(rc, 0, "a mutex with protocol {protocol}: error {rc}");
}

impl<T> Drop for Lock<T> {
    fn drop(&mut self) {
        // SAFETY: nobody holds a guard (they borrow the lock), so the mutex
        // is unlocked and may be destroyed.
        unsafe { libc::pthread_mutex_destroy(self.mutex.get()) };
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the mutex, and `&mut self` is unique.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread holds the mutex (a guard is not `Send`).
        unsafe { libc::pthread_mutex_unlock(self.lock.mutex.get()) };
    }
}
