//! What the host clock publishes for its readers, in atomics a read loads:
//! the word that names the timekeeper in use and how to read its counter,
//! the coarse time ready at each windup, and the seconds that let `gettime`
//! split nanoseconds without a division. The clock's life writes them; the
//! read API reads them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use super::counter::HostCounter;
use crate::Timekeeper;
#[cfg(target_arch = "x86_64")]
use crate::hw;

/// The process's clock as readers find it, in one word: the address of the
/// timekeeper in use (one of its [`STAGES`](super::clock::STAGES)),
/// and in the low bits (the timekeeper is 64-byte aligned) how to read its
/// counter, decided once, so that a read neither tests whether the clock has
/// started nor matches on the kind of counter. 0 until the clock starts.
pub(super) static READER: AtomicUsize = AtomicUsize::new(0);
/// The low bits of [`READER`]: how the counter is read.
pub(super) const HOW: usize = 0b11;
/// Not started: the first read starts the clock.
pub(super) const NOT_STARTED: usize = 0;
/// Through [`HostCounter`]'s own read (the kernel's clock, CNTVCT_EL0).
pub(super) const COUNTER_READ: usize = 1;
/// The TSC, with `rdtscp`.
#[cfg(target_arch = "x86_64")]
pub(super) const RDTSCP: usize = 2;
/// The TSC, with `lfence; rdtsc`.
#[cfg(target_arch = "x86_64")]
pub(super) const LFENCE_RDTSC: usize = 3;
const _: () = assert!(std::mem::align_of::<Timekeeper<HostCounter>>() > HOW);

/// The readers' word for `engine`, a timekeeper of the process's clock.
pub(super) fn reader_word(timekeeper: &'static Timekeeper<HostCounter>) -> usize {
    let how = match timekeeper.counter() {
        #[cfg(target_arch = "x86_64")]
        HostCounter::Tsc(tsc) => match tsc.ordered_read() {
            hw::OrderedRead::Rdtscp => RDTSCP,
            hw::OrderedRead::LfenceRdtsc => LFENCE_RDTSC,
        },
        _ => COUNTER_READ,
    };
    std::ptr::from_ref(timekeeper) as usize | how
}

/// The timekeeper a readers' word other than 0 names.
#[inline(always)]
pub(super) fn reader_timekeeper(word: usize) -> &'static Timekeeper<HostCounter> {
    debug_assert!(word & HOW != NOT_STARTED);
    // SAFETY: a word other than 0 is made by `reader_word` from a
    // `&'static` timekeeper of the process's clock (one of its stages,
    // inside the `CLOCK` static, never moved or dropped).
    unsafe { &*((word & !HOW) as *const Timekeeper<HostCounter>) }
}

/// [`now_coarse`](crate::now_coarse)'s value: the clock's coarse uptime in
/// nanoseconds, kept ready by the upkeep thread while it ticks, so that a
/// coarse read is one load and one test: a word above 0 as an `i64` is the
/// time. 0 before the thread first ticks; [`NOT_KEPT`] set while it does
/// not (taken away, a `fork()`ed child), below which stands the largest
/// coarse time handed out so far. Every change is a maximum of that floor,
/// so that no coarse read is ever below one that happened before it.
pub(super) static COARSE_NANOS: AtomicU64 = AtomicU64::new(0);

/// How often the thread winds up while coarse clocks are read: the
/// kernel's tick at 250 Hz, so that our coarse clocks are as fresh as its.
pub(crate) const COARSE_TICK: Duration = Duration::from_millis(4);
/// How far behind the kernel's coarse clock a coarse read that checks it
/// lets ours be (see `read::checked_coarse_nanos`): more than the error
/// bound in the common case (some hundred ns), so that a coarse time
/// vouched for as the kernel's less the bound stays fresh until the
/// kernel's next tick.
pub(crate) const COARSE_SLACK: Duration = Duration::from_micros(50);

/// The bit of [`COARSE_NANOS`] that says the coarse time is not kept.
const NOT_KEPT: u64 = 1 << 63;

/// The coarse time, if the thread keeps it.
#[inline(always)]
pub(super) fn kept_coarse_nanos() -> Option<u64> {
    let word = COARSE_NANOS.load(Ordering::Acquire);
    (word as i64 > 0).then_some(word)
}

/// The largest coarse time kept or handed out so far, kept or not.
#[inline(always)]
pub(super) fn coarse_floor() -> u64 {
    COARSE_NANOS.load(Ordering::Acquire) & !NOT_KEPT
}

/// The upkeep thread keeps `ns` as the coarse time (or what was handed out,
/// if later).
pub(super) fn keep_coarse_nanos(ns: u64) {
    let _ = COARSE_NANOS.fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
        Some(ns.max(word & !NOT_KEPT) & !NOT_KEPT)
    });
}

/// The coarse time is no longer kept: the next coarse read goes the long
/// way. What was handed out stays the floor.
pub(super) fn take_coarse_nanos_away() {
    COARSE_NANOS.fetch_or(NOT_KEPT, Ordering::Release);
}

/// A read that went the long way hands out `ns`, or the floor if later:
/// what it returns, and the floor from then on (kept or not, as it was).
pub(super) fn hand_out_coarse_nanos(ns: u64) -> u64 {
    let before = COARSE_NANOS
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
            let kept = word as i64 > 0;
            let floor = ns.max(word & !NOT_KEPT) & !NOT_KEPT;
            Some(if kept { floor } else { floor | NOT_KEPT })
        })
        .unwrap_or_else(|word| word);
    ns.max(before & !NOT_KEPT)
}

/// The coarse Realtime, ready to hand out: whole seconds in the high 34
/// bits (to the year 2514), nanoseconds in the low [`NANOS_BITS`], so that
/// `gettime(RealtimeCoarse)` is one load and no division. Stored by the
/// upkeep thread alone, so that stores come in order (Realtime may step
/// back, and no maximum could keep it); 0 while it does not keep it.
pub(super) static REALTIME_COARSE: AtomicU64 = AtomicU64::new(0);
/// The bits of [`REALTIME_COARSE`] that hold nanoseconds.
pub(super) const NANOS_BITS: u32 = 30;

/// `ns` nanoseconds as a [`REALTIME_COARSE`] word.
pub(super) fn realtime_coarse_word(ns: u64) -> u64 {
    let seconds = (ns / 1_000_000_000).min((1 << (64 - NANOS_BITS)) - 1);
    (seconds << NANOS_BITS) | (ns % 1_000_000_000)
}

/// The latest Monotonic time a standing read vouched for (see
/// `read::stand_in`), in ns: no standing read returns less, so that time
/// handed out past a hands' promise never goes back across threads.
pub(super) static STAND_IN_FLOOR: AtomicU64 = AtomicU64::new(0);

/// Whole seconds of a recent read of CLOCK_MONOTONIC and of CLOCK_REALTIME,
/// refreshed at windups: hints that let [`gettime`](crate::gettime) split nanoseconds into
/// seconds with a subtraction rather than a division. Any value is correct
/// (a wrong one only sends the split the long way); each is at most
/// `u64::MAX / 10^9`, so that its nanoseconds fit a `u64`.
pub(super) static SECOND_HINTS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

#[cfg(test)]
mod tests {
    use super::*;

    /// The coarse Realtime word holds seconds and nanoseconds apart, and
    /// saturates at its last second rather than wrapping.
    #[test]
    fn the_coarse_realtime_word_splits_exactly() {
        let ns = 1_795_435_200_123_456_789;
        let word = realtime_coarse_word(ns);
        assert_eq!(word >> NANOS_BITS, 1_795_435_200);
        assert_eq!(word & ((1 << NANOS_BITS) - 1), 123_456_789);
        let last = realtime_coarse_word(u64::MAX);
        assert_eq!(last >> NANOS_BITS, (1 << (64 - NANOS_BITS)) - 1);
    }
}
