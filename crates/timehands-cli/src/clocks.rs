//! The clocks the tools measure: timehands' readers, the kernel's clocks of
//! `clock_gettime(2)` they stand in for, and `std::time::Instant`.
//!
//! Every clock reads as nanoseconds since its own origin, which for each of
//! ours is the origin of the kernel clock of the same name ([`Clock::kernel_twin`]):
//! that is what lets `report` and `track` compare a reading of ours with the
//! kernel's directly.

use std::hint::black_box;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use timehands::ClockId;

/// Declares [`Clock`] and [`Clock::time_calls`] from one list, so that every
/// clock has its own timing loop.
macro_rules! clocks {
    ($($(#[doc = $doc:literal])* $clock:ident,)*) => {
        /// A clock, by the name `--clocks` takes.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
        pub enum Clock {
            $($(#[doc = $doc])* $clock,)*
        }

        impl Clock {
            /// How long `calls` readings back to back take.
            pub fn time_calls(self, calls: u64) -> Duration {
                // The clock is a constant in each loop, so that what is timed
                // is the call itself and not a branch on which clock it is.
                match self {
                    $(Clock::$clock => repeat(calls, || Clock::$clock.read_ns()),)*
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
    /// The kernel's CLOCK_MONOTONIC (vDSO).
    KernelMonotonic,
    /// The kernel's CLOCK_REALTIME.
    KernelRealtime,
    /// The kernel's CLOCK_MONOTONIC_RAW.
    KernelMonotonicRaw,
    /// The kernel's CLOCK_BOOTTIME.
    KernelBoottime,
    /// The kernel's CLOCK_MONOTONIC_COARSE.
    KernelMonotonicCoarse,
    /// The kernel's CLOCK_REALTIME_COARSE.
    KernelRealtimeCoarse,
    /// `std::time::Instant::now()`.
    StdInstant,
}

impl Clock {
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
            Clock::KernelMonotonic => "CLOCK_MONOTONIC",
            Clock::KernelRealtime => "CLOCK_REALTIME",
            Clock::KernelMonotonicRaw => "CLOCK_MONOTONIC_RAW",
            Clock::KernelBoottime => "CLOCK_BOOTTIME",
            Clock::KernelMonotonicCoarse => "CLOCK_MONOTONIC_COARSE",
            Clock::KernelRealtimeCoarse => "CLOCK_REALTIME_COARSE",
            Clock::StdInstant => "std Instant::now()",
        }
    }

    /// The kernel clock this one stands in for, with the same origin; `None`
    /// for the kernel's own clocks. `std::time::Instant` is CLOCK_MONOTONIC
    /// underneath, so it is checked against it too.
    pub fn kernel_twin(self) -> Option<Clock> {
        match self {
            Clock::Now | Clock::NowUnordered | Clock::StdInstant => Some(Clock::KernelMonotonic),
            Clock::NowCoarse => Some(Clock::KernelMonotonicCoarse),
            Clock::GettimeRealtime => Some(Clock::KernelRealtime),
            Clock::GettimeBoottime => Some(Clock::KernelBoottime),
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
        matches!(
            self,
            Clock::NowCoarse
                | Clock::GettimeRealtimeCoarse
                | Clock::KernelMonotonicCoarse
                | Clock::KernelRealtimeCoarse
        )
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
            Clock::KernelMonotonic => kernel_ns(libc::CLOCK_MONOTONIC),
            Clock::KernelRealtime => kernel_ns(libc::CLOCK_REALTIME),
            Clock::KernelMonotonicRaw => kernel_ns(libc::CLOCK_MONOTONIC_RAW),
            Clock::KernelBoottime => kernel_ns(libc::CLOCK_BOOTTIME),
            Clock::KernelMonotonicCoarse => kernel_ns(libc::CLOCK_MONOTONIC_COARSE),
            Clock::KernelRealtimeCoarse => kernel_ns(libc::CLOCK_REALTIME_COARSE),
            // Exact: timehands' Instant is CLOCK_MONOTONIC's nanoseconds.
            Clock::StdInstant => timehands::Instant::from(Instant::now()).as_nanos(),
        }
    }
}

/// Whose a clock is, as plots tell them apart by colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// timehands' (ours).
    Timehands,
    /// The kernel's, through the vDSO.
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
pub fn thread_cpu_time() -> Duration {
    Duration::from_nanos(kernel_ns(libc::CLOCK_THREAD_CPUTIME_ID))
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

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `clock_gettime(id)` in nanoseconds.
#[inline(always)]
fn kernel_ns(id: libc::clockid_t) -> u64 {
    // Every id passed is one of libc's constants, which Linux always has.
    timehands::sys::clock_nanos(id).expect("a clock every Linux has")
}
