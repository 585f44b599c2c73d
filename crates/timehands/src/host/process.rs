//! The process's one clock: started at the first read, and surviving
//! `fork()`, where a child has one thread, the one that forked, and a copy
//! of everything else, the locks other threads held included.
//!
//! What a child inherits is the clock's state as a step of its life left it
//! (never half a step: below). The clock has no thread of its own to lose:
//! every step is some read's, and the child's reads take them on (a choice
//! the parent was measuring goes on in the child). [`forget_writers`] is
//! the one place that says what a child forgets.
//!
//! The clock's life changes its state in steps that must be seen whole: a
//! hand-over retires a timekeeper, builds its successor and moves the
//! readers; a steering measures and corrects; the counter's facts are
//! written for `info`. Each of those runs under the steering lock. So the
//! design is the classic one of `malloc`: a `pthread_atfork` handler takes
//! the clock's locks before the fork (*prepare*), which waits for a step in
//! progress to end, and lets go of them on both sides after it. A child
//! never sees a step half done, and never inherits a lock held: it reads
//! correct time at once, is steered again, and `info` does not block.
//!
//! What the child does not inherit is the parent's other threads, and so
//! any writer lock of the engine that one of them held in a windup without
//! the steering lock: those are let go (a windup publishes before it
//! updates its own state, so a child sees it whole or not at all).
//!
//! The handlers are registered before `main` (an `.init_array` entry in
//! ELF, `__mod_init_func` in Mach-O), so that a fork while another thread starts the clock cannot leave
//! the child waiting on a start that no thread of it makes; the clock's
//! start registers them too, for a platform or a link without that entry. A
//! fork from a signal handler that interrupted this thread's own windup or
//! `getres` (both hold the steering lock) would wait for itself: the one
//! case this design does not cover.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::clock::HostClock;
use super::fork_points::point;
use super::life::Life;
use super::published::{READER, own_timekeeper, publish_first_reader_word};
use super::steer::Steering;

/// Whether the handlers are registered.
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Whether a thread is starting the process's clock: a fork waits for the
/// start to finish.
static STARTING: AtomicBool = AtomicBool::new(false);

/// How long a fork waits for another thread's start of the clock: a start
/// takes tens of microseconds; one that panicked never finishes.
const START_WAIT: Duration = Duration::from_secs(1);

/// Registers the fork handlers, once.
fn register() {
    if REGISTERED.swap(true, Ordering::AcqRel) {
        return;
    }
    // The handlers touch only this crate's statics.
    crate::os::on_fork(prepare, parent, child);
}

/// Whether the handlers were registered before `main` (for the test that
/// the linker kept the entry).
#[cfg(unix)]
static BEFORE_MAIN: AtomicBool = AtomicBool::new(false);

/// Registers the handlers before `main`, while the process has one thread:
/// the OS boundary calls it from the loader's initializers, where the OS
/// has `fork`.
#[cfg(unix)]
pub(crate) fn register_before_main() {
    BEFORE_MAIN.store(true, Ordering::Release);
    register();
}

/// The clock's locks (steering, life), held by the forking thread across
/// the fork. (The error bound is written under the steering lock.)
type Held = (MutexGuard<'static, Steering>, MutexGuard<'static, Life>);

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Before the fork: waits for a start in progress, then takes the clock's
/// locks (in the order the clock takes them: steering first), so that no
/// step of the clock's life is under way when the address space is copied.
extern "C" fn prepare() {
    let deadline = Instant::now() + START_WAIT;
    while STARTING.load(Ordering::Acquire) && CLOCK.get().is_none() && Instant::now() < deadline {
        std::thread::yield_now();
    }
    let Some(clock) = CLOCK.get() else {
        return;
    };
    let steering = clock.steering();
    let held = (steering, clock.life());
    HELD.with(|cell| *cell.borrow_mut() = Some(held));
    point("fork: the clock's locks held");
}

/// After the fork, in the parent: lets go of the locks.
extern "C" fn parent() {
    HELD.with(|cell| drop(cell.borrow_mut().take()));
}

/// After the fork, in the child: lets go of the locks (the child's only
/// thread holds them), and of the writer locks the parent's other threads
/// held.
extern "C" fn child() {
    HELD.with(|cell| drop(cell.borrow_mut().take()));
    super::page::forget_mapping_after_fork();
    match CLOCK.get() {
        Some(clock) => forget_writers(clock),
        // A start another thread had begun as the prepare handler looked
        // (or gave up waiting for) is not the child's: its first read
        // starts its own.
        None => STARTING.store(false, Ordering::Release),
    }
}

/// What a child does not inherit of `clock`: a writer in the engine (let
/// go: the thread that held it is not the child's).
fn forget_writers(clock: &HostClock) {
    // The readers' word and the stage agree (a hand-over moves both under
    // the steering lock, which the fork waited for); the stage is taken
    // from the word all the same, as readers use it.
    if let Some(readers) = own_timekeeper(READER.load(Ordering::Relaxed)) {
        if let Some(stage) = clock
            .stages
            .iter()
            .position(|stage| stage.get().is_some_and(|s| std::ptr::eq(s, readers)))
        {
            clock.stage.store(stage, Ordering::Relaxed);
        }
    }
    for timekeeper in clock.stages.iter().filter_map(OnceLock::get) {
        // SAFETY: this runs in the child before it returns from fork(), the
        // only thread it has: none is in a writer.
        unsafe { timekeeper.release_writer_after_fork() };
    }
}

/// Whether the handlers were registered before `main` (test access).
#[cfg(all(test, unix))]
pub(super) fn registered_before_main() -> bool {
    BEFORE_MAIN.load(Ordering::Acquire)
}

/// The clock, started at its first use; a start under way on another
/// thread is waited for. Not for reads, which may run in a signal handler
/// that interrupted this thread's own start: they use [`try_clock`].
pub(crate) fn clock() -> &'static HostClock {
    loop {
        if let Some(clock) = try_clock() {
            return clock;
        }
        std::thread::yield_now();
    }
}

/// The clock for a read: started, or started now by this thread, unless a
/// start is under way already: another thread's, or this thread's own,
/// interrupted by the signal handler the read runs in. Then `None`, and
/// the read asks the kernel's clock, which the clock starts on (see
/// `read::kernel_read`). Nothing here waits, and a start allocates
/// nothing: the first read may run in a signal handler.
#[inline]
pub(crate) fn try_clock() -> Option<&'static HostClock> {
    match CLOCK.get() {
        Some(clock) => Some(clock),
        None => start_clock(),
    }
}

/// The first use: registers the fork handlers (before `main` already, where
/// the platform allows), says a start is under way before it is (a fork
/// waits for it, and the start is this thread's alone), then starts the
/// clock, the one that publishes: the readers' word, and until when a
/// coarse read may trust the kernel's coarse clock.
#[cold]
#[inline(never)]
fn start_clock() -> Option<&'static HostClock> {
    register();
    if STARTING.swap(true, Ordering::AcqRel) {
        return CLOCK.get();
    }
    // A process that reads the keeper's page reads it whatever started the
    // clock (a coarse read, `info`): the clock built below is the one it
    // falls back to.
    super::page::read_at_start();
    point("start: building the clock");
    let clock = CLOCK.get_or_init(|| HostClock {
        publishes: true,
        ..HostClock::start()
    });
    publish_first_reader_word(clock.timekeeper());
    // Where another thread steers already, it publishes.
    if let Some(_steering) = clock.try_steering() {
        clock.publish_coarse_limit(&clock.bound.load());
    }
    Some(clock)
}

/// The process's clock, once started.
static CLOCK: OnceLock<HostClock> = OnceLock::new();
