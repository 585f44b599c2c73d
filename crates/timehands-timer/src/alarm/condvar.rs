//! The alarm where no timerfd is at hand: a deadline under a mutex, and a
//! condition variable to wake its waiters when it moves (see `alarm`).

use std::cell::UnsafeCell;
use std::io;
use std::ptr;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub(crate) struct Alarm {
    /// Written only by `reset_after_fork`, which no other thread overlaps.
    bell: UnsafeCell<Bell>,
}

struct Bell {
    /// When the alarm rings, until a wait takes the ring; `None`: disarmed.
    deadline: Mutex<Option<u64>>,
    /// Notified whenever the deadline is set.
    moved: Condvar,
}

// SAFETY: the cell is written only by `reset_after_fork`, whose caller keeps
// every other thread away; otherwise it is a mutex and a condition variable.
unsafe impl Sync for Alarm {}

impl Bell {
    fn new() -> Bell {
        Bell {
            deadline: Mutex::new(None),
            moved: Condvar::new(),
        }
    }
}

/// Now, as nanoseconds of a `timehands::Instant`: read from std's monotonic
/// clock, the one a condition variable's timeout is measured on.
fn now() -> u64 {
    timehands::Instant::from(std::time::Instant::now()).as_nanos()
}

impl Alarm {
    /// Cannot fail: the `Result` is the timerfd's (see `alarm`).
    pub(crate) fn new() -> io::Result<Alarm> {
        Ok(Alarm {
            bell: UnsafeCell::new(Bell::new()),
        })
    }

    /// In a forked child: a mutex and condition variable of the child's own;
    /// the parent's are forgotten, as a parent's thread may hold the mutex.
    ///
    /// # Safety
    ///
    /// No other thread may use the alarm during the call.
    pub(crate) unsafe fn reset_after_fork(&self) -> io::Result<()> {
        // SAFETY: the caller keeps every other thread away; the old bell is
        // overwritten without being dropped.
        unsafe { ptr::write(self.bell.get(), Bell::new()) };
        Ok(())
    }

    fn bell(&self) -> &Bell {
        // SAFETY: only `reset_after_fork` writes the cell, and no other use
        // overlaps it.
        unsafe { &*self.bell.get() }
    }

    /// The deadline, locked. Nothing panics under this lock, so poisoning
    /// tells nothing.
    fn deadline(&self) -> MutexGuard<'_, Option<u64>> {
        self.bell()
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Rings at `deadline` (nanoseconds of a `timehands::Instant`); `None`
    /// disarms.
    pub(crate) fn set(&self, deadline: Option<u64>) {
        *self.deadline() = deadline;
        // Every waiter looks again; one takes a ring that is due.
        self.bell().moved.notify_all();
    }

    /// Blocks until the alarm rings (or returns at once if it has rung since
    /// the last wait).
    pub(crate) fn wait(&self) {
        let moved = &self.bell().moved;
        let mut deadline = self.deadline();
        loop {
            deadline = match *deadline {
                None => moved.wait(deadline).unwrap_or_else(PoisonError::into_inner),
                Some(at) => {
                    let now = now();
                    if now >= at {
                        // Taken: the next wait sleeps until the alarm is set.
                        *deadline = None;
                        return;
                    }
                    // A timeout may end early or late, and the deadline may
                    // move meanwhile: the loop looks again either way.
                    moved
                        .wait_timeout(deadline, Duration::from_nanos(at - now))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }
}
