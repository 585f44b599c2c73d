//! One keeper for the machine: a process (`timehands keeper`) keeps the
//! clock and publishes its hands in a file of one page, and every process
//! that finds the page good reads the time from it with the counter and
//! loads: no thread, no system call, no write, and no counter choice of
//! its own, so its first read costs a mapping rather than a start. This is
//! FreeBSD's `vdso_timehands`, with a process for the kernel.
//!
//! # The page
//!
//! `layout.rs` lays it out (and `docs/page.md` writes it down for other
//! languages): a header saying what it is (magic, version, the counter,
//! the boot), and a ring of hands, each a seqlock over its line as
//! nanosecond segments, the offsets of Realtime, Boottime and TAI, and the
//! keeper's error bound against CLOCK_MONOTONIC.
//!
//! # What the keeper promises
//!
//! A reader in another process can neither stand at a hands' promise nor
//! cancel a candidate, as the engine's readers do, so the keeper
//! (`keeper.rs`) promises instead:
//!
//! - It winds up a millisecond before each hands falls due, so that its
//!   own reads never stand, and publishes each hands' line up to an
//!   interval past its promise at its last rate: the next hands agrees
//!   with it over every count a reader could have read it at.
//! - It publishes no hands that gives less than the one before gave or
//!   gives: at its base, at the moment of publishing and a little after
//!   (a keeper held up between its windup and its publish, or so late that
//!   its clock resumed from CLOCK_MONOTONIC behind the line readers read
//!   on, waits for a windup that is not).
//! - Every hands' bound, up to its end, is within [`COARSE_SLACK`] (50 µs).
//!
//! # How a process uses it
//!
//! Its first read maps the page (`map.rs`) where it exists, passes the
//! checks of who may write it and of its layout, and agrees with this
//! process's kernel clocks (a time namespace does not), and then names it
//! in the readers' word. A read that no hands covers (the keeper is late,
//! stopped or gone) reads CLOCK_MONOTONIC less the slack, and never less
//! than a hands that started by its counter reading gave by then: no earlier
//! than any read of the page before it, and no later than any after it, by
//! the keeper's promises. A page that stays stale for [`GIVE_UP_AFTER`] is
//! left for the process's own clock, for good, once that is past every
//! time the page gave. Without a page, the process keeps its own clock
//! from its first read, as a process on a machine with no keeper does.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod keeper;
pub(crate) mod layout;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod map;
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod ring_tests;
// Keeper and reader processes: not under miri, which runs no process.
#[cfg(all(test, not(miri), target_os = "linux", target_arch = "x86_64"))]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::time::Duration;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub use keeper::{Keeper, Keeping, NotYet, published};
use layout::{Hands, Page};

use super::coarse_limit::COARSE_SLACK;
use super::kernel_clocks::KernelClock;
use super::published::{NOT_STARTED, PAGE, READER};

/// How long a page may stay stale (past its newest hands' end, an
/// interval past its promise) before its readers leave it for their own
/// clocks: long past a keeper's
/// late wakeup, short beside a keeper that was stopped or killed.
pub(crate) const GIVE_UP_AFTER: Duration = Duration::from_millis(100);

/// Why a process does not read the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// This OS (or CPU) has no page: only Linux on x86_64 has a keeper.
    Unsupported,
    /// `TIMEHANDS_PAGE` is empty, too long, or not a path.
    BadPath,
    /// The file or its directory could not be opened, read or mapped (an
    /// errno: no keeper runs here, most often).
    Open(i32),
    /// Not a regular file.
    NotAFile,
    /// Shorter than a page, in bytes.
    Short(u64),
    /// Writable by its group or others.
    WritableByOthers,
    /// Its directory is writable by its group or others.
    DirectoryWritableByOthers,
    /// Owned by neither its directory's owner nor root.
    Owner { file: u32, directory: u32 },
    /// Not a timehands page of this layout.
    NotAPage,
    /// A version this library does not read.
    Version(u32),
    /// A counter this library does not read.
    Counter(u32),
    /// Written in another boot.
    OtherBoot,
    /// No hands covers now: the keeper is not running, or not yet.
    Stale,
    /// Its time is off this process's kernel clocks by this many ns, more
    /// than its bound: a time namespace, or a page to distrust.
    Disagrees(i64),
    /// This process keeps its own clock (it is the keeper).
    Keeper,
    /// The page was read, went stale for [`GIVE_UP_AFTER`], and was left.
    Left,
    /// The process's own clock started on another thread while this one
    /// mapped the page: its readers stay on it.
    Started,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::Unsupported => write!(f, "only Linux on x86_64 has a keeper"),
            Refusal::BadPath => write!(f, "TIMEHANDS_PAGE does not name a file"),
            Refusal::Open(errno) => {
                write!(f, "{}", std::io::Error::from_raw_os_error(errno))
            }
            Refusal::NotAFile => write!(f, "not a regular file"),
            Refusal::Short(bytes) => write!(f, "{bytes} bytes, shorter than a page"),
            Refusal::WritableByOthers => write!(f, "writable by its group or others"),
            Refusal::DirectoryWritableByOthers => {
                write!(f, "its directory is writable by its group or others")
            }
            Refusal::Owner { file, directory } => write!(
                f,
                "owned by uid {file}, neither its directory's owner (uid {directory}) nor root"
            ),
            Refusal::NotAPage => write!(f, "not a timehands page"),
            Refusal::Version(version) => {
                write!(
                    f,
                    "page version {version}, this library reads {}",
                    layout::VERSION
                )
            }
            Refusal::Counter(counter) => {
                write!(f, "on counter {counter}, which this library does not read")
            }
            Refusal::OtherBoot => write!(f, "written in another boot"),
            Refusal::Stale => write!(f, "stale: no keeper keeps it now"),
            Refusal::Disagrees(ns) => write!(
                f,
                "{ns} ns off this process's kernel clocks, beyond its bound (a time namespace?)"
            ),
            Refusal::Keeper => write!(f, "this process is the keeper"),
            Refusal::Left => write!(
                f,
                "left: stale for {} ms, the keeper stopped or exited",
                GIVE_UP_AFTER.as_millis()
            ),
            Refusal::Started => write!(f, "its own clock started first, on another thread"),
        }
    }
}

/// [`STATE`]: no read tried the page yet.
const UNTRIED: u8 = 0;
/// [`STATE`]: a read is mapping it.
const MAPPING: u8 = 1;
/// [`STATE`]: the readers' word names it.
const READING: u8 = 2;
/// [`STATE`]: not read ([`REFUSAL`] says why).
const REFUSED: u8 = 3;

/// Where this process stands with the page.
static STATE: AtomicU8 = AtomicU8::new(UNTRIED);
/// Why it does not read it, as [`Refusal::code`] packs it.
static REFUSAL: AtomicI64 = AtomicI64::new(0);

impl Refusal {
    /// The refusal in one word (its kind and its number), so that a read
    /// that refuses the page writes it down without a lock.
    fn code(self) -> i64 {
        let (kind, value) = match self {
            Refusal::Unsupported => (0, 0),
            Refusal::BadPath => (1, 0),
            Refusal::Open(errno) => (2, i64::from(errno)),
            Refusal::NotAFile => (3, 0),
            Refusal::Short(bytes) => (4, bytes as i64),
            Refusal::WritableByOthers => (5, 0),
            Refusal::DirectoryWritableByOthers => (6, 0),
            Refusal::Owner { file, directory } => (7, i64::from(file) << 24 | i64::from(directory)),
            Refusal::NotAPage => (8, 0),
            Refusal::Version(v) => (9, i64::from(v)),
            Refusal::Counter(c) => (10, i64::from(c)),
            Refusal::OtherBoot => (11, 0),
            Refusal::Stale => (12, 0),
            Refusal::Disagrees(ns) => (13, ns.clamp(-(1 << 55), 1 << 55)),
            Refusal::Keeper => (14, 0),
            Refusal::Left => (15, 0),
            Refusal::Started => (16, 0),
        };
        value << 8 | kind
    }

    fn from_code(code: i64) -> Refusal {
        let value = code >> 8;
        match code & 0xff {
            1 => Refusal::BadPath,
            2 => Refusal::Open(value as i32),
            3 => Refusal::NotAFile,
            4 => Refusal::Short(value as u64),
            5 => Refusal::WritableByOthers,
            6 => Refusal::DirectoryWritableByOthers,
            7 => Refusal::Owner {
                file: (value >> 24) as u32,
                directory: (value & 0xff_ffff) as u32,
            },
            8 => Refusal::NotAPage,
            9 => Refusal::Version(value as u32),
            10 => Refusal::Counter(value as u32),
            11 => Refusal::OtherBoot,
            12 => Refusal::Stale,
            13 => Refusal::Disagrees(value),
            14 => Refusal::Keeper,
            15 => Refusal::Left,
            16 => Refusal::Started,
            _ => Refusal::Unsupported,
        }
    }
}

/// Where the process's time comes from, for `info`.
pub(crate) fn describe() -> String {
    match reading() {
        Some(page) => format!(
            "the keeper's page (keeper pid {})",
            page.header.keeper_pid.load(Ordering::Relaxed)
        ),
        None => match STATE.load(Ordering::Acquire) {
            UNTRIED => "its own clock: it has not read the page yet".to_string(),
            _ => format!(
                "its own clock: the keeper's page: {}",
                Refusal::from_code(REFUSAL.load(Ordering::Acquire))
            ),
        },
    }
}

/// Refuses the page for `why` (while [`STATE`] is this thread's to set).
fn refuse(why: Refusal) {
    REFUSAL.store(why.code(), Ordering::Release);
    STATE.store(REFUSED, Ordering::Release);
}

/// The page's readers' word, if this process is to read the page: at the
/// first read, the one that maps it. `None` where another read maps it
/// meanwhile, where it was refused, or where this OS has none.
fn start() -> Option<usize> {
    if STATE
        .compare_exchange(UNTRIED, MAPPING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return None;
    }
    super::fork_points::point("page: mapping");
    mapped().map_err(refuse).ok()
}

/// Names the keeper's page in the readers' word, where this is the
/// process's first try of it and the page is good: whether it did. The
/// state says the page is read only once the word names it (a clock
/// another thread published meanwhile keeps the readers).
pub(super) fn read_at_start() -> bool {
    let Some(word) = start() else {
        return false;
    };
    let named = READER
        .compare_exchange(NOT_STARTED, word, Ordering::AcqRel, Ordering::Acquire)
        .is_ok();
    if named {
        STATE.store(READING, Ordering::Release);
    } else {
        refuse(Refusal::Started);
    }
    named
}

/// In a forked child: a mapping the parent's other thread was making is
/// not the child's to wait for; its first read tries again.
pub(super) fn forget_mapping_after_fork() {
    let _ = STATE.compare_exchange(MAPPING, UNTRIED, Ordering::AcqRel, Ordering::Acquire);
}

/// Whether a read that finds the clock not started must wait for nothing
/// but the kernel: a page is being mapped on another thread, or on the one
/// a signal handler interrupted.
pub(super) fn mapping() -> bool {
    STATE.load(Ordering::Acquire) == MAPPING
}

/// This process keeps its own clock whatever the page (the keeper does: it
/// would read its own page).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(crate) fn keep_own_clock() {
    if STATE
        .compare_exchange(UNTRIED, MAPPING, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        refuse(Refusal::Keeper);
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn mapped() -> Result<usize, Refusal> {
    use super::published::{LFENCE_RDTSC, RDTSCP};
    let (page, read) = map::map()?;
    let how = match read {
        crate::hw::OrderedRead::Rdtscp => RDTSCP,
        crate::hw::OrderedRead::LfenceRdtsc => LFENCE_RDTSC,
    };
    Ok(std::ptr::from_ref(page) as usize | PAGE | how)
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn mapped() -> Result<usize, Refusal> {
    Err(Refusal::Unsupported)
}

pub(super) use super::published::{page_of, page_read as reading};

/// The page readers' word `word` names, if it names one.
pub(super) fn reading_of(word: usize) -> Option<&'static Page> {
    (word & PAGE != 0).then(|| page_of(word))
}

/// The keeper's bound on its hands' Monotonic at Monotonic `now` ns.
pub(crate) fn bound_at(hands: &Hands, now: u64) -> u64 {
    let grown =
        now.saturating_sub(hands.bound_since) as u128 * hands.bound_ppb as u128 / 1_000_000_000;
    hands
        .bound_ns
        .saturating_add(grown.min(u64::MAX as u128) as u64)
}

/// A read at `count` on the page of readers' word `word` that the newest
/// hands' first segment does not cover: another of its segments, an older
/// hands (a read the keeper overtook), or, past every promise, what the
/// kernel's clock vouches for (see the module docs); and, where the page is
/// to be left, the latest time a read of it could have given.
#[inline(always)]
pub(super) fn read_slow<const REALTIME: bool>(word: usize, count: u64) -> (u64, Option<u64>) {
    // One look at the ring, for all that follows: a hands the keeper
    // finishes between two looks would be missing from the first (no
    // hands covers the count) and found in the second (started, and ending
    // an interval ahead), and the read would give its end.
    let ring = page_of(word).slots.each_ref().map(layout::Slot::hands);
    let ((monotonic, realtime), leave) = match covering(&ring, count) {
        Some(covered) => (covered, None),
        None => stale(&ring, count),
    };
    let ns = if REALTIME {
        monotonic.saturating_add_signed(realtime)
    } else {
        monotonic
    };
    (ns, leave)
}

/// Of the hands that cover `count`, the one that started last: Monotonic
/// there and its Realtime offset. An older one runs on at its last rate
/// past its promise, where a newer one may have changed it (a read the
/// keeper overtook).
fn covering(ring: &[Option<Hands>], count: u64) -> Option<(u64, i64)> {
    ring.iter()
        .flatten()
        .filter(|hands| hands.started_by(count))
        .filter_map(|hands| {
            Some((
                count.wrapping_sub(hands.base),
                hands.nanos_at(count)?,
                hands.realtime,
            ))
        })
        .min_by_key(|&(since_base, _, _)| since_base)
        .map(|(_, monotonic, realtime)| (monotonic, realtime))
}

/// A read at `count` that no hands covers. Either the keeper is late,
/// stopped or gone: CLOCK_MONOTONIC less the slack, and never less than
/// the latest time a hands that started by `count` gives at a count up to
/// it (a hands that starts later was published after this read's counter
/// read, and no read before this one read it), with Realtime's offset of
/// that hands; after [`GIVE_UP_AFTER`] past the end of the newest of them,
/// the page is left. Or the read was preempted between its counter read
/// and its loads while the keeper published the whole ring anew: every
/// hands starts after `count`, and the read takes the earliest one's
/// start, as the engine clamps a count behind its hands' base (no read
/// before it could give more; none after it can give less).
fn stale(ring: &[Option<Hands>], count: u64) -> ((u64, i64), Option<u64>) {
    let started = || {
        ring.iter()
            .flatten()
            .filter(|hands| hands.started_by(count))
    };
    let kernel = crate::os::kernel_nanos(KernelClock::Monotonic).unwrap_or(0);
    let since_kernel = kernel.saturating_sub(slack_ns());
    let Some(newest) = started().max_by_key(|hands| hands.end_ns) else {
        return behind_every_hands(ring, kernel);
    };
    // Realtime's offset of the hands that gave the latest, or, where none
    // gave any by this count (a page no keeper writes), of the newest.
    let (latest, realtime) = started()
        .filter_map(|hands| Some((hands.latest_by(count)?, hands.realtime)))
        .max_by_key(|&(latest, _)| latest)
        .unwrap_or((0, newest.realtime));
    let vouched = since_kernel.max(latest);
    let leave =
        (kernel.saturating_sub(newest.end_ns) > GIVE_UP_AFTER.as_nanos() as u64).then_some(vouched);
    ((vouched, realtime), leave)
}

/// [`stale`] for a count behind the base of every hands in `ring`: the
/// earliest start, and never less than the kernel's clock vouches for (a
/// counter gone back, behind every hands, must not stop the time); left as
/// a stale page is, when its newest hands ended long ago. With no hands to
/// be read whole (not a page any keeper writes), the kernel's time.
fn behind_every_hands(ring: &[Option<Hands>], kernel: u64) -> ((u64, i64), Option<u64>) {
    let since_kernel = kernel.saturating_sub(slack_ns());
    let Some(earliest) = ring
        .iter()
        .flatten()
        .filter_map(|hands| Some((hands.nanos_at(hands.base)?, hands.realtime)))
        .min()
    else {
        return ((since_kernel, 0), Some(kernel));
    };
    let newest_end = ring
        .iter()
        .flatten()
        .map(|hands| hands.end_ns)
        .max()
        .unwrap_or(0);
    let vouched = earliest.0.max(since_kernel);
    let leave =
        (kernel.saturating_sub(newest_end) > GIVE_UP_AFTER.as_nanos() as u64).then_some(vouched);
    ((vouched, earliest.1), leave)
}

/// The slack a stale read takes off CLOCK_MONOTONIC: the widest bound a
/// page states (with its rounding), and what the coarse clocks take off the
/// kernel's, so that a stale read is never behind a coarse one.
pub(super) fn slack_ns() -> u64 {
    COARSE_SLACK.as_nanos() as u64
}

/// Says that the process left the page for its own clock (the read that
/// moved the readers' word calls it).
pub(super) fn left() {
    REFUSAL.store(Refusal::Left.code(), Ordering::Release);
    STATE.store(REFUSED, Ordering::Release);
}

/// What `getres` states on the page (see [`accuracy`]).
pub(super) struct Stated {
    /// The bound on Monotonic, ns.
    pub(super) bound: u64,
    /// What Realtime's offset's measurement adds, ns.
    pub(super) realtime_uncertainty: u64,
    /// What Boottime's offset's measurement adds, ns.
    pub(super) boottime_uncertainty: u64,
    /// The leap second the keeper announced.
    pub(super) leap: crate::os::LeapSecond,
}

/// What `getres` states on the page: the newest hands' bound now where it
/// covers now, widened by a change of the kernel's rate that the keeper
/// has not followed yet (the kernel is asked, as the process's own clock
/// asks it); the slack of a stale read otherwise; with the uncertainties
/// of the offsets of Realtime and Boottime, and the leap second the
/// keeper announced.
pub(super) fn accuracy(page: &Page) -> Stated {
    let now = crate::os::kernel_nanos(KernelClock::Monotonic).unwrap_or(0);
    let Some(hands) = page.newest() else {
        return Stated {
            bound: slack_ns(),
            realtime_uncertainty: 0,
            boottime_uncertainty: 0,
            leap: crate::os::LeapSecond::None,
        };
    };
    let bound = if now < hands.end_ns {
        let said = crate::os::ntp_quietly().ok().and_then(|ntp| ntp.rate_ppb);
        bound_at(&hands, now).saturating_add(hands.unfollowed_change_ns(said, now))
    } else {
        slack_ns()
    };
    Stated {
        bound,
        realtime_uncertainty: hands.realtime_uncertainty,
        boottime_uncertainty: hands.boottime_uncertainty,
        leap: crate::os::LeapSecond::from_code(hands.leap),
    }
}

/// The offsets of the page's newest hands from Monotonic, ns.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Offsets {
    pub(super) realtime: i64,
    pub(super) boottime: i64,
    pub(super) tai: i64,
}

/// The offsets of the page's newest hands (0 where none can be read).
pub(super) fn offsets(page: &Page) -> Offsets {
    page.newest().map_or(Offsets::default(), |hands| Offsets {
        realtime: hands.realtime,
        boottime: hands.boottime,
        tai: hands.tai,
    })
}
