//! The keeper's side: the file made, and the process's clock published in
//! it at each windup.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::layout::{
    COUNTER_TSC, FILE_SIZE, Hands, Header, MAGIC, Page, RATE_UNKNOWN, READ_LFENCE_RDTSC,
    READ_RDTSCP, SLOTS, Slot, VERSION,
};
use crate::host::bounds::state::{PUBLISHED, Published};
use crate::host::coarse_limit::COARSE_SLACK;
use crate::host::counter::HostCounter;
use crate::host::kernel_clocks::KernelClock;
use crate::host::process::clock;
use crate::host::published::READER;
use crate::hw::OrderedRead;

/// The keeper's page: a file it made, mapped for writing, that other
/// processes map to read the time (see [the page](crate::keeper)).
///
/// ```no_run
/// use timehands::keeper::{Keeper, Keeping};
///
/// let keeper = Keeper::create("/run/timehands/page".as_ref())?;
/// // Until killed; each change said once.
/// keeper.keep(None, |keeping: &Keeping| {
///     eprintln!("{keeping}");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Keeper {
    page: &'static Page,
    path: PathBuf,
    /// The version of this process's bounds last copied to the page.
    bounds_copied: AtomicU64,
    /// The page's file under its other name, until its first hands: a
    /// reader never maps a page with none (and refuses it for good).
    unnamed: Mutex<Option<PathBuf>>,
}

/// Why [`Keeper::publish`] published nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotYet {
    /// The clock is not on the TSC (still choosing, or it failed over to
    /// the kernel's clock): the page's readers read the TSC.
    NotOnTsc(&'static str),
    /// The clock's bound where its segments end is this many ns, wider
    /// than a page may state (50 µs).
    Bound(u64),
    /// The clock stands this many ns behind what readers of the page may
    /// have read (see [`Keeper::publish`]).
    Behind(u64),
    /// The page, written whole, could not be renamed to its path.
    Rename(String),
}

impl std::fmt::Display for NotYet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotYet::NotOnTsc(counter) => write!(f, "the clock runs on {counter}, not on the TSC"),
            NotYet::Bound(ns) => write!(
                f,
                "the clock's error bound is {ns} ns, wider than the {} µs a page may state",
                COARSE_SLACK.as_micros()
            ),
            NotYet::Behind(ns) => write!(
                f,
                "the clock is {ns} ns behind what readers of the page may have read"
            ),
            NotYet::Rename(e) => write!(f, "the page cannot be renamed to its path: {e}"),
        }
    }
}

/// What [`Keeper::keep`] tells as it keeps the clock.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keeping {
    /// It publishes the clock (said when it starts to).
    Publishing,
    /// It does not, and why (said when that changes).
    NotYet(NotYet),
    /// It woke so late that the page's readers read stale for this long
    /// (their reads fell back to CLOCK_MONOTONIC less the slack): its
    /// scheduling is too poor for its readers.
    Late(Duration),
}

impl std::fmt::Display for Keeping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keeping::Publishing => write!(f, "publishing"),
            Keeping::NotYet(not_yet) => write!(f, "not publishing: {not_yet}"),
            Keeping::Late(late) => write!(
                f,
                "late: the page's readers read stale for {:.1} ms",
                late.as_secs_f64() * 1e3
            ),
        }
    }
}

impl Keeper {
    /// Makes the page at `path`: its directory first (mode 0755, so that a
    /// container can bind-mount it before a keeper runs), then the file,
    /// written under another name and renamed over whatever was there
    /// (mode 0644: only this user writes it) at the first
    /// [`publish`](Keeper::publish), so that no reader ever maps a page
    /// half made or with no hands yet, and readers of an older one find it
    /// stale.
    /// This process keeps its own clock from now on.
    ///
    /// One keeper a directory: a second one fails, naming the first. A
    /// process that reads a keeper's page already cannot keep one.
    pub fn create(path: &Path) -> io::Result<Keeper> {
        super::keep_own_clock();
        if super::reading().is_some() {
            return Err(io::Error::other(
                "this process reads a keeper's page already: a keeper keeps its own clock",
            ));
        }
        let dir = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)?;
        lock_directory(dir)?;
        let file_name = path.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the page's path names no file")
        })?;
        let mut fresh_name = file_name.to_owned();
        fresh_name.push(".new");
        let fresh = path.with_file_name(fresh_name);
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&fresh)?;
        // The mode asked for is umask's to narrow; this one is the page's.
        file.set_permissions(fs::Permissions::from_mode(0o644))?;
        file.set_len(FILE_SIZE as u64)?;
        let page = map_for_writing(&file)?;
        write_header(page);
        Ok(Keeper {
            page,
            path: path.to_owned(),
            bounds_copied: AtomicU64::new(0),
            unnamed: Mutex::new(Some(fresh)),
        })
    }

    /// The page's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sleeps until a little before the clock's hands falls due: readers
    /// of the page read it on up to an interval past its promise, and the
    /// next [`publish`](Keeper::publish) winds up.
    pub fn sleep_until_due(&self) {
        let clock = clock();
        let due = clock.readers_timekeeper().promised().due_nanos;
        // While the clock starts (its first hands serve 50 µs) and chooses
        // its counter, no busy loop: a windup a tenth of a millisecond.
        let soonest = clock.kernel.nanos(KernelClock::Monotonic) + SOONEST_NS;
        sleep_until(due.saturating_sub(EARLY_NS).max(soonest));
    }

    /// Keeps the clock: sleeps until due and publishes, over and over,
    /// until `until` (for ever with `None`). Tells `told` when it starts
    /// publishing or stops, with why, and each time it woke too late for
    /// its readers while it published (not again while it does not); an
    /// error from `told` ends the keeping.
    pub fn keep<E>(
        &self,
        until: Option<Instant>,
        mut told: impl FnMut(&Keeping) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut said = None;
        while until.is_none_or(|until| Instant::now() < until) {
            self.sleep_until_due();
            let now = clock().kernel.nanos(KernelClock::Monotonic);
            let stale = self
                .page
                .newest()
                .and_then(|hands| now.checked_sub(hands.end_ns));
            if let (Some(stale), Some(Keeping::Publishing)) = (stale, &said) {
                told(&Keeping::Late(Duration::from_nanos(stale)))?;
            }
            let keeping = self
                .publish()
                .map_or_else(Keeping::NotYet, |()| Keeping::Publishing);
            if said.as_ref() != Some(&keeping) {
                told(&keeping)?;
                said = Some(keeping);
            }
        }
        Ok(())
    }

    /// Winds the process's clock up (and steers it, when a steering is
    /// due), and publishes its hands. Nothing while it is not on the TSC,
    /// while its bound is wider than a page states, or while its time
    /// stands behind what the page's readers may have read (a windup that
    /// came so late that the clock resumed from CLOCK_MONOTONIC behind the
    /// line they read on: they read stale until it is past).
    pub fn publish(&self) -> Result<(), NotYet> {
        let clock = clock();
        clock.windup();
        let word = READER.load(Ordering::Acquire);
        let timekeeper = crate::host::published::own_timekeeper(word)
            .ok_or(NotYet::NotOnTsc("no timekeeper yet"))?;
        let HostCounter::Tsc(tsc) = timekeeper.counter() else {
            return Err(NotYet::NotOnTsc(timekeeper.counter().kind().name()));
        };
        let promised = timekeeper.promised();
        let bound = clock.bound.load();
        // With two for the rounding of a read and the kernel's, within the
        // slack, so that no read of the page is behind a coarse read.
        let at_end = bound.at(promised.end_nanos).saturating_add(2);
        if at_end > COARSE_SLACK.as_nanos() as u64 {
            return Err(NotYet::Bound(at_end));
        }
        let (boottime, tai) = (clock.boottime_offset.load(Ordering::Relaxed), clock.tai());
        // The keeper's one thread holds no steering here: it is there.
        let (kernel_rate_ppb, rate_asked_at) = clock
            .try_steering()
            .and_then(|steering| steering.followed_kernel_rate())
            .unwrap_or((RATE_UNKNOWN, 0));
        let hands = Hands {
            segments: promised.segments,
            realtime: promised.realtime_nanos,
            boottime,
            tai,
            end_ns: promised.end_nanos,
            bound_ns: bound.ns,
            bound_ppb: bound.ppb,
            bound_since: bound.since,
            realtime_uncertainty: clock.realtime_uncertainty.load(Ordering::Relaxed),
            leap: u64::from(clock.leap().code()),
            base: promised.base,
            kernel_rate_ppb,
            rate_asked_at,
            boottime_uncertainty: clock.boottime_uncertainty.load(Ordering::Relaxed),
        };
        if let Some(published) = self.page.newest() {
            behind_what_was_read(&published, &hands, tsc)?;
        }
        self.page.header.read.store(
            match tsc.ordered_read() {
                OrderedRead::Rdtscp => READ_RDTSCP,
                OrderedRead::LfenceRdtsc => READ_LFENCE_RDTSC,
            },
            Ordering::Relaxed,
        );
        self.page.publish(&hands);
        self.name_the_page()?;
        // The bounds on UTC, as this process's own read keeps them (it
        // asks the sources when they are due), for readers that ask none.
        let _ = crate::realtime_bounds();
        let version = PUBLISHED.version();
        if version != self.bounds_copied.load(Ordering::Relaxed) {
            if let Some(state) = PUBLISHED.load() {
                Published::over(&self.page.bounds).publish(&state);
                self.bounds_copied.store(version, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

impl Keeper {
    /// Renames the page to its path, the first time it holds a hands.
    fn name_the_page(&self) -> Result<(), NotYet> {
        let mut unnamed = self.unnamed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(fresh) = unnamed.as_ref() {
            fs::rename(fresh, &self.path).map_err(|e| NotYet::Rename(e.to_string()))?;
            *unnamed = None;
        }
        Ok(())
    }
}

/// Whether `next`, about to be published after `published`, gives no
/// less than readers of `published` may have read, or are reading: at its
/// base, now, and a while from now, over which both lines are straight
/// (`published` runs on at its last rate past its promise; `next` may have
/// changed rate since its base, when the keeper was held up between its
/// windup and this). Past `published`'s end its readers read no more than
/// that end ([`Hands::latest_by`], which a stale read takes too).
fn behind_what_was_read(
    published: &Hands,
    next: &Hands,
    tsc: &crate::hw::Tsc,
) -> Result<(), NotYet> {
    let now = crate::Counter::read(tsc);
    let soon = now.saturating_add(crate::Counter::frequency(tsc) / 10_000);
    for count in [next.base, now, soon] {
        let read = published.latest_by(count).unwrap_or(0);
        let ours = next.nanos_at(count).unwrap_or(0);
        if ours < read {
            return Err(NotYet::Behind(read - ours));
        }
    }
    Ok(())
}

/// The least the keeper sleeps between two windups, ns.
const SOONEST_NS: u64 = 100_000;

/// How long before the due point the keeper winds up: its own reads never
/// stand at the promise (where it would resume from CLOCK_MONOTONIC), and
/// its page's readers have an interval and this much in hand for a late
/// wakeup.
const EARLY_NS: u64 = 1_000_000;

/// Whether a keeper published a hands in the page at `path` that is of
/// this layout: read as bytes, not mapped, so that the caller's own clock
/// stays its own (a supervisor, a test, a benchmark that waits for its
/// keeper).
pub fn published(path: &Path) -> bool {
    let Ok(bytes) = fs::read(path) else {
        return false;
    };
    let word = |at: usize| {
        bytes
            .get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    let version = word(std::mem::offset_of!(Header, version)) as u32;
    let newest = word(std::mem::offset_of!(Header, newest)) as usize;
    let sequence = word(std::mem::offset_of!(Page, slots) + newest * size_of::<Slot>());
    word(0) == MAGIC && version == VERSION && newest < SLOTS && sequence != 0 && sequence % 2 == 0
}

/// Takes the keepers' lock of `dir` (a `flock` on the directory itself)
/// for the rest of this process's life, so that two keepers never rename
/// pages over each other's readers.
fn lock_directory(dir: &Path) -> io::Result<()> {
    let handle = fs::File::open(dir)?;
    // SAFETY: an open descriptor; flock only locks it.
    if unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("another keeper keeps {} already", dir.display()),
            )
        } else {
            e
        });
    }
    // Held until the process exits (its descriptor is closed on exec too).
    std::mem::forget(handle);
    Ok(())
}

/// Sleeps until CLOCK_MONOTONIC reads `ns` (a signal that interrupts the
/// sleep ends it early: the keeper then publishes early, which is never
/// wrong, as a read finds no windup due before it is).
fn sleep_until(ns: u64) {
    let until = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as _,
        tv_nsec: (ns % 1_000_000_000) as _,
    };
    // SAFETY: a valid timespec; no remainder is asked for.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &until,
            std::ptr::null_mut(),
        )
    };
}

/// `file` (of FILE_SIZE bytes) mapped shared and writable.
fn map_for_writing(file: &fs::File) -> io::Result<&'static Page> {
    // SAFETY: a fresh mapping of an open file of FILE_SIZE bytes.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            FILE_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: page-aligned, FILE_SIZE bytes (zeroed by `set_len`), never
    // unmapped; `Page` is all atomics.
    Ok(unsafe { &*address.cast::<Page>() })
}

/// The header of a page with no hands yet: readers that map it find it
/// stale until the first publish.
fn write_header(page: &Page) {
    let header = &page.header;
    header.magic.store(MAGIC, Ordering::Relaxed);
    header.version.store(VERSION, Ordering::Relaxed);
    header
        .size
        .store(size_of::<Page>() as u32, Ordering::Relaxed);
    header.counter.store(COUNTER_TSC, Ordering::Relaxed);
    header.slots.store(SLOTS as u32, Ordering::Relaxed);
    header
        .keeper_pid
        .store(std::process::id(), Ordering::Relaxed);
    let boot = super::map::boot_id().unwrap_or_default();
    for (word, value) in header.boot_id.iter().zip(boot) {
        word.store(value, Ordering::Relaxed);
    }
    // No slot holds a hands yet; each reads as never written.
    header.newest.store(0, Ordering::Release);
    debug_assert!(
        page.slots
            .iter()
            .all(|slot| slot.sequence.load(Ordering::Relaxed) == 0)
    );
}
