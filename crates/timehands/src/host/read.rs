//! The read API: `now()` and its kin, `gettime` and the clock ids, and the
//! one word a read loads to find the clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::clock::HostClock;
use super::coarse_limit::COARSE_SLACK;
use super::counter::HostCounter;
use super::page;
use super::process::{clock, try_clock};
use super::published::{
    COARSE, COUNTER_READ, HOW, NOT_STARTED, PAGE, READER, SECOND_HINTS, STAND_IN_FLOOR,
    own_timekeeper, publish_first_reader_word, reader_timekeeper, reader_word,
};
#[cfg(target_arch = "x86_64")]
use super::published::{LFENCE_RDTSC, RDTSCP};
use crate::engine::Due;
use crate::engine::nanos::realtime_nanos;
use crate::host::instant::Instant;
use crate::host::kernel_clocks::{KernelClock, KernelClocks, SystemClocks};
#[cfg(target_arch = "x86_64")]
use crate::hw;
use crate::{Counter, Timekeeper};

/// Nanoseconds on CLOCK_MONOTONIC (with `REALTIME`, on CLOCK_REALTIME) from
/// an ordered counter read (or, without `ORDERED`, an unordered one), winding
/// the clock up when the read finds it due.
#[inline(always)]
pub(super) fn read_nanos<const REALTIME: bool, const ORDERED: bool>() -> u64 {
    read_nanos_and_tsc::<REALTIME, ORDERED>().0
}

/// [`read_nanos`], and the TSC's value it was read at where the clock read
/// the TSC by an instruction and took its common way (`None` otherwise).
#[inline(always)]
fn read_nanos_and_tsc<const REALTIME: bool, const ORDERED: bool>() -> (u64, Option<u64>) {
    match read_nanos_fast_at_tsc::<REALTIME, ORDERED, true>() {
        Ok(read) => read,
        Err(LongWay::Own(timekeeper, count)) => (
            read_nanos_slow::<REALTIME, ORDERED>(timekeeper, count),
            None,
        ),
        Err(LongWay::Page(word, count)) => (read_page_slow::<REALTIME>(word, count), None),
        Err(LongWay::NotStarted) => (start_and_read::<REALTIME, ORDERED>(), None),
    }
}

/// What a read that the common case does not cover passes on.
pub(super) enum LongWay {
    /// The clock has not started (or, without a counter call, runs on a
    /// counter read by a call).
    NotStarted,
    /// The process's own timekeeper, and the counter reading.
    Own(&'static Timekeeper<HostCounter>, u64),
    /// The keeper's page, as its readers' word names it, and the counter
    /// reading.
    Page(usize, u64),
}

/// The common case of [`read_nanos`], once the clock runs: one load of the
/// readers' word, the counter read it names, and the engine's segment of the
/// current hands (see [`Timekeeper::nanos_at`]). It never waits, winds up or
/// panics. Without `COUNTER_CALL` it calls nothing at all: a counter read by
/// a call (the kernel's clock) goes the long way, so that a caller that
/// needs no registers saved around a call saves none.
#[inline(always)]
pub(super) fn read_nanos_fast<
    const REALTIME: bool,
    const ORDERED: bool,
    const COUNTER_CALL: bool,
>() -> Result<u64, LongWay> {
    read_nanos_fast_at_tsc::<REALTIME, ORDERED, COUNTER_CALL>().map(|(ns, _)| ns)
}

/// [`read_nanos_fast`], with the TSC's value it read, where the readers'
/// word names a read of the TSC by an instruction (`None` for any other
/// counter).
#[inline(always)]
fn read_nanos_fast_at_tsc<const REALTIME: bool, const ORDERED: bool, const COUNTER_CALL: bool>()
-> Result<(u64, Option<u64>), LongWay> {
    let word = READER.load(Ordering::Acquire);
    let how = word & HOW;
    if how == NOT_STARTED || (!COUNTER_CALL && how == COUNTER_READ) {
        return Err(LongWay::NotStarted);
    }
    let count = match how {
        #[cfg(target_arch = "x86_64")]
        RDTSCP | LFENCE_RDTSC if !ORDERED => hw::rdtsc(),
        // SAFETY: the word says RDTSCP only for a TSC read with rdtscp,
        // which its constructor (or the page's mapping) found the CPU has.
        #[cfg(target_arch = "x86_64")]
        RDTSCP => unsafe { hw::read_tsc_ordered(hw::OrderedRead::Rdtscp) },
        // SAFETY: `lfence; rdtsc` runs on every x86_64 CPU.
        #[cfg(target_arch = "x86_64")]
        LFENCE_RDTSC => unsafe { hw::read_tsc_ordered(hw::OrderedRead::LfenceRdtsc) },
        _ => sample::<ORDERED>(reader_timekeeper(word).counter()),
    };
    let tsc = match how {
        #[cfg(target_arch = "x86_64")]
        RDTSCP | LFENCE_RDTSC => Some(count),
        _ => None,
    };
    if word & PAGE != 0 {
        return page::page_of(word)
            .nanos_at::<REALTIME>(count)
            .map(|ns| (ns, tsc))
            .ok_or(LongWay::Page(word, count));
    }
    let timekeeper = reader_timekeeper(word);
    timekeeper
        .nanos_at::<REALTIME>(count)
        .map(|ns| (ns, tsc))
        .ok_or(LongWay::Own(timekeeper, count))
}

/// The counter's read, ordered or not.
#[inline(always)]
pub(super) fn sample<const ORDERED: bool>(counter: &HostCounter) -> u64 {
    if ORDERED {
        counter.read()
    } else {
        counter.read_unordered()
    }
}

/// A read at `count` that the current hands' first segment does not cover:
/// the engine's long way (re-reading the counter through [`HostCounter`],
/// the same counter), and the windup it may find due.
#[cold]
#[inline(never)]
pub(super) fn read_nanos_slow<const REALTIME: bool, const ORDERED: bool>(
    timekeeper: &Timekeeper<HostCounter>,
    count: u64,
) -> u64 {
    let (ns, due) = timekeeper.nanos_and_due_slow::<REALTIME>(count, sample::<ORDERED>);
    match due {
        Due::No => ns,
        Due::Yes => {
            clock().windup_from_reader();
            // Realtime from the windup's offsets: a `settimeofday` shows in
            // the read that found the windup due, however rare reads are.
            if REALTIME {
                read_nanos_fast::<REALTIME, ORDERED, true>().unwrap_or(ns)
            } else {
                ns
            }
        }
        Due::Standing => read_after_windup::<REALTIME, ORDERED>(),
    }
}

/// A read of the keeper's page that its newest hands' first segment does
/// not cover (see [`page::read_slow`]), and the move to the process's own
/// clock where the page is to be left.
#[cold]
#[inline(never)]
fn read_page_slow<const REALTIME: bool>(word: usize, count: u64) -> u64 {
    let (ns, leave) = page::read_slow::<REALTIME>(word, count);
    if let Some(handed_out) = leave {
        leave_page(word, handed_out);
    }
    ns
}

/// Moves the readers from the page of `word` to the process's own clock,
/// once that clock is past `handed_out` (the latest time a read of the
/// page could have given) with a bound within the slack: until then the
/// page's stale reads go on.
fn leave_page(word: usize, handed_out: u64) {
    let Some(clock) = try_clock() else {
        return;
    };
    // Nothing read it while the page served (a coarse read or `info` may
    // have started it): its hands stand at their promise until a windup.
    clock.windup();
    // Under the steering lock, as every move of the readers is: no
    // hand-over retires the timekeeper between the look and the move.
    let Some(_steering) = clock.try_steering() else {
        return;
    };
    let timekeeper = clock.timekeeper();
    if timekeeper.uptime_nanos() < handed_out || clock.stated_bound() > page::slack_ns() {
        return;
    }
    super::fork_points::point("page: leaving, readers not moved");
    if READER
        .compare_exchange(
            word,
            reader_word(timekeeper),
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
    {
        page::left();
    }
}

/// A read that stood: at its hands' promise (no windup for two intervals,
/// so the counter may have run through a suspend that CLOCK_MONOTONIC did
/// not count, see [`Timekeeper::windup_following`]), or at their base, the
/// counter gone back more than an interval: retired at once by the first
/// such read outside a signal handler ([`HostClock::counter_went_back`]).
/// It winds up once, which never waits: a windup that another thread
/// holds, or that this thread's own code was in when a signal handler
/// interrupted it, is that thread's to finish. A read that stands still
/// after it returns the time it can vouch for without a windup
/// ([`stand_in`]). (It used to wait for the other thread's windup, up to
/// 20 ms: a handler that interrupted its own thread's windup waited for
/// itself, and at a high rate of signals the windup never resumed.)
#[cold]
#[inline(never)]
pub(super) fn read_after_windup<const REALTIME: bool, const ORDERED: bool>() -> u64 {
    let clock = clock();
    clock.standing_reads.fetch_add(1, Ordering::Relaxed);
    clock.windup_from_reader();
    let timekeeper = reader_timekeeper(READER.load(Ordering::Acquire));
    let count = sample::<ORDERED>(timekeeper.counter());
    if let Some(ns) = timekeeper.nanos_at::<REALTIME>(count) {
        return ns;
    }
    let (ns, due) = timekeeper.nanos_and_due_slow::<REALTIME>(count, sample::<ORDERED>);
    if due != Due::Standing {
        return ns;
    }
    if let Some(counts) = timekeeper.went_back() {
        clock.counter_went_back(counts);
    }
    // Monotonic first, then Realtime from it with the offset of the same
    // hands (a hands published meanwhile has its own).
    let (monotonic, _) = timekeeper.nanos_and_due_slow::<false>(count, sample::<ORDERED>);
    let monotonic = stand_in(clock, monotonic);
    if REALTIME {
        realtime_nanos(monotonic, timekeeper.boottime())
    } else {
        monotonic
    }
}

/// The Monotonic time a standing read (see [`read_after_windup`]), where it
/// reads `stood`, can vouch for without a windup: CLOCK_MONOTONIC less the bound
/// `getres` states, if that is later than the time it stood at, and never
/// earlier than any such time handed out before ([`STAND_IN_FLOOR`]). So a
/// read whose windup is held up elsewhere neither waits nor falls behind
/// its bound, and no thread reads back: every read after it stands as
/// well, and meets the floor, until a windup publishes a hands that
/// follows CLOCK_MONOTONIC again, within the same bound.
fn stand_in(clock: &HostClock, stood: u64) -> u64 {
    let vouched = clock
        .vouched(clock.kernel.nanos(KernelClock::Monotonic))
        .max(stood);
    vouched.max(STAND_IN_FLOOR.fetch_max(vouched, Ordering::AcqRel))
}

/// The first read: maps the keeper's page where it is good, or starts the
/// clock (either publishes the readers' word), and reads; or, while a
/// start is under way that it cannot wait for, asks the kernel
/// ([`kernel_read`]).
#[cold]
#[inline(never)]
pub(super) fn start_and_read<const REALTIME: bool, const ORDERED: bool>() -> u64 {
    if page::read_at_start() {
        return read_nanos::<REALTIME, ORDERED>();
    }
    if page::mapping() {
        // No later read of the page is earlier: it states at most the slack.
        return kernel_read::<REALTIME>().saturating_sub(page::slack_ns());
    }
    let Some(clock) = try_clock() else {
        return kernel_read::<REALTIME>();
    };
    // Another thread may be starting it, and not have published it yet.
    publish_first_reader_word(clock.timekeeper());
    read_nanos::<REALTIME, ORDERED>()
}

/// A read while the clock starts, on a thread that cannot wait for the
/// start (it may be the one starting it, interrupted by a signal handler):
/// the kernel's Monotonic (or Realtime), which the clock starts on exactly,
/// so that no read of the clock after this one is earlier.
fn kernel_read<const REALTIME: bool>() -> u64 {
    SystemClocks.nanos(if REALTIME {
        KernelClock::Realtime
    } else {
        KernelClock::Monotonic
    })
}

/// Now, on the OS's Monotonic (CLOCK_MONOTONIC on Linux; see
/// [`KernelClock`]): the fastest correct clock this
/// machine has. Never goes backwards, on one thread or across threads.
/// Async-signal-safe, as every read is (see the crate's docs).
///
/// ```
/// let a = timehands::now();
/// let b = timehands::now();
/// assert!(b >= a);
/// ```
#[inline]
pub fn now() -> Instant {
    Instant::from_nanos(read_nanos::<false, true>())
}

/// Now, from an unordered counter read: cheaper than [`now`], monotonic on one
/// thread, but a thread that has seen another thread's time may read an
/// earlier one. For timing intervals on one thread only. Async-signal-safe.
#[inline]
pub fn now_unordered() -> Instant {
    Instant::from_nanos(read_nanos::<false, false>())
}

/// The time at the kernel's last tick: no counter read at all, at most a
/// few of the kernel's ticks and the clock's accuracy ([`getres`](crate::getres)
/// says how much) behind [`now`], never ahead of it, never back, whatever
/// the scheduler does. It is the kernel's coarse clock (CLOCK_MONOTONIC_COARSE
/// on Linux), which the kernel's timer interrupt keeps and no scheduler
/// holds up, less 50 µs: its cost, and a load. (A coarse time kept by a
/// thread of ours would need that thread to run at every tick, which no
/// thread can be sure of on a guest or beside real-time spinners.)
/// Async-signal-safe.
#[inline]
pub fn now_coarse() -> Instant {
    Instant::from_nanos(coarse_nanos())
}

/// The coarse time in ns, on Monotonic: the kernel's coarse time less
/// [`COARSE_SLACK`] while the stated bound is within the slack (so that a
/// `now()` after it is no earlier: it is within the bound of the kernel's
/// precise clock, which is no earlier than its coarse one).
#[inline(always)]
pub(super) fn coarse_nanos() -> u64 {
    let (seconds, nanos) = crate::os::kernel_coarse(KernelClock::MonotonicCoarse);
    let kernel = nanos_of(seconds, nanos);
    if COARSE.trusts(kernel) {
        // No underflow: the limit is published with the slack taken off.
        kernel - COARSE_SLACK.as_nanos() as u64
    } else {
        coarse_nanos_long_way(kernel)
    }
}

/// [`coarse_nanos`] as a `Duration`, split as the kernel split it: no
/// division.
#[inline(always)]
fn coarse_duration() -> Duration {
    let (seconds, nanos) = crate::os::kernel_coarse(KernelClock::MonotonicCoarse);
    let kernel = nanos_of(seconds, nanos);
    if COARSE.trusts(kernel) {
        less_slack(seconds, nanos)
    } else {
        split_near(coarse_nanos_long_way(kernel), &SECOND_HINTS[0])
    }
}

/// The coarse time on CLOCK_REALTIME: the kernel's coarse Realtime less
/// [`COARSE_SLACK`] where the coarse Monotonic time may be taken so, moved
/// onto Realtime by our offset (see `coarse_limit.rs`); else
/// the coarse Monotonic time moved by the Realtime offset of the
/// timekeeper a `now()` after it reads, as our precise Realtime is. A step
/// of the kernel's Realtime shows here at the kernel's next tick, in the
/// precise Realtime at our next windup: one forward further than the
/// limit's lead (at most two windup intervals) puts the kernel's coarse
/// Realtime past the limit, and such a read goes the long way, never ahead
/// of a precise read; a smaller one may stand ahead of the precise
/// Realtime by as much, until that windup (at most 5 ms of reads).
#[inline(always)]
pub(super) fn realtime_coarse() -> Duration {
    let (seconds, nanos) = crate::os::kernel_coarse(KernelClock::RealtimeCoarse);
    if COARSE.trusts_realtime(nanos_of(seconds, nanos)) {
        less_slack(seconds, nanos)
    } else {
        realtime_coarse_long_way()
    }
}

/// Whole nanoseconds of a clock the kernel split (584 years fit).
#[inline(always)]
fn nanos_of(seconds: u64, nanos: u32) -> u64 {
    seconds
        .wrapping_mul(1_000_000_000)
        .wrapping_add(u64::from(nanos))
}

/// `seconds` and `nanos` less [`COARSE_SLACK`], as a `Duration`: a borrow
/// of one second at most, and no division.
#[inline(always)]
fn less_slack(seconds: u64, nanos: u32) -> Duration {
    let slack = COARSE_SLACK.as_nanos() as u32;
    let (seconds, nanos) = match nanos.checked_sub(slack) {
        Some(nanos) => (seconds, nanos),
        None => (
            seconds.wrapping_sub(1),
            nanos.wrapping_add(1_000_000_000 - slack),
        ),
    };
    // The kernel's nanoseconds are below 10^9; `min` says so to the
    // compiler, which then leaves out `Duration::new`'s carry.
    Duration::new(seconds, nanos.min(999_999_999))
}

/// [`realtime_coarse`] past its limit: the coarse Monotonic time (the long
/// way's, if need be) moved by the readers' timekeeper's Realtime offset;
/// the kernel's coarse Realtime while the clock starts.
#[cold]
#[inline(never)]
fn realtime_coarse_long_way() -> Duration {
    let monotonic = coarse_nanos();
    match realtime_offset(READER.load(Ordering::Acquire)) {
        None => Duration::from_nanos(kernel_gettime_nanos(ClockId::RealtimeCoarse)),
        Some(offset) => split_near(monotonic.saturating_add_signed(offset), &SECOND_HINTS[1]),
    }
}

/// Realtime − Monotonic in ns as the readers of `word` have it (the
/// page's, or the process's timekeeper's); `None` before the clock starts.
fn realtime_offset(word: usize) -> Option<i64> {
    match page::reading_of(word) {
        Some(page) => Some(page::offsets(page).realtime),
        None => own_timekeeper(word).map(Timekeeper::realtime_offset_nanos),
    }
}

/// A coarse read at the kernel's coarse time `kernel` (ns) past where the
/// common way may take it: where the stated bound may exceed
/// [`COARSE_SLACK`] (a failover, a stop, a change of the kernel's rate not
/// yet measured), where the clock was not wound up for two intervals (a
/// program that reads no precise time; a counter that stopped, which only
/// a windup's watchdog finds: this winds up), or before the clock starts
/// (which this starts). It hands out what the kernel's coarse time vouches
/// for less the bound, or less the slack where that is more (never later
/// than the common way's, so that no read there after it is earlier), and
/// no earlier than a coarse read handed out before (`coarse_limit.rs`).
#[cold]
#[inline(never)]
pub(super) fn coarse_nanos_long_way(kernel: u64) -> u64 {
    let vouched = match try_clock() {
        Some(clock) => {
            clock.wind_up_if_stale(kernel);
            clock.vouched(kernel)
        }
        // While another thread starts the clock, reads ask the kernel.
        None => kernel,
    };
    COARSE.hand_out(kernel, vouched)
}

/// The latest time [`now_coherent`] handed out, in ns: the floor of
/// [`now_coarse_coherent`].
pub(super) static COHERENT_FLOOR: AtomicU64 = AtomicU64::new(0);

/// [`now`], remembered so that a [`now_coarse_coherent`] that happens after
/// it is never earlier (the multigrain timestamps of Linux 6.13: the coarse
/// clock stays cheap until someone has seen a finer time). Costs a shared
/// atomic maximum on top of `now()`: use it where that coherence matters, such
/// as timestamps that coarse ones are compared with, not for every read.
/// Async-signal-safe.
///
/// ```
/// let precise = timehands::now_coherent();
/// assert!(timehands::now_coarse_coherent() >= precise);
/// ```
pub fn now_coherent() -> Instant {
    let t = now();
    COHERENT_FLOOR.fetch_max(t.as_nanos(), Ordering::Release);
    t
}

/// [`now_coarse`], but never earlier than a [`now_coherent`] read that
/// happened before it; like `now_coarse`, never ahead of a [`now`] that
/// follows, and never decreasing. Async-signal-safe.
#[inline]
pub fn now_coarse_coherent() -> Instant {
    let coarse = now_coarse();
    coarse.max(Instant::from_nanos(COHERENT_FLOOR.load(Ordering::Acquire)))
}

/// The clocks of `clock_gettime(2)` that timehands serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClockId {
    /// Unix time, following the kernel's steps (`settimeofday`).
    Realtime,
    /// Time since boot, not counting suspend: [`now`].
    Monotonic,
    /// Time since boot, counting suspend.
    Boottime,
    /// The kernel's CLOCK_MONOTONIC_RAW (not slewed by NTP), read from the
    /// kernel; the OS's equivalent elsewhere ([`KernelClock::MonotonicRaw`]).
    MonotonicRaw,
    /// Realtime at the kernel's last tick, less 50 µs (the kernel's
    /// CLOCK_REALTIME_COARSE where it has one).
    RealtimeCoarse,
    /// Monotonic at the kernel's last tick, less 50 µs: [`now_coarse`].
    MonotonicCoarse,
    /// Whole seconds of Realtime.
    Second,
    /// International Atomic Time: Realtime plus the kernel's TAI − UTC
    /// offset (CLOCK_TAI), followed as an NTP daemon sets it (0 where none
    /// does, as the kernel's).
    Tai,
}

impl ClockId {
    /// Every clock id.
    pub const ALL: [ClockId; 8] = [
        ClockId::Realtime,
        ClockId::Monotonic,
        ClockId::Boottime,
        ClockId::MonotonicRaw,
        ClockId::RealtimeCoarse,
        ClockId::MonotonicCoarse,
        ClockId::Second,
        ClockId::Tai,
    ];
}

/// The time on clock `id`, since that clock's origin (the kernel's origin for
/// the clock of that name). A precise read winds the clock up when it finds
/// it due, as [`now`] does. Async-signal-safe, for every id.
// Always inlined: with a constant id (the common call) it is that clock's
// read alone, as cheap as `now()` and an add.
#[inline(always)]
pub fn gettime(id: ClockId) -> Duration {
    match id {
        ClockId::Monotonic => split_near(read_nanos::<false, true>(), &SECOND_HINTS[0]),
        ClockId::Realtime => split_near(read_nanos::<true, true>(), &SECOND_HINTS[1]),
        ClockId::MonotonicCoarse => coarse_duration(),
        ClockId::RealtimeCoarse => realtime_coarse(),
        ClockId::Tai => {
            let Some(tai) = tai_offset() else {
                return Duration::from_nanos(kernel_gettime_nanos(ClockId::Tai));
            };
            // TAI is Monotonic moved by one offset; its second is
            // Monotonic's hint moved by as many seconds.
            let second = SECOND_HINTS[0].load(Ordering::Relaxed);
            split_at(
                tai_nanos(tai),
                second
                    .saturating_add_signed(tai / 1_000_000_000)
                    .min(MAX_HINT),
            )
        }
        other => Duration::from_nanos(gettime_nanos_other(other)),
    }
}

/// [`gettime`] when one instruction's read is all it takes: the clock has
/// started, runs on a counter read by an instruction (the TSC), the current
/// timehands cover this moment, and `id` is [`Monotonic`](ClockId::Monotonic)
/// or [`Realtime`](ClockId::Realtime). `None` otherwise, and [`gettime`]
/// does the rest (starts the clock, winds it up, takes the long way). It
/// never waits, winds up, allocates, calls or panics: for a caller that must
/// not, such as a C function that may not unwind, a signal handler or a
/// tracer's probe.
///
/// ```
/// use timehands::{ClockId, gettime, try_gettime};
///
/// let t = try_gettime(ClockId::Monotonic).unwrap_or_else(|| gettime(ClockId::Monotonic));
/// assert!(t > std::time::Duration::ZERO);
/// ```
#[inline(always)]
pub fn try_gettime(id: ClockId) -> Option<Duration> {
    match id {
        ClockId::Monotonic => {
            let ns = read_nanos_fast::<false, true, false>().ok()?;
            Some(split_near(ns, &SECOND_HINTS[0]))
        }
        ClockId::Realtime => {
            let ns = read_nanos_fast::<true, true, false>().ok()?;
            Some(split_near(ns, &SECOND_HINTS[1]))
        }
        _ => None,
    }
}

/// Realtime now in nanoseconds, and the second near it that [`split_at`]
/// splits it at: the bounds keep it in nanoseconds, and their read splits
/// three times near it.
#[inline(always)]
pub(super) fn realtime_with_second() -> (u64, u64) {
    (
        read_nanos::<true, true>(),
        SECOND_HINTS[1].load(Ordering::Relaxed),
    )
}

/// [`realtime_with_second`], and the TSC's value the Realtime was read at
/// where the clock read the TSC by an instruction and took its common way
/// (`None` otherwise): a source's clock on the TSC (ClockBound 3's,
/// VMClock's) is then read at our Realtime's very instant, with no counter
/// read of its own.
#[inline(always)]
pub(super) fn realtime_with_second_and_tsc() -> (u64, u64, Option<u64>) {
    let (ns, tsc) = read_nanos_and_tsc::<true, true>();
    (ns, SECOND_HINTS[1].load(Ordering::Relaxed), tsc)
}

/// `ns` as a `Duration`, split at the second `hint` names (see
/// [`split_at`]).
#[inline(always)]
pub(super) fn split_near(ns: u64, hint: &AtomicU64) -> Duration {
    split_at(ns, hint.load(Ordering::Relaxed))
}

/// The largest second hint: its nanoseconds fit a `u64`.
const MAX_HINT: u64 = u64::MAX / 1_000_000_000;

/// `ns` as a `Duration`, split at `second` (at most [`MAX_HINT`]) when `ns`
/// falls in that second or the next (a predicted branch and a subtraction),
/// by a division otherwise.
#[inline(always)]
pub(super) fn split_at(ns: u64, second: u64) -> Duration {
    const NANOS_PER_SEC: u64 = 1_000_000_000;
    // No overflow: hints are at most MAX_HINT.
    match ns.checked_sub(second * NANOS_PER_SEC) {
        Some(within) if within < NANOS_PER_SEC => Duration::new(second, within as u32),
        Some(within) if within < 2 * NANOS_PER_SEC => {
            Duration::new(second + 1, (within - NANOS_PER_SEC) as u32)
        }
        _ => Duration::from_nanos(ns),
    }
}

/// TAI in nanoseconds: Monotonic's read moved by `tai`, TAI − Monotonic in
/// ns (see [`HostClock::tai`]): one offset, which a leap second does not
/// move (it moves Realtime and TAI − UTC together).
#[inline(always)]
pub(super) fn tai_nanos(tai: i64) -> u64 {
    read_nanos::<false, true>().saturating_add_signed(tai)
}

/// TAI − Monotonic in ns: the page's where the process reads it, the
/// clock's otherwise; `None` while the clock starts.
fn tai_offset() -> Option<i64> {
    match page::reading() {
        Some(page) => Some(page::offsets(page).tai),
        None => try_clock().map(HostClock::tai),
    }
}

/// The nanoseconds of the clocks other than Monotonic and Realtime.
#[inline(never)]
pub(super) fn gettime_nanos_other(id: ClockId) -> u64 {
    if let Some(page) = page::reading() {
        let offsets = page::offsets(page);
        match id {
            ClockId::Boottime => {
                return read_nanos::<false, true>().saturating_add_signed(offsets.boottime);
            }
            ClockId::Tai => return tai_nanos(offsets.tai),
            _ => {}
        }
    }
    let Some(clock) = try_clock() else {
        return kernel_gettime_nanos(id);
    };
    match id {
        ClockId::Monotonic => read_nanos::<false, true>(),
        ClockId::Realtime => read_nanos::<true, true>(),
        ClockId::Second => read_nanos::<true, true>() / 1_000_000_000 * 1_000_000_000,
        ClockId::Boottime => read_nanos::<false, true>()
            .saturating_add_signed(clock.boottime_offset.load(Ordering::Relaxed)),
        ClockId::MonotonicRaw => clock.kernel.nanos(KernelClock::MonotonicRaw),
        ClockId::Tai => tai_nanos(clock.tai()),
        ClockId::MonotonicCoarse => coarse_nanos(),
        ClockId::RealtimeCoarse => realtime_coarse().as_nanos() as u64,
    }
}

/// Clock `id` while the clock starts ([`kernel_read`]): the kernel's clock
/// of that name, TAI as Realtime plus the kernel's TAI − UTC offset (0
/// where the kernel does not say).
#[cold]
fn kernel_gettime_nanos(id: ClockId) -> u64 {
    let kernel = |clock| SystemClocks.nanos(clock);
    match id {
        ClockId::Monotonic => kernel_read::<false>(),
        ClockId::Realtime => kernel_read::<true>(),
        ClockId::Second => kernel_read::<true>() / 1_000_000_000 * 1_000_000_000,
        ClockId::Boottime => kernel(KernelClock::Boottime),
        ClockId::MonotonicRaw => kernel(KernelClock::MonotonicRaw),
        ClockId::Tai => {
            let offset = crate::os::ntp().map_or(0, |ntp| ntp.tai_offset_s as i64);
            kernel_read::<true>().saturating_add_signed(offset * 1_000_000_000)
        }
        ClockId::MonotonicCoarse => coarse_nanos(),
        ClockId::RealtimeCoarse => {
            kernel(KernelClock::RealtimeCoarse).saturating_sub(COARSE_SLACK.as_nanos() as u64)
        }
    }
}
