//! `Epoch`: which process a service's threads and locks belong to, so that a
//! forked child gets a service of its own instead of the parent's remains.
//!
//! `fork` copies the memory of a multi-threaded process into a child with
//! one thread. The service's expiry threads are not in it, but their locks
//! are, as they were: one held by an expiry thread at the fork stays held
//! for ever, and the data it guards may be half changed. So no lock is taken
//! across the fork point. A `pthread_atfork` child handler only counts the
//! fork (an atomic add: async-signal-safe, as a child handler must be), and
//! every entry into a service first compares the count with its own epoch.
//! The first entry in the child to see them differ resets the service: its
//! locks are made afresh, what they guarded (timers, callbacks, statistics)
//! is forgotten unread, and new expiry threads are started. Threads entering
//! meanwhile wait for the reset to end.
//!
//! Windows and WASI have no fork: there the count stays 0 and no reset ever
//! runs.

use std::sync::atomic::{AtomicU64, Ordering};

/// Forks since the process started, as this process's ancestry counts them:
/// a child starts with its parent's count plus one.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Set in an epoch while a thread resets its service; the low bits keep the
/// fork count that thread is resetting for.
const RESETTING: u64 = 1 << 63;

/// The fork count, with the handler that keeps it registered.
fn forks() -> u64 {
    atfork::register();
    FORKS.load(Ordering::Acquire)
}

#[cfg(unix)]
mod atfork {
    use std::sync::Once;
    use std::sync::atomic::Ordering;

    use super::FORKS;

    extern "C" fn count_fork_in_child() {
        FORKS.fetch_add(1, Ordering::AcqRel);
    }

    /// Registers the child handler that counts forks, once.
    pub(super) fn register() {
        static HANDLER: Once = Once::new();
        HANDLER.call_once(|| {
            // SAFETY: the handler is an `extern "C" fn` that lives as long
            // as the process and only touches an atomic. The call fails only
            // for lack of memory, and then the count stays at 0: forks go
            // unseen, as before the service existed.
            unsafe { libc::pthread_atfork(None, None, Some(count_fork_in_child)) };
        });
    }
}

#[cfg(not(unix))]
mod atfork {
    /// No fork, so no handler: the count stays 0.
    pub(super) fn register() {}
}

/// The process (as a fork count) a service was made or last reset in.
pub(crate) struct Epoch(AtomicU64);

impl Epoch {
    /// The current process's epoch.
    pub(crate) fn new() -> Epoch {
        Epoch(AtomicU64::new(forks()))
    }

    /// The current process's fork count: an epoch that differs from it
    /// belongs to an ancestor.
    pub(crate) fn current() -> u64 {
        forks()
    }

    /// Returns once the epoch is the current process's, running `reset`
    /// first if it was not (on one thread, others waiting for it).
    pub(crate) fn enter(&self, reset: impl FnOnce()) {
        let now = forks();
        let mut seen = self.0.load(Ordering::Acquire);
        while seen != now {
            // A reset begun for an ancestor was cut off by the fork, its
            // thread gone: this process takes it over.
            if seen == RESETTING | now {
                std::thread::yield_now();
                seen = self.0.load(Ordering::Acquire);
                continue;
            }
            match self.0.compare_exchange(
                seen,
                RESETTING | now,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    reset();
                    self.0.store(now, Ordering::Release);
                    return;
                }
                Err(actual) => seen = actual,
            }
        }
    }
}
