//! What the unix families share: `clock_gettime`, the fork handlers and
//! their registration before `main`.

use std::io;

use super::{ForkHandler, KernelClock};

/// Nanoseconds in a second.
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The clock `id` as a `timespec` (`clock_gettime(2)`).
///
/// # Errors
/// The OS's: EINVAL for an id it does not have.
#[inline]
pub fn clock_timespec(id: libc::clockid_t) -> io::Result<libc::timespec> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the OS (or the vDSO) to write.
    if unsafe { libc::clock_gettime(id, &mut ts) } == 0 {
        Ok(ts)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Clock `id` now as whole seconds and nanoseconds, for an `id` the OS has
/// (one of its table's: `clock_gettime` fails for no other reason), with
/// nothing else around the call. A clock before its origin reads 0.
#[inline(always)]
pub(crate) fn clock_now(id: libc::clockid_t) -> (u64, u32) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the OS (or the vDSO) to write.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (u64::try_from(ts.tv_sec).unwrap_or(0), ts.tv_nsec as u32)
}

/// `ts` in nanoseconds: 0 before the clock's origin, `u64::MAX` 584 years
/// after it.
#[inline]
pub fn timespec_nanos(ts: &libc::timespec) -> u64 {
    match u64::try_from(ts.tv_sec) {
        Ok(sec) => sec
            .saturating_mul(NANOS_PER_SEC)
            .saturating_add(ts.tv_nsec as u64),
        Err(_) => 0,
    }
}

/// The clock `id` in nanoseconds since its origin (see [`timespec_nanos`]).
///
/// ```
/// let before = timehands::sys::clock_nanos(libc::CLOCK_MONOTONIC)?;
/// let after = timehands::sys::clock_nanos(libc::CLOCK_MONOTONIC)?;
/// assert!(after >= before);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The OS's: EINVAL for an id it does not have.
#[inline]
pub fn clock_nanos(id: libc::clockid_t) -> io::Result<u64> {
    clock_timespec(id).map(|ts| timespec_nanos(&ts))
}

/// A unix family's ids for `clock_gettime` and names of the OS's clocks,
/// in the order of [`KernelClock`]'s variants.
pub(crate) struct Clocks {
    /// Monotonic, MonotonicRaw, Boottime, Realtime, MonotonicCoarse,
    /// RealtimeCoarse.
    pub(crate) ids: [(libc::clockid_t, &'static str); 6],
}

impl Clocks {
    /// The id and the name of `clock`.
    #[inline]
    pub(crate) fn of(&self, clock: KernelClock) -> (libc::clockid_t, &'static str) {
        self.ids[match clock {
            KernelClock::Monotonic => 0,
            KernelClock::MonotonicRaw => 1,
            KernelClock::Boottime => 2,
            KernelClock::Realtime => 3,
            KernelClock::MonotonicCoarse => 4,
            KernelClock::RealtimeCoarse => 5,
        }]
    }
}

/// `clock` in nanoseconds since its origin: on Linux a vDSO call.
#[inline]
pub(crate) fn kernel_nanos(clock: KernelClock) -> io::Result<u64> {
    clock_nanos(super::family::CLOCKS.of(clock).0)
}

/// How finely `clock` moves (`clock_getres(2)`): for a coarse clock, the
/// kernel's tick, by which its reads lag the precise clock. A clock the OS
/// will not say of is taken to move by the nanosecond.
pub(crate) fn kernel_resolution(clock: KernelClock) -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the OS to write.
    match unsafe { libc::clock_getres(super::family::CLOCKS.of(clock).0, &mut ts) } {
        0 => std::time::Duration::from_nanos(timespec_nanos(&ts).max(1)),
        _ => std::time::Duration::from_nanos(1),
    }
}

/// The OS's name for `clock`.
pub(crate) fn clock_name(clock: KernelClock) -> &'static str {
    super::family::CLOCKS.of(clock).1
}

/// Registers the fork handlers with the C library, which calls them around
/// `fork()` on the forking thread.
pub(crate) fn on_fork(prepare: ForkHandler, parent: ForkHandler, child: ForkHandler) {
    // SAFETY: the handlers are plain functions of this library, which lives
    // as long as the program: Rust's std cannot be unloaded safely (its
    // thread-local destructors), and glibc drops the handlers of a library
    // it unloads. A failure (no memory) leaves fork as unsafe as without
    // them.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// Whether the loader registers the fork handlers before `main`: on ELF
/// systems (`.init_array`) and Apple's (`__mod_init_func`). Elsewhere (AIX's
/// XCOFF, Cygwin's PE) the clock's start registers them. (For the test
/// that the linker kept the entry.)
#[cfg(test)]
pub(crate) const FORK_HANDLERS_BEFORE_MAIN: bool = cfg!(any(
    target_vendor = "apple",
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly",
    target_os = "illumos",
    target_os = "solaris"
));

/// Registers the host clock's fork handlers before `main` (before anything
/// runs, in a program; when it is loaded, in a library `dlopen`ed later): an
/// entry in the loader's list of initializers.
#[cfg(any(
    target_vendor = "apple",
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly",
    target_os = "illumos",
    target_os = "solaris"
))]
#[used]
#[cfg_attr(
    target_vendor = "apple",
    unsafe(link_section = "__DATA,__mod_init_func,mod_init_funcs")
)]
#[cfg_attr(not(target_vendor = "apple"), unsafe(link_section = ".init_array"))]
static REGISTER_BEFORE_MAIN: extern "C" fn() = {
    extern "C" fn register_before_main() {
        crate::host::register_fork_handlers_before_main();
    }
    register_before_main
};
