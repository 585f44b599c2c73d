//! The clocks the tools measure: timehands' readers, the kernel's clocks of
//! `clock_gettime(2)` they stand in for, and `std::time::Instant`.
//!
//! Every clock reads as nanoseconds since its own origin, which for each of
//! ours is the origin of the kernel clock of the same name ([`Clock::kernel_twin`]):
//! that is what lets `report` and `track` compare a reading of ours with the
//! kernel's directly.
//!
//! The kernel's clocks are the OS's own, by the OS's names ([`KernelClock`]:
//! on Linux those of `clock_gettime(2)`, on macOS CLOCK_UPTIME_RAW and its
//! kin, on Windows QueryPerformanceCounter). The coarse ones, the value at
//! the last tick, are Linux's and FreeBSD's (which gives its `_FAST` clocks
//! Linux's names too), and exist only there.

use std::hint::black_box;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use timehands::ClockId;
use timehands::sys::KernelClock;

/// Declares [`Clock`] and [`Clock::time_calls`] from one list, so that every
/// clock has its own timing loop.
/// A clock with a `#[cfg(..)]` exists only there.
macro_rules! clocks {
    ($($(#[doc = $doc:literal])* $(#[cfg($cfg:meta)])? $clock:ident,)*) => {
        /// A clock, by the name `--clocks` takes.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
        pub enum Clock {
            $($(#[doc = $doc])* $(#[cfg($cfg)])? $clock,)*
        }

        impl Clock {
            /// How long `calls` readings back to back take.
            pub fn time_calls(self, calls: u64) -> Duration {
                // The clock is a constant in each loop, so that what is timed
                // is the call itself and not a branch on which clock it is.
                match self {
                    $($(#[cfg($cfg)])? Clock::$clock => repeat(calls, || Clock::$clock.read_ns()),)*
                }
            }

            /// Of `calls` readings back to back, how many came more than
            /// `above` ns after the one before.
            pub fn slow_calls(self, calls: u64, above: u64) -> u64 {
                match self {
                    $($(#[cfg($cfg)])? Clock::$clock => count_slow(calls, above, || Clock::$clock.read_ns()),)*
                }
            }
        }
    };
}

clocks! {
    /// `timehands::now()`: ordered, on CLOCK_MONOTONIC's origin.
    Now,
    /// `timehands::now_unordered()`: the opt-in unordered read.
    NowUnordered,
    /// `timehands::now_coarse()`: the value at the last windup.
    NowCoarse,
    /// `timehands::gettime(ClockId::Realtime)`.
    GettimeRealtime,
    /// `timehands::gettime(ClockId::Boottime)`.
    GettimeBoottime,
    /// `timehands::gettime(ClockId::RealtimeCoarse)`.
    GettimeRealtimeCoarse,
    /// The kernel's monotonic clock (Linux's CLOCK_MONOTONIC, from the vDSO).
    KernelMonotonic,
    /// The kernel's realtime clock (Linux's CLOCK_REALTIME).
    KernelRealtime,
    /// The kernel's unsteered clock (Linux's CLOCK_MONOTONIC_RAW).
    KernelMonotonicRaw,
    /// The kernel's clock that counts suspend (Linux's CLOCK_BOOTTIME).
    KernelBoottime,
    /// The kernel's CLOCK_MONOTONIC_COARSE.
    #[cfg(any(target_os = "linux", target_os = "freebsd"))]
    KernelMonotonicCoarse,
    /// The kernel's CLOCK_REALTIME_COARSE.
    #[cfg(any(target_os = "linux", target_os = "freebsd"))]
    KernelRealtimeCoarse,
    /// `std::time::Instant::now()`.
    StdInstant,
}

impl Clock {
    /// Every clock, less the kernel's that this OS reads as another (macOS's
    /// MonotonicRaw is its Monotonic, Windows' three are one counter): the
    /// clocks `bench` and `report` measure unless told which.
    pub fn every_here() -> Vec<Clock> {
        let mut clocks: Vec<Clock> = Vec::new();
        for &clock in Clock::value_variants() {
            let named = |c: &Clock| c.family() == Family::Kernel && c.label() == clock.label();
            if !clocks.iter().any(named) {
                clocks.push(clock);
            }
        }
        clocks
    }

    /// The name `--clocks` takes, which also names `bench --raw`'s files.
    pub fn key(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// The name tables and plots show: the call as a program writes it.
    pub fn label(self) -> &'static str {
        match self {
            Clock::Now => "timehands now()",
            Clock::NowUnordered => "timehands now_unordered()",
            Clock::NowCoarse => "timehands now_coarse()",
            Clock::GettimeRealtime => "timehands gettime(Realtime)",
            Clock::GettimeBoottime => "timehands gettime(Boottime)",
            Clock::GettimeRealtimeCoarse => "timehands gettime(RealtimeCoarse)",
            Clock::KernelMonotonic => KernelClock::Monotonic.name(),
            Clock::KernelRealtime => KernelClock::Realtime.name(),
            Clock::KernelMonotonicRaw => KernelClock::MonotonicRaw.name(),
            Clock::KernelBoottime => KernelClock::Boottime.name(),
            #[cfg(any(target_os = "linux", target_os = "freebsd"))]
            Clock::KernelMonotonicCoarse => "CLOCK_MONOTONIC_COARSE",
            #[cfg(any(target_os = "linux", target_os = "freebsd"))]
            Clock::KernelRealtimeCoarse => "CLOCK_REALTIME_COARSE",
            Clock::StdInstant => "std Instant::now()",
        }
    }

    /// The kernel clock this one stands in for, with the same origin; `None`
    /// for the kernel's own clocks, and for the coarse ones of ours where
    /// the kernel has none. `std::time::Instant` is the kernel's monotonic
    /// clock underneath, so it is checked against it too.
    pub fn kernel_twin(self) -> Option<Clock> {
        match self {
            Clock::Now | Clock::NowUnordered | Clock::StdInstant => Some(Clock::KernelMonotonic),
            Clock::GettimeRealtime => Some(Clock::KernelRealtime),
            Clock::GettimeBoottime => Some(Clock::KernelBoottime),
            #[cfg(any(target_os = "linux", target_os = "freebsd"))]
            Clock::NowCoarse => Some(Clock::KernelMonotonicCoarse),
            #[cfg(any(target_os = "linux", target_os = "freebsd"))]
            Clock::GettimeRealtimeCoarse => Some(Clock::KernelRealtimeCoarse),
            _ => None,
        }
    }

    /// Whose clock it is: ours, the kernel's, or std's.
    pub fn family(self) -> Family {
        match self {
            Clock::Now
            | Clock::NowUnordered
            | Clock::NowCoarse
            | Clock::GettimeRealtime
            | Clock::GettimeBoottime
            | Clock::GettimeRealtimeCoarse => Family::Timehands,
            Clock::StdInstant => Family::Std,
            _ => Family::Kernel,
        }
    }

    /// The clock `--clocks` names `key`.
    pub fn from_key(key: &str) -> Option<Clock> {
        Clock::from_str(key, true).ok()
    }

    /// Whether the clock reads a value kept at a tick rather than a counter.
    pub fn is_coarse(self) -> bool {
        match self {
            Clock::NowCoarse | Clock::GettimeRealtimeCoarse => true,
            #[cfg(any(target_os = "linux", target_os = "freebsd"))]
            Clock::KernelMonotonicCoarse | Clock::KernelRealtimeCoarse => true,
            _ => false,
        }
    }

    /// One reading, in nanoseconds since the clock's origin.
    #[inline(always)]
    pub fn read_ns(self) -> u64 {
        match self {
            Clock::Now => timehands::now().as_nanos(),
            Clock::NowUnordered => timehands::now_unordered().as_nanos(),
            Clock::NowCoarse => timehands::now_coarse().as_nanos(),
            Clock::GettimeRealtime => nanos(timehands::gettime(ClockId::Realtime)),
            Clock::GettimeBoottime => nanos(timehands::gettime(ClockId::Boottime)),
            Clock::GettimeRealtimeCoarse => nanos(timehands::gettime(ClockId::RealtimeCoarse)),
            Clock::KernelMonotonic => kernel_ns(KernelClock::Monotonic),
            Clock::KernelRealtime => kernel_ns(KernelClock::Realtime),
            Clock::KernelMonotonicRaw => kernel_ns(KernelClock::MonotonicRaw),
            Clock::KernelBoottime => kernel_ns(KernelClock::Boottime),
            #[cfg(any(target_os = "linux", target_os = "freebsd"))]
            Clock::KernelMonotonicCoarse => clock_gettime_ns(libc::CLOCK_MONOTONIC_COARSE),
            #[cfg(any(target_os = "linux", target_os = "freebsd"))]
            Clock::KernelRealtimeCoarse => clock_gettime_ns(libc::CLOCK_REALTIME_COARSE),
            // Exact: timehands' Instant is the kernel's monotonic nanoseconds.
            Clock::StdInstant => timehands::Instant::from(Instant::now()).as_nanos(),
        }
    }
}

/// Whose a clock is, as plots tell them apart by colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// timehands' (ours).
    Timehands,
    /// The kernel's (on Linux through the vDSO).
    Kernel,
    /// Rust's standard library's.
    Std,
}

impl Family {
    /// Every family, in the order of [`Family::index`].
    pub const ALL: [Family; 3] = [Family::Timehands, Family::Kernel, Family::Std];

    /// The legend's name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Timehands => "timehands (ours)",
            // Windows' clocks are calls of their own names.
            Family::Kernel if cfg!(windows) => "the kernel's",
            Family::Kernel => "the kernel's (clock_gettime)",
            Family::Std => "std",
        }
    }

    /// The family's place in [`Family::ALL`], which is its plot group.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The clocks a `--clocks` list asks for, each once, in the order first
/// named; every clock when the list is empty.
pub fn chosen<T: ValueEnum + PartialEq + Copy>(asked: &[T]) -> Vec<T> {
    if asked.is_empty() {
        return T::value_variants().to_vec();
    }
    let mut clocks: Vec<T> = Vec::with_capacity(asked.len());
    for &clock in asked {
        if !clocks.contains(&clock) {
            clocks.push(clock);
        }
    }
    clocks
}

/// The CPU time the calling thread has used.
#[cfg(unix)]
pub fn thread_cpu_time() -> Duration {
    Duration::from_nanos(
        timehands::sys::clock_nanos(libc::CLOCK_THREAD_CPUTIME_ID)
            .expect("a clock every unix timehands runs on has"),
    )
}

/// The CPU time the calling thread has used: its kernel and user times from
/// `GetThreadTimes`, in 100 ns units.
#[cfg(windows)]
pub fn thread_cpu_time() -> Duration {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentThread, GetThreadTimes};

    let ticks = |t: FILETIME| u64::from(t.dwHighDateTime) << 32 | u64::from(t.dwLowDateTime);
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: the pseudo-handle of the calling thread is always valid, and the
    // four pointers are to live FILETIMEs for the call to write.
    let read = unsafe {
        GetThreadTimes(
            GetCurrentThread(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    // Only a bad handle fails, and this thread's is always good.
    debug_assert_ne!(read, 0, "GetThreadTimes of the calling thread");
    Duration::from_nanos((ticks(kernel) + ticks(user)).saturating_mul(100))
}

/// Times `calls` calls of `read`, inlined into the loop as a user's code would
/// have it; `black_box` keeps the reads from being optimised away.
fn repeat(calls: u64, read: impl Fn() -> u64) -> Duration {
    let start = Instant::now();
    for _ in 0..calls {
        black_box(read());
    }
    start.elapsed()
}

fn count_slow(calls: u64, above: u64, read: impl Fn() -> u64) -> u64 {
    let mut last = read();
    let mut slow = 0;
    for _ in 0..calls {
        let now = read();
        slow += u64::from(now.wrapping_sub(last) > above);
        last = now;
    }
    slow
}

fn nanos(d: Duration) -> u64 {
    // As the kernel's clocks' timespec is turned into ns (see `kernel_ns`),
    // so that the two are compared doing the same work after the read.
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// The kernel's clock `clock` in nanoseconds.
#[inline(always)]
fn kernel_ns(clock: KernelClock) -> u64 {
    // Each is a clock the OS always has.
    timehands::sys::kernel_nanos(clock).expect("a clock every OS timehands runs on has")
}

/// `clock_gettime(id)` in nanoseconds, for the coarse clocks.
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
#[inline(always)]
fn clock_gettime_ns(id: libc::clockid_t) -> u64 {
    // Every id passed is one of libc's constants, which the OS always has.
    timehands::sys::clock_nanos(id).expect("a clock every Linux and FreeBSD has")
}
