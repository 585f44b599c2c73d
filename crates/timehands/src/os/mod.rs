//! The operating system's boundary: everything the clock and its tools ask
//! of the OS, behind one interface, one file per OS family.
//!
//! | file | OSes |
//! |---|---|
//! | `linux.rs` | Linux (glibc, musl), Android |
//! | `apple.rs` | macOS, iOS and the other Apple OSes |
//! | `windows.rs` | Windows |
//! | `bsd.rs` | FreeBSD, NetBSD, OpenBSD, DragonFly |
//! | `unix.rs` | other unix: illumos, Solaris, Haiku, AIX, … |
//! | `fallback.rs` | anything else (wasm32-wasip1): std alone |
//!
//! `posix.rs` holds what the unix families share (`clock_gettime`,
//! `pthread_atfork`), `sched.rs` POSIX real-time scheduling, `cpu_mask.rs`
//! the CPU masks of the affinity calls, `ntp_model.rs` the kernel NTP
//! model's numbers and `ntp_gettime`, and `absent.rs` what a family lacks
//! (each error names the OS). Each family's file provides the same items:
//!
//! - `kernel_nanos(KernelClock)`, `kernel_resolution(KernelClock)` and
//!   `clock_name(KernelClock)`: the OS's clocks, in nanoseconds since their
//!   origin, and how finely each moves;
//! - `ntp()`: the OS's NTP state, or an error naming the OS;
//! - `tai_minus_utc()`: TAI − UTC as the OS's clocks read it, where it has
//!   a clock of TAI (Linux's CLOCK_TAI);
//! - `allowed_cpus()`, `process_cpus()`, `pin_to_cpus()`, `current_cpu()`:
//!   where a thread runs, or an error naming the OS;
//! - `set_scheduling(Policy, priority)` and `set_minimal_timer_slack()`;
//! - `kernel_rate()` and `set_kernel_rate(KernelRate)`: the kernel clock's
//!   tick and frequency (Linux's `adjtimex`), or an error naming the OS;
//! - `on_fork(prepare, parent, child)`: the `pthread_atfork` handlers, and
//!   their registration before `main`; nothing where there is no `fork`;
//!
//! The host clock and the engine hold no `cfg(target_os)`: what differs
//! between OSes is here, and [`crate::sys`] shows it to the tools.

// One family's file, as the table above says.
#[cfg_attr(any(target_os = "linux", target_os = "android"), path = "linux.rs")]
#[cfg_attr(target_vendor = "apple", path = "apple.rs")]
#[cfg_attr(windows, path = "windows.rs")]
#[cfg_attr(
    any(
        target_os = "freebsd",
        target_os = "netbsd",
        target_os = "openbsd",
        target_os = "dragonfly"
    ),
    path = "bsd.rs"
)]
#[cfg_attr(
    all(
        unix,
        not(any(
            target_os = "linux",
            target_os = "android",
            target_vendor = "apple",
            target_os = "freebsd",
            target_os = "netbsd",
            target_os = "openbsd",
            target_os = "dragonfly"
        ))
    ),
    path = "unix.rs"
)]
#[cfg_attr(not(any(unix, windows)), path = "fallback.rs")]
mod family;

#[cfg(any(miri, not(any(target_os = "linux", target_os = "android"))))]
#[allow(dead_code)]
mod absent;
#[cfg(unix)]
pub(crate) mod posix;

// The pieces a few families share, compiled where one uses them.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "dragonfly",
    windows
))]
mod cpu_mask;
#[cfg(any(
    target_os = "linux",
    target_vendor = "apple",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "dragonfly",
    target_os = "illumos",
    target_os = "solaris"
))]
mod ntp_model;
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "dragonfly"
))]
mod sched;

#[cfg(target_os = "linux")]
pub(crate) use family::ntp_errno;

/// The OS's NTP state, a refusal allocating nothing where the OS's call
/// gives an errno (Linux's `adjtimex`); elsewhere [`ntp`], whose refusal
/// names the OS.
pub(crate) fn ntp_quietly() -> std::io::Result<NtpState> {
    #[cfg(target_os = "linux")]
    {
        ntp_errno()
    }
    #[cfg(not(target_os = "linux"))]
    {
        ntp()
    }
}
/// The environment variable `name`, copied into `buf` (`None` where it is
/// not set, or longer than `buf`), allocating nothing and taking no lock:
/// the counter choice reads `TIMEHANDS_COUNTER` in whichever read makes it,
/// a signal handler's maybe (std's `env::var` takes its environment lock
/// and allocates).
pub(crate) fn env_var<'a>(name: &std::ffi::CStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    #[cfg(unix)]
    // SAFETY: `name` is a C string; `getenv` returns null or a C string of
    // the environment, read here at once (as every C library reads it).
    let value = unsafe {
        let value = libc::getenv(name.as_ptr());
        (!value.is_null()).then(|| std::ffi::CStr::from_ptr(value).to_bytes())
    };
    #[cfg(not(unix))]
    let owned = std::env::var_os(name.to_str().ok()?);
    #[cfg(not(unix))]
    let value = owned.as_ref().map(|v| v.as_encoded_bytes());
    let value = value?;
    let copy = buf.get_mut(..value.len())?;
    copy.copy_from_slice(value);
    Some(copy)
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
pub(crate) use family::refuse_threads_and_ntp;
pub(crate) use family::{
    allowed_cpus, clock_name, current_cpu, kernel_nanos, kernel_resolution, ntp, on_fork,
    pin_to_cpus, process_cpus, set_minimal_timer_slack, set_scheduling,
};
pub(crate) use family::{kernel_rate, set_kernel_rate, tai_minus_utc};

/// The OS's coarse clock `clock` (`MonotonicCoarse`, `RealtimeCoarse`) as
/// whole seconds and nanoseconds: the one call a coarse read makes, inlined
/// into it (on unix, `clock_gettime` and nothing around it: the coarse
/// read costs what the kernel's does). Elsewhere the OS's clock of that
/// name, split.
#[inline(always)]
pub(crate) fn kernel_coarse(clock: KernelClock) -> (u64, u32) {
    #[cfg(unix)]
    {
        posix::clock_now(family::CLOCKS.of(clock).0)
    }
    #[cfg(not(unix))]
    {
        let ns = family::kernel_nanos(clock).unwrap_or(0);
        (ns / 1_000_000_000, (ns % 1_000_000_000) as u32)
    }
}

/// The OS's clocks, as the host clock follows them. What each is on each OS
/// is in the table of the repository's `docs/platforms.md`; in short:
///
/// ```
/// use timehands::sys::{KernelClock, kernel_nanos};
///
/// let before = kernel_nanos(KernelClock::Monotonic)?;
/// let after = kernel_nanos(KernelClock::Monotonic)?;
/// assert!(after >= before);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelClock {
    /// The clock `std::time::Instant` reads on this OS: CLOCK_MONOTONIC on
    /// Linux and the BSDs, CLOCK_UPTIME_RAW on Apple, QueryPerformanceCounter
    /// on Windows.
    Monotonic,
    /// Monotonic at its source's own rate, never slewed by NTP, where the OS
    /// has such a clock (CLOCK_MONOTONIC_RAW on Linux); Monotonic elsewhere.
    MonotonicRaw,
    /// Monotonic plus the time the machine was suspended: CLOCK_BOOTTIME on
    /// Linux and OpenBSD, CLOCK_MONOTONIC_RAW (mach_continuous_time) on
    /// Apple, QueryPerformanceCounter on Windows (which counts suspend
    /// itself); Monotonic where the OS has no such clock (FreeBSD, NetBSD,
    /// DragonFly, illumos).
    Boottime,
    /// The OS's UTC, since the Unix epoch: CLOCK_REALTIME, or
    /// GetSystemTimePreciseAsFileTime on Windows.
    Realtime,
    /// Monotonic as of the kernel's last tick, where the OS keeps such a
    /// clock (CLOCK_MONOTONIC_COARSE on Linux, CLOCK_MONOTONIC_FAST on
    /// FreeBSD and DragonFly): no counter read. Monotonic elsewhere.
    MonotonicCoarse,
    /// Realtime as of the kernel's last tick (CLOCK_REALTIME_COARSE,
    /// CLOCK_REALTIME_FAST); Realtime elsewhere.
    RealtimeCoarse,
}

impl KernelClock {
    /// The OS's name for the clock, such as `"CLOCK_MONOTONIC"`.
    pub fn name(self) -> &'static str {
        clock_name(self)
    }
}

/// The rate of the kernel's clock as an NTP daemon sets it, on Linux
/// (`adjtimex(2)`): the length of a tick and a frequency offset. Its rate
/// against the nominal one is their product ([`KernelRate::rate_ppb`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelRate {
    /// Microseconds a USER_HZ tick adds: 10 000 nominal, 9 000 to 11 000
    /// allowed (chrony slews at 10 833).
    pub tick_us: i64,
    /// The frequency offset in ppm scaled by 2^16, within ±500 ppm.
    pub frequency: i64,
}

impl KernelRate {
    /// The nominal rate: ticks of 10 000 µs, no frequency offset.
    pub const NOMINAL: KernelRate = KernelRate {
        tick_us: 10_000,
        frequency: 0,
    };

    /// How far the clock runs from its nominal rate, in ppb: the tick's
    /// share and the frequency's add (Linux adds them to a second's length).
    pub fn rate_ppb(&self) -> i64 {
        (self.tick_us - 10_000) * 100_000 + self.frequency * 1_000 / 65_536
    }

    /// The rate `ppb` from nominal: through the tick, in its steps of 100
    /// ppm, and the rest through the frequency.
    pub fn of_ppb(ppb: i64) -> KernelRate {
        let tick_us = 10_000 + ppb.div_euclid(100_000);
        let rest_ppb = ppb - (tick_us - 10_000) * 100_000;
        KernelRate {
            tick_us,
            frequency: rest_ppb * 65_536 / 1_000,
        }
    }
}

/// A real-time scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_FIFO: runs until it blocks or a higher priority comes.
    Fifo,
    /// SCHED_RR: SCHED_FIFO with a time slice among equal priorities.
    RoundRobin,
}

impl Policy {
    /// The policy's name, as `chrt` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "SCHED_FIFO",
            Policy::RoundRobin => "SCHED_RR",
        }
    }
}

/// The leap second the kernel has announced for the end of the UTC day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum LeapSecond {
    /// None announced.
    None,
    /// 23:59:60 will be inserted: the kernel's Realtime repeats a second.
    Insert,
    /// 23:59:59 will be deleted: the kernel's Realtime skips a second.
    Delete,
    /// A leap second is being inserted now.
    InProgress,
}

impl LeapSecond {
    /// The leap second as one number, 0 to 3 in the order above: how the
    /// clock keeps it in an atomic, and the keeper's page in a word.
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    /// The leap second of [`code`](LeapSecond::code) `code` (none for any
    /// other number).
    pub(crate) fn from_code(code: u64) -> LeapSecond {
        match code {
            1 => LeapSecond::Insert,
            2 => LeapSecond::Delete,
            3 => LeapSecond::InProgress,
            _ => LeapSecond::None,
        }
    }
}

/// What the kernel's NTP state says of its synchronization
/// (`adjtimex(2)` on Linux, `ntp_gettime(2)` on Apple and the BSDs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NtpState {
    /// Whether an NTP daemon keeps the kernel synchronized (not STA_UNSYNC,
    /// not TIME_ERROR).
    pub synchronized: bool,
    /// The kernel's bound on |Realtime − UTC|, in µs, growing at 500 ppm
    /// between the daemon's updates.
    pub maxerror_us: u64,
    /// The daemon's estimate of that error, in µs.
    pub esterror_us: u64,
    /// TAI − UTC in seconds (0 where no daemon set it).
    pub tai_offset_s: i32,
    /// The leap second announced.
    pub leap: LeapSecond,
    /// How far the kernel's clock runs from its nominal rate, in ppb, as
    /// the kernel says (Linux: its tick length and frequency, which an NTP
    /// daemon sets, chrony slewing through the tick); `None` where the OS
    /// does not say.
    pub rate_ppb: Option<i64>,
}

/// The OS's last error (errno, GetLastError), with the `call` that failed
/// named in front of it.
#[cfg(any(unix, windows))]
pub(crate) fn last_error(call: &str) -> std::io::Error {
    let error = std::io::Error::last_os_error();
    std::io::Error::new(error.kind(), format!("{call}: {error}"))
}

/// The error for what this OS does not have: one line naming `what` and
/// the OS. (Linux has everything asked of it, but under miri, which has no
/// timerfd.)
#[cfg(any(miri, not(target_os = "linux")))]
pub(crate) fn unsupported(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("{what} is not available on {}", std::env::consts::OS),
    )
}

/// For the process tests: a sandbox (a seccomp filter) that refuses new
/// threads and the NTP state, where this crate knows how to build one.
#[cfg(all(test, unix, target_arch = "x86_64", not(target_os = "linux")))]
pub(crate) fn refuse_threads_and_ntp() -> std::io::Result<()> {
    Err(unsupported("a sandbox for the tests"))
}

/// A handler `on_fork` registers: the host clock's `prepare`, `parent` and
/// `child`.
pub(crate) type ForkHandler = extern "C" fn();

#[cfg(test)]
mod tests;
