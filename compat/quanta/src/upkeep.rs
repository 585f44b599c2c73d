//! `Upkeep`: quanta's promise that the recent time will be read.
//!
//! quanta's upkeep thread stores the time every interval for as long as its
//! [`Handle`] lives, read or not: a wakeup every millisecond for a program
//! that sleeps. timehands' coarse clock is the kernel's (which its timer
//! interrupt keeps) less 50 µs, fresh with no thread at all, so starting an
//! `Upkeep` on a host clock starts no thread: it hands the recent time back
//! to the coarse clock (as quanta's start overwrites a pinned recent time)
//! and reads it once. The interval asks for nothing: the coarse clock lags
//! now by the kernel's tick and 50 µs (six ticks at most, where the
//! kernel's own coarse clock is held up), never ahead of it.
//!
//! A mocked clock has no coarse clock to follow; an `Upkeep` of one does what
//! quanta's does, a thread that stores the mock's time as the recent time
//! every interval.
//!
//! One upkeep at a time, as in quanta: a second `start` while a [`Handle`]
//! lives is [`Error::UpkeepRunning`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;
use std::{fmt, io};

use crate::{Clock, recent, set_recent};

/// Whether a [`Handle`] lives in this process.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// An upkeep of the recent time, to [`start`](Upkeep::start).
///
/// ```
/// use std::time::Duration;
///
/// let handle = quanta::Upkeep::new(Duration::from_millis(1)).start().unwrap();
/// let clock = quanta::Clock::new();
/// assert!(clock.recent() <= clock.now());
/// # drop(handle);
/// ```
#[derive(Debug)]
pub struct Upkeep {
    interval: Duration,
    clock: Clock,
}

/// A started [`Upkeep`]; dropping it ends it, and another may start.
#[derive(Debug)]
pub struct Handle {
    mock_keeper: Option<MockKeeper>,
}

/// The thread that stores a mocked clock's time as the recent time.
#[derive(Debug)]
struct MockKeeper {
    done: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// Why an [`Upkeep`] did not start.
#[derive(Debug)]
pub enum Error {
    /// An upkeep is running in this process already: drop its [`Handle`]
    /// first, or share it.
    UpkeepRunning,
    /// The thread of an upkeep of a mocked clock could not be spawned (an
    /// upkeep of the host clock spawns none, so never fails this way).
    FailedToSpawnUpkeepThread(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UpkeepRunning => write!(f, "upkeep thread already running"),
            Error::FailedToSpawnUpkeepThread(e) => write!(f, "failed to spawn upkeep thread: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::UpkeepRunning => None,
            Error::FailedToSpawnUpkeepThread(e) => Some(e),
        }
    }
}

impl Upkeep {
    /// An upkeep of the host clock's recent time. The interval is quanta's;
    /// here timehands' windup interval bounds how stale the recent time is.
    pub fn new(interval: Duration) -> Upkeep {
        Upkeep::new_with_clock(interval, Clock::new())
    }

    /// An upkeep of `clock`'s recent time: a mocked clock's time is stored
    /// every `interval`.
    pub fn new_with_clock(interval: Duration, clock: Clock) -> Upkeep {
        Upkeep { interval, clock }
    }

    /// Starts the upkeep, until the [`Handle`] is dropped.
    ///
    /// # Errors
    /// [`Error::UpkeepRunning`] while another handle lives;
    /// [`Error::FailedToSpawnUpkeepThread`] where a mocked clock's thread
    /// cannot be spawned.
    pub fn start(self) -> Result<Handle, Error> {
        RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| Error::UpkeepRunning)?;
        if !self.clock.is_mock() {
            recent::unpin();
            // The promise of coarse reads: the first wakes timehands' tick.
            let _ = timehands::now_coarse();
            return Ok(Handle { mock_keeper: None });
        }
        match MockKeeper::spawn(self.interval, self.clock) {
            Ok(keeper) => Ok(Handle {
                mock_keeper: Some(keeper),
            }),
            Err(e) => {
                recent::unpin();
                RUNNING.store(false, Ordering::Release);
                Err(Error::FailedToSpawnUpkeepThread(e))
            }
        }
    }
}

impl MockKeeper {
    fn spawn(interval: Duration, clock: Clock) -> io::Result<MockKeeper> {
        set_recent(clock.now());
        let done = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new().name("quanta-upkeep".into()).spawn({
            let done = done.clone();
            move || {
                while !done.load(Ordering::Acquire) {
                    set_recent(clock.now());
                    thread::park_timeout(interval);
                }
            }
        })?;
        Ok(MockKeeper { done, thread })
    }

    /// Stops the thread and waits for it: no store of the mock's time comes
    /// after this returns.
    fn stop(self) {
        self.done.store(true, Ordering::Release);
        self.thread.thread().unpark();
        // A panic in the thread could only come from the clock, which cannot
        // panic; there is nothing to report either way.
        let _ = self.thread.join();
    }
}

impl Drop for Handle {
    /// Ends the upkeep: the recent time is the coarse clock's again, whatever
    /// was pinned while it ran (quanta's stays at the last time its thread
    /// stored, a mock's or a stale one).
    fn drop(&mut self) {
        if let Some(keeper) = self.mock_keeper.take() {
            keeper.stop();
        }
        recent::unpin();
        RUNNING.store(false, Ordering::Release);
    }
}
