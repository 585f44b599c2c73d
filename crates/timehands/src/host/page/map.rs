//! Mapping the keeper's page at a process's first read, and the checks
//! that decide whether its time is this process's: who may have written
//! it, what it is, whether it is current, and whether it agrees with the
//! kernel's clocks as this process sees them (a time namespace moves
//! Monotonic and Boottime; the page has the host's).
//!
//! The first read may be a signal handler's, so this allocates nothing:
//! the path and the boot id go into buffers on the stack, and the calls
//! are `open`, `fstat`, `stat`, `mmap`, `read` and `close`.

use std::ffi::CStr;
use std::sync::atomic::Ordering;

use super::layout::{COUNTER_TSC, FILE_SIZE, Hands, MAGIC, Page, READ_RDTSCP, SLOTS, VERSION};
use super::{GIVE_UP_AFTER, Refusal};
use crate::host::kernel_clocks::KernelClock;
use crate::hw::{self, OrderedRead};

/// Where the page is unless `TIMEHANDS_PAGE` names another file.
pub(crate) const DEFAULT_PATH: &str = "/run/timehands/page";

/// Longest path `TIMEHANDS_PAGE` may name.
const PATH_MAX: usize = 256;

/// The page, mapped read-only, and how to read its counter; or why not.
pub(crate) fn map() -> Result<(&'static Page, OrderedRead), Refusal> {
    let mut path = [0u8; PATH_MAX];
    let len = page_path(&mut path)?;
    let page = map_checked(&path[..=len], len)?;
    let read = ordered_read(page);
    // The boot is asked only of a page that disagrees, to say why: three
    // system calls less in every process's first read.
    agrees_with_kernel(page, read).map_err(|why| match why {
        Refusal::Disagrees(_) if !of_this_boot(page) => Refusal::OtherBoot,
        why => why,
    })?;
    Ok((page, read))
}

/// The page's path into `buf`, NUL-terminated; its length.
fn page_path(buf: &mut [u8; PATH_MAX]) -> Result<usize, Refusal> {
    let mut env = [0u8; PATH_MAX];
    let path = crate::os::env_var(c"TIMEHANDS_PAGE", &mut env[..PATH_MAX - 1])
        .unwrap_or(DEFAULT_PATH.as_bytes());
    if path.is_empty() || path.contains(&0) || path.len() >= PATH_MAX {
        return Err(Refusal::BadPath);
    }
    buf[..path.len()].copy_from_slice(path);
    buf[path.len()] = 0;
    Ok(path.len())
}

/// `path` (NUL-terminated, `len` bytes before the NUL) opened, checked for
/// who may write it, mapped, and checked for what it holds.
fn map_checked(path: &[u8], len: usize) -> Result<&'static Page, Refusal> {
    let c_path = CStr::from_bytes_with_nul(path).map_err(|_| Refusal::BadPath)?;
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    // Non-blocking: a FIFO in the page's place must not hold the read up.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        return Err(Refusal::Open(errno()));
    }
    let mapped = owned_by_keeper(fd, path, len).and_then(|()| map_fd(fd));
    // SAFETY: `fd` is ours, opened above; the mapping outlives it.
    unsafe { libc::close(fd) };
    let page = mapped?;
    holds_a_page(page)?;
    Ok(page)
}

/// Whether the file on `fd` may be trusted: a regular file of a page or
/// more, writable by its owner alone, in a directory writable by its owner
/// alone, the file's owner that directory's owner (the keeper's user) or
/// root. Anyone else who could write it could write any time.
fn owned_by_keeper(fd: libc::c_int, path: &[u8], len: usize) -> Result<(), Refusal> {
    let file = fstat(fd)?;
    if file.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Refusal::NotAFile);
    }
    if (file.st_size as u64) < FILE_SIZE as u64 {
        return Err(Refusal::Short(file.st_size as u64));
    }
    if file.st_mode & 0o022 != 0 {
        return Err(Refusal::WritableByOthers);
    }
    let dir = directory_of(path, len)?;
    if dir.st_mode & 0o022 != 0 {
        return Err(Refusal::DirectoryWritableByOthers);
    }
    if file.st_uid != dir.st_uid && file.st_uid != 0 {
        return Err(Refusal::Owner {
            file: file.st_uid,
            directory: dir.st_uid,
        });
    }
    Ok(())
}

/// The status of the directory that holds `path` (the part before its
/// last `/`, or `.`).
fn directory_of(path: &[u8], len: usize) -> Result<libc::stat, Refusal> {
    let mut dir = [0u8; PATH_MAX];
    let cut = match path[..len].iter().rposition(|&b| b == b'/') {
        Some(0) => 1,
        Some(slash) => slash,
        None => {
            dir[0] = b'.';
            1
        }
    };
    if path[..len].contains(&b'/') {
        dir[..cut].copy_from_slice(&path[..cut]);
    }
    let mut status = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a NUL-terminated path (the buffer is zeroed past `cut`);
    // `stat` fills `status` where it returns 0.
    if unsafe { libc::stat(dir.as_ptr().cast(), status.as_mut_ptr()) } != 0 {
        return Err(Refusal::Open(errno()));
    }
    // SAFETY: filled by the successful `stat`.
    Ok(unsafe { status.assume_init() })
}

fn fstat(fd: libc::c_int) -> Result<libc::stat, Refusal> {
    let mut status = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: an open descriptor; `fstat` fills `status` where it returns 0.
    if unsafe { libc::fstat(fd, status.as_mut_ptr()) } != 0 {
        return Err(Refusal::Open(errno()));
    }
    // SAFETY: filled by the successful `fstat`.
    Ok(unsafe { status.assume_init() })
}

/// The file on `fd` mapped read-only and shared: the keeper's stores show
/// in it as it makes them. Never unmapped (a thread may hold the address).
fn map_fd(fd: libc::c_int) -> Result<&'static Page, Refusal> {
    // SAFETY: a fresh mapping of our choosing, read-only, of a file of
    // at least FILE_SIZE bytes (checked above).
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            FILE_SIZE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(Refusal::Open(errno()));
    }
    // SAFETY: page-aligned (more than `Page`'s 64), FILE_SIZE readable
    // bytes (at least `size_of::<Page>()`), never unmapped. `Page` is all
    // atomics, for which any bytes are a value, and which the keeper
    // writes as atomics from its process. A file truncated later faults
    // on a read past its end (SIGBUS): the directory's owner alone can do
    // that, as it alone can write the time.
    Ok(unsafe { &*address.cast::<Page>() })
}

/// Whether the mapped bytes are a page of this layout.
fn holds_a_page(page: &Page) -> Result<(), Refusal> {
    let header = &page.header;
    if header.magic.load(Ordering::Relaxed) != MAGIC {
        return Err(Refusal::NotAPage);
    }
    let version = header.version.load(Ordering::Relaxed);
    if version != VERSION {
        return Err(Refusal::Version(version));
    }
    if header.size.load(Ordering::Relaxed) as usize != size_of::<Page>()
        || header.slots.load(Ordering::Relaxed) as usize != SLOTS
    {
        return Err(Refusal::NotAPage);
    }
    if header.counter.load(Ordering::Relaxed) != COUNTER_TSC {
        return Err(Refusal::Counter(header.counter.load(Ordering::Relaxed)));
    }
    Ok(())
}

/// Whether the page was written in this boot, where `/proc` says the boot.
fn of_this_boot(page: &Page) -> bool {
    let page_boot = page
        .header
        .boot_id
        .each_ref()
        .map(|w| w.load(Ordering::Relaxed));
    boot_id().is_none_or(|boot| boot == page_boot)
}

/// How this process reads the page's counter: as the keeper does, on the
/// same CPUs (CPUID is not asked again: in a VM each leaf traps to the
/// hypervisor, microseconds of a first read).
fn ordered_read(page: &Page) -> OrderedRead {
    match page.header.read.load(Ordering::Relaxed) {
        READ_RDTSCP => OrderedRead::Rdtscp,
        _ => OrderedRead::LfenceRdtsc,
    }
}

/// Tries at the bracket of a counter read between two reads of each of
/// CLOCK_MONOTONIC and CLOCK_BOOTTIME: the tightest counts, so that a
/// preempted one does not.
const BRACKETS: usize = 3;

/// The kernel's clocks read around a counter read: Monotonic outside,
/// Boottime inside, so that each bracket holds the count.
struct Bracket {
    monotonic: (u64, u64),
    boottime: (u64, u64),
    count: u64,
}

impl Bracket {
    fn read(read: OrderedRead) -> Bracket {
        let monotonic = kernel(KernelClock::Monotonic);
        let boottime = kernel(KernelClock::Boottime);
        // SAFETY: `read` is Rdtscp only where the keeper, on this machine's
        // CPUs, found them to have it (`ordered_read`).
        let count = unsafe { hw::read_tsc_ordered(read) };
        crate::host::fork_points::point("page: checked count read, the kernel's clocks not");
        let boottime = (boottime, kernel(KernelClock::Boottime));
        let monotonic = (monotonic, kernel(KernelClock::Monotonic));
        Bracket {
            monotonic,
            boottime,
            count,
        }
    }
}

/// How far `ours` is from the middle of the kernel's `bracket`, and how
/// far it may be: `bound` and the bracket's width (half of it would do,
/// but for the nanoseconds each read rounds off).
fn off_and_allowed(ours: u64, (before, after): (u64, u64), bound: u64) -> (i64, u64) {
    let width = after.saturating_sub(before);
    // Wrapping: the page's words are anybody's numbers.
    let off = (ours as i64).wrapping_sub(before.saturating_add(width / 2) as i64);
    (off, bound.saturating_add(width))
}

/// Whether the page's time now agrees with this process's CLOCK_MONOTONIC
/// and CLOCK_BOOTTIME (so not those of another time namespace): within its
/// stated bound where its newest hands covers now, and where the keeper is
/// late (its hands ended less than [`GIVE_UP_AFTER`] ago: reads go stale
/// until it publishes), within what its rate may have strayed since;
/// Boottime within that, its offset's uncertainty and some slack. A
/// disagreement is the nearest of the tries (the one least preempted).
fn agrees_with_kernel(page: &Page, read: OrderedRead) -> Result<(), Refusal> {
    let mut best: Option<i64> = None;
    for _ in 0..BRACKETS {
        let bracket = Bracket::read(read);
        let hands = page.newest().ok_or(Refusal::Stale)?;
        let now = bracket.monotonic.0;
        let (ours, bound) = match hands.nanos_at(bracket.count) {
            Some(ours) => (ours, super::bound_at(&hands, now)),
            None => stale_line(&hands, bracket.count, now)?,
        };
        let (off, allowed) = off_and_allowed(ours, bracket.monotonic, bound);
        let boottime = ours.saturating_add_signed(hands.boottime);
        let boottime_allowed = bound
            .saturating_add(hands.boottime_uncertainty)
            .saturating_add(BOOTTIME_SLACK_NS);
        let (boottime_off, boottime_allowed) =
            off_and_allowed(boottime, bracket.boottime, boottime_allowed);
        let disagreement = if off.unsigned_abs() > allowed {
            off
        } else if boottime_off.unsigned_abs() > boottime_allowed {
            boottime_off
        } else {
            return Ok(());
        };
        best = Some(best.map_or(disagreement, |b: i64| {
            if disagreement.unsigned_abs() < b.unsigned_abs() {
                disagreement
            } else {
                b
            }
        }));
    }
    Err(Refusal::Disagrees(best.unwrap_or(0)))
}

/// A stale hands' line carried on to `count` (its first segment's rate),
/// and how far that may stray from the truth by Monotonic `now`: the
/// keeper's bound and 1000 ppm of the time since the hands ended (twice a
/// counter's worst rate error), a millisecond at the least. A hands that
/// ended more than [`GIVE_UP_AFTER`] ago but still agrees is a keeper that
/// stopped: [`Refusal::Stale`]. One that does not agree is of another time
/// (a namespace's): [`Refusal::Disagrees`], from the caller.
fn stale_line(hands: &Hands, count: u64, now: u64) -> Result<(u64, u64), Refusal> {
    let ours = hands.segments[0].line_at(count);
    let age = now.saturating_sub(hands.end_ns);
    let strayed = (age / 1_000).max(1_000_000);
    let bound = super::bound_at(hands, now).saturating_add(strayed);
    if ours.abs_diff(now) <= bound && age > GIVE_UP_AFTER.as_nanos() as u64 {
        return Err(Refusal::Stale);
    }
    Ok((ours, bound))
}

/// How far the page's Boottime may stand from CLOCK_BOOTTIME beyond its
/// bound and its offset's uncertainty: the keeper reads that offset
/// between two reads of the kernel's.
const BOOTTIME_SLACK_NS: u64 = 100_000;

fn kernel(clock: KernelClock) -> u64 {
    crate::os::kernel_nanos(clock).unwrap_or(0)
}

/// The kernel's boot id as 16 bytes (two little-endian words, the bytes
/// in the order the text gives them), if `/proc` says it.
pub(crate) fn boot_id() -> Option<[u64; 2]> {
    let mut text = [0u8; 40];
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            c"/proc/sys/kernel/random/boot_id".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: reads into our buffer, at most its length.
    let read = unsafe { libc::read(fd, text.as_mut_ptr().cast(), text.len()) };
    // SAFETY: ours, opened above.
    unsafe { libc::close(fd) };
    parse_boot_id(text.get(..usize::try_from(read).ok()?)?)
}

/// A boot id's text (`8-4-4-4-12` hex digits) as 16 bytes.
fn parse_boot_id(text: &[u8]) -> Option<[u64; 2]> {
    let mut bytes = [0u8; 16];
    let mut digits = text.iter().filter(|&&b| b != b'-' && b != b'\n');
    for byte in &mut bytes {
        let high = (*digits.next()? as char).to_digit(16)?;
        let low = (*digits.next()? as char).to_digit(16)?;
        *byte = (high * 16 + low) as u8;
    }
    let word = |half: &[u8]| u64::from_le_bytes(half.try_into().unwrap_or_default());
    Some([word(&bytes[..8]), word(&bytes[8..])])
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_id_reads_as_its_sixteen_bytes() {
        let id = parse_boot_id(b"0123abcd-4567-89ef-0011-2233445566ff\n").unwrap();
        assert_eq!(
            id[0].to_le_bytes(),
            [0x01, 0x23, 0xab, 0xcd, 0x45, 0x67, 0x89, 0xef]
        );
        assert_eq!(
            id[1].to_le_bytes(),
            [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0xff]
        );
        assert_eq!(parse_boot_id(b"0123"), None);
        assert_eq!(parse_boot_id(b"zz23abcd-4567-89ef-0011-2233445566ff"), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc, which miri does not")]
    fn this_machine_has_a_boot_id() {
        if std::path::Path::new("/proc/sys/kernel/random/boot_id").exists() {
            assert!(boot_id().is_some());
        }
    }
}
