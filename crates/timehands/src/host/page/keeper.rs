//! The keeper's side: the file made, and the process's clock published in
//! it at each windup.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::layout::{
    COUNTER_TSC, FILE_SIZE, Hands, MAGIC, Page, READ_LFENCE_RDTSC, READ_RDTSCP, SLOTS, VERSION,
    leap_code,
};
use crate::host::coarse_limit::COARSE_SLACK;
use crate::host::counter::HostCounter;
use crate::host::process::clock;
use crate::host::published::READER;
use crate::hw::OrderedRead;

/// The keeper's page: a file it made, mapped for writing, that other
/// processes map to read the time (see [the page](crate::keeper)).
///
/// ```no_run
/// let keeper = timehands::keeper::Keeper::create("/run/timehands/page".as_ref())?;
/// loop {
///     keeper.sleep_until_due();
///     if let Err(not_yet) = keeper.publish() {
///         eprintln!("not yet: {not_yet}");
///     }
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Keeper {
    page: &'static Page,
    path: PathBuf,
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
        }
    }
}

impl Keeper {
    /// Makes the page at `path`: its directory first (mode 0755, so that a
    /// container can bind-mount it before a keeper runs), then the file,
    /// written whole under another name and renamed over whatever was
    /// there (mode 0644: only this user writes it), so that no reader ever
    /// maps a page half made, and readers of an older one find it stale.
    /// This process keeps its own clock from now on.
    pub fn create(path: &Path) -> io::Result<Keeper> {
        super::keep_own_clock();
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)?;
        }
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
        fs::rename(&fresh, path)?;
        Ok(Keeper {
            page,
            path: path.to_owned(),
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
        let due = clock().readers_timekeeper().promised().due_nanos;
        sleep_until(due.saturating_sub(EARLY_NS));
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
        let at_end = bound.at(promised.end_nanos);
        if at_end > COARSE_SLACK.as_nanos() as u64 {
            return Err(NotYet::Bound(at_end));
        }
        if let Some(published) = self.page.newest() {
            let read_up_to = published
                .nanos_at(promised.base)
                .unwrap_or(published.end_ns);
            if promised.base_nanos < read_up_to {
                return Err(NotYet::Behind(read_up_to - promised.base_nanos));
            }
        }
        let (boottime, tai) = (clock.boottime_offset.load(Ordering::Relaxed), clock.tai());
        self.page.header.read.store(
            match tsc.ordered_read() {
                OrderedRead::Rdtscp => READ_RDTSCP,
                OrderedRead::LfenceRdtsc => READ_LFENCE_RDTSC,
            },
            Ordering::Relaxed,
        );
        self.page.publish(&Hands {
            segments: promised.segments,
            realtime: promised.realtime_nanos,
            boottime,
            tai,
            end_ns: promised.end_nanos,
            bound_ns: bound.ns,
            bound_ppb: bound.ppb,
            bound_since: bound.since,
            realtime_uncertainty: clock.realtime_uncertainty.load(Ordering::Relaxed),
            leap: leap_code(clock.leap()),
            base: promised.base,
        });
        Ok(())
    }
}

/// How long before the due point the keeper winds up: its own reads never
/// stand at the promise (where it would resume from CLOCK_MONOTONIC), and
/// its page's readers have an interval and this much in hand for a late
/// wakeup.
const EARLY_NS: u64 = 1_000_000;

/// Sleeps until CLOCK_MONOTONIC reads `ns` (a signal that interrupts the
/// sleep ends it early: the keeper then publishes early, which is never
/// wrong, as a read finds no windup due before it is).
fn sleep_until(ns: u64) {
    let until = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
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
