//! The named points of the clock's life where the crate's own tests fork
//! (`process_tests.rs` pauses the clock's thread at one and forks there),
//! or deliver a signal whose handler reads every clock
//! (`process_tests/signals.rs`): nothing outside those tests. The pause
//! and the signal live here, below the clock they interrupt, so that the
//! tests import them and they import nothing of the tests'.

/// A point in the clock's life, `name`d for the tests that fork or signal
/// there.
#[inline(always)]
pub(super) fn point(_name: &'static str) {
    #[cfg(all(test, unix))]
    {
        pause::at(_name);
        signal::at(_name);
    }
}

/// The signal at a point: the thread that reaches it raises it on itself,
/// so that the handler runs right there, on top of that step half done.
#[cfg(all(test, unix))]
pub(super) mod signal {
    use std::sync::OnceLock;

    /// The point at which the signal is raised, each time a thread reaches it.
    pub(in crate::host) const SIGNAL_AT: &str = "TIMEHANDS_TEST_SIGNAL_AT";

    /// The signal raised.
    pub(in crate::host) const SIGNAL: libc::c_int = libc::SIGUSR1;

    /// At the point `name`: raises [`SIGNAL`] on this thread if the test
    /// names this point. `raise` returns once the handler has.
    pub(super) fn at(name: &'static str) {
        static AT: OnceLock<Option<String>> = OnceLock::new();
        if AT.get_or_init(|| std::env::var(SIGNAL_AT).ok()).as_deref() == Some(name) {
            // SAFETY: raise(3) delivers a signal the test installed a
            // handler for to this thread.
            unsafe { libc::raise(SIGNAL) };
        }
    }
}

/// The pause at a fork point, and the flags the forking test and the
/// paused thread meet on.
#[cfg(all(test, unix))]
pub(super) mod pause {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    /// The fork point the child half pauses the clock's own threads at.
    pub(in crate::host) const PAUSE_AT: &str = "TIMEHANDS_TEST_PAUSE_AT";

    /// A thread of the clock's stands at the point.
    pub(in crate::host) static PAUSED: AtomicBool = AtomicBool::new(false);
    /// The test is about to fork.
    pub(in crate::host) static FORKING: AtomicBool = AtomicBool::new(false);
    /// The fork has returned.
    pub(in crate::host) static FORKED: AtomicBool = AtomicBool::new(false);

    thread_local! {
        /// Whether this thread is the one that forks (it is never paused).
        pub(in crate::host) static FORKER: std::cell::Cell<bool> =
            const { std::cell::Cell::new(false) };
    }

    /// At the point `name`, on a thread of the clock's (not the forking
    /// one), the first time: waits until the test forks, and then until the
    /// fork has returned or 20 ms have passed. A fork that lands here copies
    /// this step half done; one that waits for it (the design) proceeds
    /// after the 20 ms.
    pub(super) fn at(name: &'static str) {
        static AT: OnceLock<Option<String>> = OnceLock::new();
        let at = AT.get_or_init(|| std::env::var(PAUSE_AT).ok());
        if at.as_deref() != Some(name)
            || FORKER.with(|f| f.get())
            || PAUSED.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let limit = Instant::now() + Duration::from_secs(3);
        while !FORKING.load(Ordering::Acquire) && Instant::now() < limit {
            std::thread::yield_now();
        }
        let limit = Instant::now() + Duration::from_millis(20);
        while !FORKED.load(Ordering::Acquire) && Instant::now() < limit {
            std::thread::yield_now();
        }
    }
}
