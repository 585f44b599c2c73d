//! What the host clock publishes for its readers, in atomics a read loads:
//! the word that names the timekeeper in use and how to read its counter,
//! until when a coarse read may trust the kernel's coarse clock, and the
//! seconds that let `gettime` split nanoseconds without a division. The
//! clock's life writes them; the read API reads them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::coarse_limit::CoarseLimit;
use super::counter::HostCounter;
use super::page::layout::Page;
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
/// The readers' word's bit for the keeper's page (`page/`): the word is
/// then the page's address (page-aligned), this bit, and how to read the
/// TSC ([`HOW`]).
pub(super) const PAGE: usize = 0b100;
const _: () = assert!(PAGE & HOW == 0);

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

/// The readers' word for `timekeeper` at the clock's start, unless one is
/// published already (a failover moved the readers on, or the process reads
/// the keeper's page).
pub(super) fn publish_first_reader_word(timekeeper: &'static Timekeeper<HostCounter>) {
    let _ = READER.compare_exchange(
        NOT_STARTED,
        reader_word(timekeeper),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// The process's own timekeeper a readers' word names: `None` before the
/// clock starts, and while the process reads the keeper's page.
pub(super) fn own_timekeeper(word: usize) -> Option<&'static Timekeeper<HostCounter>> {
    (word & HOW != NOT_STARTED && word & PAGE == 0).then(|| reader_timekeeper(word))
}

/// The timekeeper a readers' word other than 0, and not the page's, names.
#[inline(always)]
pub(super) fn reader_timekeeper(word: usize) -> &'static Timekeeper<HostCounter> {
    debug_assert!(word & HOW != NOT_STARTED && word & PAGE == 0);
    // SAFETY: a word other than 0 is made by `reader_word` from a
    // `&'static` timekeeper of the process's clock (one of its stages,
    // inside the `CLOCK` static, never moved or dropped).
    unsafe { &*((word & !HOW) as *const Timekeeper<HostCounter>) }
}

/// The keeper's page a readers' word with [`PAGE`] names.
#[inline(always)]
pub(super) fn page_of(word: usize) -> &'static Page {
    debug_assert!(word & PAGE != 0);
    // SAFETY: a word with PAGE is made by the page's mapping (`page/`)
    // from a mapping of at least a `Page` that is never unmapped.
    unsafe { &*((word & !(HOW | PAGE)) as *const Page) }
}

/// The keeper's page the readers' word names now, if it names one.
pub(super) fn page_read() -> Option<&'static Page> {
    let word = READER.load(Ordering::Acquire);
    (word & PAGE != 0).then(|| page_of(word))
}

/// Until when coarse reads may take the kernel's coarse time less
/// [`COARSE_SLACK`](super::coarse_limit::COARSE_SLACK), and the floor of
/// those past it (`coarse_limit.rs`).
pub(super) static COARSE: CoarseLimit = CoarseLimit::new();

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
