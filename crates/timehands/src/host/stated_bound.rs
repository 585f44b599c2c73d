//! The error bound as readers load it: `getres` and the reads that stand at
//! their hands' promise need it anywhere, a signal handler included, where
//! a lock could be held by the very thread the handler interrupted.
//!
//! One writer at a time (the holder of the steering lock, or the clock's
//! builder before anyone else can see it) writes the copy readers do not
//! use, then points them at it. Each copy has a version, odd while it is
//! written: a reader loads the pointer, the copy's version, the copy and the
//! version again, and keeps what it read if the version was even and did
//! not change, and the pointer did not move meanwhile (so that no load
//! returns a bound older than one before it). A handler that interrupts
//! the writer is pointed at the copy
//! the writer is not writing, so it never retries: no reader waits for a
//! writer, and only one that a write overtook (in another thread) reads
//! again. The `loom` model below checks every interleaving.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};

use super::steer::Bound;

/// One copy of a [`Bound`], in atomics, with its version.
struct Copy {
    version: AtomicU64,
    ns: AtomicU64,
    ppb: AtomicU64,
    since: AtomicU64,
}

/// A [`Bound`] that one writer stores and any thread loads without a lock.
pub(super) struct StatedBound {
    copies: [Copy; 2],
    /// The copy readers use.
    current: AtomicUsize,
}

impl StatedBound {
    /// `bound`, stated from the start.
    pub(super) fn new(bound: Bound) -> StatedBound {
        let copy = || Copy {
            version: AtomicU64::new(0),
            ns: AtomicU64::new(bound.ns),
            ppb: AtomicU64::new(bound.ppb),
            since: AtomicU64::new(bound.since),
        };
        StatedBound {
            copies: [copy(), copy()],
            current: AtomicUsize::new(0),
        }
    }

    /// The bound as last stored.
    pub(super) fn load(&self) -> Bound {
        loop {
            let current = self.current.load(Ordering::Acquire);
            let copy = &self.copies[current];
            let version = copy.version.load(Ordering::Acquire);
            let bound = Bound {
                ns: copy.ns.load(Ordering::Relaxed),
                ppb: copy.ppb.load(Ordering::Relaxed),
                since: copy.since.load(Ordering::Relaxed),
            };
            // The copy's loads before the version's second load: a writer
            // that began to rewrite the copy meanwhile made it odd first.
            fence(Ordering::Acquire);
            // And still the copy readers are pointed at: a copy rewritten
            // since the pointer was loaded may hold a bound newer than the
            // one the pointer names next, and loads never go back.
            if version % 2 == 0
                && copy.version.load(Ordering::Relaxed) == version
                && self.current.load(Ordering::Relaxed) == current
            {
                return bound;
            }
            // Overtaken by a write: read again (the model checker is told,
            // as it takes a loop that reads again for a spin).
            #[cfg(loom)]
            loom::thread::yield_now();
        }
    }

    /// Stores `bound`. The caller holds the steering lock (or is the only
    /// thread that can see this clock): one writer at a time.
    pub(super) fn store(&self, bound: Bound) {
        let next = 1 - self.current.load(Ordering::Relaxed);
        let copy = &self.copies[next];
        let version = copy.version.load(Ordering::Relaxed);
        copy.version.store(version + 1, Ordering::Relaxed);
        // Odd before any of the copy's stores can be seen.
        fence(Ordering::Release);
        copy.ns.store(bound.ns, Ordering::Relaxed);
        copy.ppb.store(bound.ppb, Ordering::Relaxed);
        copy.since.store(bound.since, Ordering::Relaxed);
        // Even again after them, and the copy named after that.
        copy.version.store(version + 2, Ordering::Release);
        self.current.store(next, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn bound(n: u64) -> Bound {
        Bound {
            ns: n,
            ppb: n * 3,
            since: n * 7,
        }
    }

    /// Each load is one bound stored whole, never a mix of two, while a
    /// writer stores bounds as fast as it can.
    #[test]
    fn loads_see_whole_bounds_while_one_writer_stores() {
        let stated = StatedBound::new(bound(0));
        let writes = if cfg!(miri) { 200 } else { 200_000 };
        std::thread::scope(|s| {
            s.spawn(|| {
                for n in 1..=writes {
                    stated.store(bound(n));
                }
            });
            let mut last = 0;
            while last < writes {
                let b = stated.load();
                assert_eq!(b, bound(b.ns), "a torn bound");
                assert!(b.ns >= last, "a bound older than one loaded before");
                last = b.ns;
            }
        });
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two loads while one writer stores three bounds: each load is a bound
    /// stored whole, and the second is never older than the first.
    #[test]
    fn loom_loads_are_whole_and_never_go_back() {
        loom::model(|| {
            let stated = loom::sync::Arc::new(StatedBound::new(Bound {
                ns: 0,
                ppb: 0,
                since: 0,
            }));
            let writer = {
                let stated = stated.clone();
                loom::thread::spawn(move || {
                    for n in 1..=3 {
                        stated.store(Bound {
                            ns: n,
                            ppb: n,
                            since: n,
                        });
                    }
                })
            };
            let first = stated.load();
            let second = stated.load();
            for b in [first, second] {
                assert_eq!((b.ppb, b.since), (b.ns, b.ns), "a torn bound");
            }
            assert!(second.ns >= first.ns, "{second:?} after {first:?}");
            writer.join().expect("the writer");
        });
    }
}
