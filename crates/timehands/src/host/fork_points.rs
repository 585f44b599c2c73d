//! The named points of the clock's life where the crate's own tests fork
//! (`process_tests.rs` pauses the clock's thread at one and forks there):
//! nothing outside those tests. The pause lives here, below the clock it
//! pauses, so that the tests import it and it imports nothing of theirs.

/// A point in the clock's life, `name`d for the tests that fork there.
#[inline(always)]
pub(super) fn point(_name: &'static str) {
    #[cfg(all(test, unix))]
    pause::at(_name);
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
