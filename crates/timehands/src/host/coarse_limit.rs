//! The coarse clocks' protocol: until when a coarse read may take the
//! kernel's coarse time less [`COARSE_SLACK`] (one load and a compare after
//! the kernel's call), and what a read past that hands out, so that no
//! coarse read is ever earlier than one before it.
//!
//! The clock publishes a limit (the kernel time up to which the stated
//! bound stays within the slack, and the clock was wound up lately). A read
//! whose kernel coarse time `k` is below it returns `k` less the slack: it
//! writes nothing. A read past it takes the long way: what the kernel's
//! coarse time vouches for less the bound, or less the slack where that is
//! more (never later than a common read after it), and no earlier than the
//! floor, which it raises. The common way leaves no trace, so a limit
//! brought forward must leave the floor where the common way may have got
//! to: the publisher swaps the limit first (a common read after the swap
//! sees the new one), then reads the kernel's coarse clock (no earlier than
//! what a common read before the swap read), and raises the floor to that,
//! capped by the old limit, less the slack. The `loom` model below checks
//! that two reads in a row, and reads on two threads one after the other,
//! never go back, whatever the interleaving with a publisher.

#[cfg(loom)]
use loom::sync::atomic::AtomicU64 as LoomU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::steer::Bound;

/// How far behind the kernel's coarse clock a coarse read is: more than the
/// error bound in the common case (some hundred ns), so that the kernel's
/// coarse time less this is never ahead of a `now()` read after it (see
/// `read::coarse_nanos`), at the cost of some µs of lag beside the kernel's
/// milliseconds.
pub(crate) const COARSE_SLACK: Duration = Duration::from_micros(50);

/// The kernel time until which a coarse read may take the kernel's coarse
/// time less [`COARSE_SLACK`]: where `bound` stays within the slack, less
/// the two ns of rounding (see [`HostClock::vouched`](super::clock::HostClock)),
/// and less the slack again, as our uptime (the bound's time) may stand
/// apart from the kernel's by the bound.
pub(super) fn coarse_slack_until(bound: &Bound) -> u64 {
    let slack = COARSE_SLACK.as_nanos() as u64;
    let Some(room) = (slack - 2).checked_sub(bound.ns) else {
        return 0;
    };
    let lasts = match bound.ppb {
        0 => u64::MAX,
        ppb => (room as u128 * 1_000_000_000 / ppb as u128).min(u64::MAX as u128) as u64,
    };
    bound.since.saturating_add(lasts).saturating_sub(slack)
}

/// The slack in ns.
const SLACK: u64 = COARSE_SLACK.as_nanos() as u64;

/// What the protocol needs of an atomic word: std's, or loom's in the model.
pub(super) trait Word {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
    fn swap(&self, value: u64, order: Ordering) -> u64;
    fn fetch_max(&self, value: u64, order: Ordering) -> u64;
    /// A fence of the atomics' own kind.
    fn fence(order: Ordering);
}

impl Word for AtomicU64 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn store(&self, value: u64, order: Ordering) {
        AtomicU64::store(self, value, order)
    }
    fn swap(&self, value: u64, order: Ordering) -> u64 {
        AtomicU64::swap(self, value, order)
    }
    fn fetch_max(&self, value: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_max(self, value, order)
    }
    fn fence(order: Ordering) {
        std::sync::atomic::fence(order)
    }
}

#[cfg(loom)]
impl Word for LoomU64 {
    fn load(&self, order: Ordering) -> u64 {
        LoomU64::load(self, order)
    }
    fn store(&self, value: u64, order: Ordering) {
        LoomU64::store(self, value, order)
    }
    fn swap(&self, value: u64, order: Ordering) -> u64 {
        LoomU64::swap(self, value, order)
    }
    fn fetch_max(&self, value: u64, order: Ordering) -> u64 {
        LoomU64::fetch_max(self, value, order)
    }
    fn fence(order: Ordering) {
        loom::sync::atomic::fence(order)
    }
}

/// The limit on Monotonic and on Realtime, and the long way's floor.
pub(super) struct CoarseLimit<A = AtomicU64> {
    /// The kernel's Monotonic time, in ns, up to which a coarse read may
    /// take its coarse time less the slack. 0 until the clock starts.
    until: A,
    /// The same on the kernel's Realtime: moved by our Realtime offset as
    /// last published, so that a step forward the clock has not followed yet
    /// puts the kernel's coarse Realtime past it.
    realtime_until: A,
    /// The largest coarse time handed out the long way, or that the common
    /// way may have reached before the limit was last brought forward.
    floor: A,
}

impl CoarseLimit {
    /// No limit yet: every read goes the long way until the clock starts.
    pub(super) const fn new() -> CoarseLimit {
        CoarseLimit {
            until: AtomicU64::new(0),
            realtime_until: AtomicU64::new(0),
            floor: AtomicU64::new(0),
        }
    }
}

impl<A: Word> CoarseLimit<A> {
    /// Whether a coarse read at the kernel's coarse Monotonic time `kernel`
    /// (ns) may take it less the slack (and then no underflow: the limit is
    /// published with the slack taken off).
    #[inline(always)]
    pub(super) fn trusts(&self, kernel: u64) -> bool {
        kernel < self.until.load(Ordering::Acquire)
    }

    /// [`trusts`](CoarseLimit::trusts) for the kernel's coarse Realtime.
    #[inline(always)]
    pub(super) fn trusts_realtime(&self, kernel: u64) -> bool {
        kernel < self.realtime_until.load(Ordering::Acquire)
    }

    /// The long way's answer at the kernel's coarse time `kernel`, where
    /// `vouched` is what it vouches for less the bound: that or the kernel's
    /// less the slack, whichever is earlier, and never below the floor,
    /// which it raises.
    pub(super) fn hand_out(&self, kernel: u64, vouched: u64) -> u64 {
        let ns = vouched.min(kernel.saturating_sub(SLACK));
        ns.max(self.floor.fetch_max(ns, Ordering::AcqRel))
    }

    /// Publishes `limit` (and on Realtime, moved by `realtime_offset`, ns):
    /// where it is earlier than the one before, only once the floor is where
    /// the common way may have got to, from `kernel_coarse`, the kernel's
    /// coarse time read after the swap (see the module docs). By one writer
    /// at a time (the steering lock's holder).
    pub(super) fn publish(
        &self,
        limit: u64,
        realtime_offset: i64,
        kernel_coarse: impl FnOnce() -> u64,
    ) {
        // Realtime's first: a coarse Realtime read past it takes the coarse
        // Monotonic time, whose limit it then meets.
        self.realtime_until.store(
            limit.saturating_add_signed(realtime_offset),
            Ordering::SeqCst,
        );
        let was = self.until.swap(limit, Ordering::SeqCst);
        if limit < was {
            // A common read that loaded the limit before the swap read the
            // kernel's coarse clock before that: no later than it reads now.
            A::fence(Ordering::SeqCst);
            let reached = kernel_coarse().min(was).saturating_sub(SLACK);
            self.floor.fetch_max(reached, Ordering::AcqRel);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The kernel's coarse time may be trusted until the bound reaches the
    /// slack (less the two ns of rounding and the slack again); never where
    /// it is past it already, and for good where it does not grow.
    #[test]
    fn coarse_time_is_trusted_until_the_bound_reaches_the_slack() {
        let slack = COARSE_SLACK.as_nanos() as u64;
        let bound = |ns, ppb| Bound {
            ns,
            ppb,
            since: 10_000_000_000,
        };
        // 1 000 ns at 1 000 ppb reaches the slack less 2 ns 48 998 µs on.
        assert_eq!(
            coarse_slack_until(&bound(1_000, 1_000)),
            10_000_000_000 + (slack - 2 - 1_000) * 1_000_000 - slack
        );
        assert_eq!(coarse_slack_until(&bound(slack, 1_000)), 0);
        assert_eq!(coarse_slack_until(&bound(slack - 1, 1_000)), 0);
        assert_eq!(coarse_slack_until(&bound(100, 0)), u64::MAX - slack);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A coarse read as `read.rs` makes it, at the kernel's coarse time
    /// `kernel`, with the bound the clock states `bound` (the long way's
    /// vouched time is `kernel` less it).
    fn read(limit: &CoarseLimit<LoomU64>, kernel: u64, bound: u64) -> u64 {
        if limit.trusts(kernel) {
            kernel - SLACK
        } else {
            limit.hand_out(kernel, kernel.saturating_sub(bound))
        }
    }

    /// The kernel's coarse clock moves on (a tick) while a publisher brings
    /// the limit forward (the bound grew past the slack) and later back; a
    /// thread reads twice, another once after it: no read is earlier than
    /// one that happened before it.
    #[test]
    fn loom_coarse_reads_never_go_back() {
        loom::model(|| {
            const TICK: u64 = 4_000_000;
            let limit = Arc::new(CoarseLimit {
                until: LoomU64::new(10 * TICK),
                realtime_until: LoomU64::new(0),
                floor: LoomU64::new(0),
            });
            // The kernel's coarse time, and the bound the clock states.
            let kernel = Arc::new(LoomU64::new(TICK));
            let bound = Arc::new(LoomU64::new(100));
            let publisher = {
                let (limit, kernel, bound) = (limit.clone(), kernel.clone(), bound.clone());
                loom::thread::spawn(move || {
                    kernel.store(2 * TICK, Ordering::SeqCst);
                    // A bound past the slack: the limit comes forward to 0
                    // before the bound is stated, as `state_bound` does.
                    limit.publish(0, 0, || kernel.load(Ordering::SeqCst));
                    bound.store(2 * SLACK, Ordering::SeqCst);
                    // Measured again: back to a bound within the slack.
                    bound.store(100, Ordering::SeqCst);
                    limit.publish(10 * TICK, 0, || kernel.load(Ordering::SeqCst));
                })
            };
            let done = Arc::new(LoomU64::new(0));
            let first = {
                let (limit, kernel, bound, done) =
                    (limit.clone(), kernel.clone(), bound.clone(), done.clone());
                loom::thread::spawn(move || {
                    let a = read(
                        &limit,
                        kernel.load(Ordering::SeqCst),
                        bound.load(Ordering::SeqCst),
                    );
                    let b = read(
                        &limit,
                        kernel.load(Ordering::SeqCst),
                        bound.load(Ordering::SeqCst),
                    );
                    assert!(b >= a, "{b} after {a}");
                    done.store(b + 1, Ordering::Release);
                })
            };
            let seen = done.load(Ordering::Acquire);
            let c = read(
                &limit,
                kernel.load(Ordering::SeqCst),
                bound.load(Ordering::SeqCst),
            );
            if seen > 0 {
                assert!(c + 1 >= seen, "{c} after {}", seen - 1);
            }
            first.join().expect("the reader");
            publisher.join().expect("the publisher");
        });
    }
}
