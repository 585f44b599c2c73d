//! Reads in a signal handler at each step of the clock's life: the thread
//! that reaches a named point (`fork_points::signal`) raises a signal on
//! itself, and the handler reads every clock there, on top of the step
//! half done (a start, a windup holding the writer lock, a steering, the
//! kernel's NTP state being asked, the counter being chosen, a hand-over
//! and the readers' move, a fork holding the clock's locks). A handler that waited
//! for its own thread's step would never return: the child half's alarm
//! then ends it, and the test fails.
//!
//! The handler cannot assert (a panic there aborts) nor allocate: it
//! counts what it finds in atomics, which the child half reports once the
//! reading is over. Every read, in the handler or out of it, is checked
//! the same way: within the bound `getres` states of the kernel's clock
//! read around it, and never before a read that happened before it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{fork_and, kernel_now, verdict};
use crate::host::fork_points::signal::SIGNAL;
use crate::os::KernelClock;
use crate::{ClockId, getres, gettime, now, now_coarse, try_gettime};

/// The points a signal is raised at (see `fork_points.rs`).
pub(super) const POINTS: [&str; 11] = [
    "start: building the clock",
    "choice: choosing",
    "kernel: asking the NTP state",
    "windup: following the kernel's rate",
    "windup: wound up, not steered",
    "steering: rate set",
    "choice: made, not handed over",
    "hand-over: retired, no successor",
    "hand-over: successor set, readers not moved",
    "hand-over: due, readers not moved",
    "fork: the clock's locks held",
];

/// The points on the keeper's page (run with a keeper, `page/tests.rs`).
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(miri)))]
pub(in crate::host) const PAGE_POINTS: [&str; 2] =
    ["page: mapping", "page: leaving, readers not moved"];

/// How much stack a handler gets: profilers run theirs on an alternate
/// stack (a thread's own stack may be nearly used up where it is
/// interrupted); 64 KiB, as many give theirs, is room for this test's
/// handler in a debug build (std's own of 8 KiB is not: the handler's
/// frame alone, unoptimized, overflows it; it used some 35 KiB here).
const ALTERNATE_STACK: usize = 64 * 1024;

/// Gives the calling thread an alternate signal stack of
/// [`ALTERNATE_STACK`] (never unmapped: the thread may take a signal until
/// it ends), on which the handler runs (`SA_ONSTACK`): every step a read
/// takes in the handler must fit there, not on the interrupted thread's
/// stack. Below it lies a page no access may touch, so that a handler
/// that outgrew it dies of SIGSEGV, where one on heap memory would
/// overwrite what lies below and fail somewhere else, or hang. A thread
/// given one keeps it (std's own, of 8 KiB, is replaced).
fn alternate_stack() -> Result<(), String> {
    thread_local! {
        static GIVEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if GIVEN.with(|given| given.replace(true)) {
        return Ok(());
    }
    // SAFETY: sysconf reads a constant of the system.
    let guard = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .map_err(|_| "no page size".to_string())?;
    // SAFETY: a fresh anonymous mapping, no file; its address is the
    // kernel's choice.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            guard + ALTERNATE_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the first page of the mapping just made, which nothing uses.
    if unsafe { libc::mprotect(base, guard, libc::PROT_NONE) } != 0 {
        return Err(format!("mprotect: {}", std::io::Error::last_os_error()));
    }
    let alternate = libc::stack_t {
        // SAFETY: within the mapping, past its guard page.
        ss_sp: unsafe { base.cast::<u8>().add(guard) }.cast(),
        ss_flags: 0,
        ss_size: ALTERNATE_STACK,
    };
    // SAFETY: the stack is mapped memory of the size given, and replaces
    // only this thread's alternate stack.
    if unsafe { libc::sigaltstack(&alternate, std::ptr::null_mut()) } != 0 {
        return Err(format!("sigaltstack: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Handlers that returned.
static HANDLED: AtomicU64 = AtomicU64::new(0);
static IN_HANDLER: AtomicU64 = AtomicU64::new(0);
/// Reads checked, and those that failed a check (the first failure's
/// kind and figure are kept).
static CHECKED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);
static FIRST_FAILURE: AtomicU64 = AtomicU64::new(0);
static FIRST_FIGURES: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
/// The latest precise Monotonic, Realtime and coarse Monotonic reads.
static SEEN: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// What a failed check found.
const BACK: u64 = 1;
const OUTSIDE: u64 = 2;
const COARSE_AHEAD: u64 = 3;

/// Counts a failed check; the first one's `kind` and `figures` are kept.
fn fail(kind: u64, figures: [u64; 4]) {
    if FAILED.fetch_add(1, Ordering::Relaxed) == 0 {
        FIRST_FAILURE.store(kind, Ordering::Relaxed);
        for (kept, figure) in FIRST_FIGURES.iter().zip(figures) {
            kept.store(figure, Ordering::Relaxed);
        }
    }
}

/// A read of `read` (Monotonic, or Realtime) checked against the kernel's
/// `kernel` clock around it, with the bound `id`'s `getres` states, and
/// against the latest read `seen` before it began.
fn checked(id: ClockId, kernel: KernelClock, seen: &AtomicU64) -> u64 {
    let stated = || getres(id).accuracy.as_nanos() as u64;
    let floor = seen.load(Ordering::Acquire);
    let bound = stated();
    let before = crate::os::kernel_nanos(kernel).unwrap_or(0);
    let ours = gettime(id).as_nanos() as u64;
    let after = crate::os::kernel_nanos(kernel).unwrap_or(u64::MAX);
    let bound = bound.max(stated());
    CHECKED.fetch_add(1, Ordering::Relaxed);
    // Realtime may be stepped by someone else's settimeofday: only
    // Monotonic is checked for order.
    if id == ClockId::Monotonic && ours < floor {
        fail(BACK, [floor, ours, 0, 0]);
    }
    if ours + bound < before || ours > after.saturating_add(bound) {
        fail(
            OUTSIDE,
            [
                before,
                ours,
                after,
                bound
                    + IN_HANDLER.load(Ordering::Relaxed) * 1_000_000_000_000
                    + if id == ClockId::Realtime {
                        1_000_000_000_000_000
                    } else {
                        0
                    },
            ],
        );
    }
    seen.fetch_max(ours, Ordering::AcqRel);
    ours
}

/// Every read checked, as the handler and the reading threads make them.
fn read_everything() {
    checked(ClockId::Monotonic, KernelClock::Monotonic, &SEEN[0]);
    checked(ClockId::Realtime, KernelClock::Realtime, &SEEN[1]);
    // The coarse clock: never ahead of a precise read after it, never
    // before a coarse read that happened before it.
    let floor = SEEN[2].load(Ordering::Acquire);
    let coarse = now_coarse().as_nanos();
    if coarse < floor {
        fail(BACK, [floor, coarse, 0, 0]);
    }
    let after = now().as_nanos();
    if coarse > after {
        fail(COARSE_AHEAD, [coarse, after, 0, 0]);
    }
    SEEN[2].fetch_max(coarse, Ordering::AcqRel);
    // The rest of the read API, which must return.
    for id in ClockId::ALL {
        gettime(id);
        getres(id);
        try_gettime(id);
    }
    crate::now_unordered();
    crate::now_coherent();
    crate::now_coarse_coherent();
    crate::Instant::now();
    let _ = crate::realtime_bounds();
}

/// Where the child half stands, for [`hung`]: reading, waiting for its
/// forked child, or letting its reads settle.
static PHASE: AtomicU64 = AtomicU64::new(0);
const PHASES: [&str; 3] = ["reading", "waiting for the forked child", "settling"];

/// The alarm's handler: says where the half hung (a CI run found one hung
/// past its 20 s once, with nothing said), then dies of the alarm.
extern "C" fn hung(_: libc::c_int) {
    let phase = PHASES.get(PHASE.load(Ordering::Relaxed) as usize);
    let said = crate::host::text::text!(
        "HUNG while {}: {} handlers returned, {} under way; {} reads checked\n",
        phase.unwrap_or(&"?"),
        HANDLED.load(Ordering::Relaxed),
        IN_HANDLER.load(Ordering::Relaxed),
        CHECKED.load(Ordering::Relaxed),
    );
    let said = said.as_str();
    // SAFETY: write(2) and signal(2) are async-signal-safe; the alarm's
    // default action then ends the process as the test expects.
    unsafe {
        libc::write(libc::STDERR_FILENO, said.as_ptr().cast(), said.len());
        libc::signal(libc::SIGALRM, libc::SIG_DFL);
        libc::raise(libc::SIGALRM);
    }
}

extern "C" fn handler(_: libc::c_int) {
    IN_HANDLER.fetch_add(1, Ordering::Relaxed);
    read_everything();
    IN_HANDLER.fetch_sub(1, Ordering::Relaxed);
    HANDLED.fetch_add(1, Ordering::Release);
}

/// The child half: reads from its first read on, on two threads, for
/// 200 ms, then forks (the forked child checks its clock); the signal
/// comes wherever the point its environment names is reached. With
/// `first-read-alone`, this thread makes the first read (and so the
/// clock's start) before the other starts; with `page`, the two read for
/// 1000 ms (the test stops the keeper meanwhile), and a process that reads
/// the page still does not fork (`page/tests.rs` forks its readers). Passes
/// if the point was reached, every handler returned, and every read
/// passed its checks.
pub(in crate::host) fn reads_in_a_handler_at_the_point(how: Option<&str>) -> Result<(), String> {
    super::on_signal(SIGNAL, handler)?;
    super::on_signal(libc::SIGALRM, hung)?;
    // SAFETY: alarm(2) only arms a timer; its SIGALRM ends a half that hangs.
    unsafe { libc::alarm(20) };
    let reading = |ms: u64| {
        alternate_stack()?;
        let start = kernel_now();
        while kernel_now() - start < ms * 1_000_000 {
            read_everything();
        }
        Ok::<(), String>(())
    };
    let ms = match how {
        None => 200,
        Some("first-read-alone") => {
            alternate_stack()?;
            read_everything();
            200
        }
        Some("page") => 1000,
        Some(other) => return Err(format!("unknown way to read: {other}")),
    };
    std::thread::scope(|s| {
        let other = s.spawn(|| reading(ms));
        reading(ms)?;
        other
            .join()
            .map_err(|_| "a reading thread panicked".to_string())?
    })?;
    // Where fork is not to be had (qemu-user aborts on one in a process
    // with threads), the point in the fork is not reached: said below.
    let forks = super::no_fork().is_none() && crate::host::page::reading().is_none();
    if forks {
        PHASE.store(1, Ordering::Relaxed);
        verdict(fork_and(super::check_forked_child))?;
    }
    // A windup of the readers' still under way: let it settle.
    PHASE.store(2, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(10));
    let (handled, checked, failed) = (
        HANDLED.load(Ordering::Acquire),
        CHECKED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    );
    println!("{handled} handlers returned; {checked} reads checked, {failed} failed");
    if failed > 0 {
        let [a, b, c, d] = FIRST_FIGURES.each_ref().map(|f| f.load(Ordering::Relaxed));
        let what = match FIRST_FAILURE.load(Ordering::Relaxed) {
            BACK => format!("a read of {b} ns after one of {a}"),
            OUTSIDE => format!("a read of {b} ns between the kernel's {a} and {c}, bound {d}"),
            _ => format!("a coarse read of {a} ns ahead of a precise one after it, {b}"),
        };
        return Err(format!("{failed} of {checked} reads failed, first {what}"));
    }
    if handled == 0 {
        let moved = crate::info().counter != crate::CounterKind::Kernel;
        let point = std::env::var(crate::host::fork_points::signal::SIGNAL_AT).unwrap_or_default();
        if !moved && (point.starts_with("choice") || point.starts_with("hand-over")) {
            println!("skipped: the clock stays on the kernel's here, so there is no {point}");
            return Ok(());
        }
        if !forks && point.starts_with("fork") {
            println!("skipped: no fork here, so there is no {point}");
            return Ok(());
        }
        return Err("the point was not reached: nothing was tested".to_string());
    }
    Ok(())
}
