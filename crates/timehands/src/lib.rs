//! # timehands
//!
//! The timecounter design of the BSD kernels as a library: a free-running
//! counter, a ring of "timehands" snapshots that readers use without locks, and
//! time kept as [`BinTime`] (seconds and a 64-bit binary fraction), made robust
//! where the kernels were not:
//!
//! - **no lost time**: a counter delta times the scale is a full 128-bit product,
//!   so a windup that comes an hour or a year late loses nothing (the OpenBSD
//!   overflow of `scale * delta` cannot happen);
//! - **no backward step on a rate change**, even when the writer is preempted in
//!   the middle of a windup: rate changes take effect at a switch point in the
//!   future, which readers can veto (see [`Timekeeper`] and the `hands` module);
//! - **readers never lock and never wait**, and in the common case write nothing,
//!   so reads scale with cores;
//! - **reads behind the base are clamped**, never wrapped into a huge delta.
//!
//! The engine is `no_std` (turn off the default `std` feature) and has no
//! dependencies: bring a [`Counter`] (an RTOS timer register, say), call
//! [`Timekeeper::windup`] from a tick, and read.
//!
//! ```
//! use timehands::{SimCounter, Timekeeper};
//!
//! let counter = SimCounter::new(1_000_000); // a 1 MHz counter, moved by hand
//! let tk = Timekeeper::new(counter.clone())?;
//! counter.advance(1_000);
//! assert_eq!(tk.uptime().as_nanos(), 1_000_000); // 1 ms
//! # Ok::<(), timehands::Error>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod engine;
#[cfg(feature = "std")]
mod host;
#[cfg(feature = "std")]
pub mod hw;
#[cfg(feature = "tracing")]
pub mod tracing_time;
#[cfg(all(feature = "std", target_arch = "x86_64", target_os = "linux"))]
pub mod tsc_sync;

pub use engine::bintime::BinTime;
pub use engine::counter::Counter;
#[cfg(all(feature = "alloc", target_has_atomic = "64"))]
pub use engine::counter::SimCounter;
pub use engine::{
    Builder, DEFAULT_HANDS, DEFAULT_WINDUP_INTERVAL, MAX_HANDS, Stats, Timekeeper, Windup,
};
#[cfg(feature = "std")]
pub use host::{
    ClockId, Info, Resolution, Verdict,
    bounds::{LeapSecond, RealtimeBounds, realtime_bounds},
    getres, gettime, info,
    instant::{AtomicInstant, Instant},
    mock::{Clock, Mock},
    now, now_coarse, now_coarse_coherent, now_coherent, now_unordered,
    trace::{ClockDescription, clock_description},
    try_gettime,
};

use core::fmt;
use core::time::Duration;

/// Why a timekeeper could not be built, or a value was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The counter's frequency is below 2 Hz.
    Frequency {
        /// The frequency the counter reported.
        hz: u64,
    },
    /// The counter's mask is not of the form `2^bits - 1`.
    Mask {
        /// The mask the counter reported.
        mask: u64,
    },
    /// The ring size is outside `1..=MAX_HANDS`.
    Hands {
        /// The size asked for.
        count: usize,
    },
    /// The windup interval is under 4 counts, or over an eighth of the wrap or
    /// a quarter of `usize::MAX` counts.
    WindupInterval {
        /// The interval asked for.
        interval: Duration,
        /// The interval in counts.
        counts: u128,
        /// The counter's mask.
        mask: u64,
    },
    /// A frequency adjustment beyond ±500 ppm.
    FrequencyAdjustment {
        /// The adjustment asked for, in parts per billion.
        ppb: i64,
    },
    /// A value outside the range of its target type; the text says which.
    OutOfRange(&'static str),
    /// The kernel's real time is not synchronized to UTC (no NTP daemon, or
    /// it lost its sources): no bound on it exists.
    Unsynchronized,
    /// `adjtimex(2)` failed with this errno.
    Ntp {
        /// The error number.
        errno: i32,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Frequency { hz } => write!(
                f,
                "counter frequency {hz} Hz is too low: a counter must run at 2 Hz or more"
            ),
            Error::Mask { mask } => write!(
                f,
                "counter mask {mask:#x} is not 2^bits - 1: give the counter's largest value, such as 0xffff_ffff for 32 bits"
            ),
            Error::Hands { count } => write!(
                f,
                "{count} timehands asked for: the ring holds 1 to {MAX_HANDS}"
            ),
            Error::WindupInterval {
                interval,
                counts,
                mask,
            } => write!(
                f,
                "windup interval {interval:?} is {counts} counts: it must be at least 4 counts and at most {} (an eighth of the counter's range, and a quarter of what a usize holds)",
                engine::max_interval(*mask)
            ),
            Error::FrequencyAdjustment { ppb } => write!(
                f,
                "frequency adjustment {ppb} ppb is beyond the ±500000 ppb (500 ppm) a timekeeper allows"
            ),
            Error::OutOfRange(what) => f.write_str(what),
            Error::Unsynchronized => f.write_str(
                "the kernel's real time is not synchronized to UTC: run an NTP daemon (chrony, ntpd, systemd-timesyncd) to get bounds on it"
            ),
            Error::Ntp { errno } => write!(f, "adjtimex(2) failed with errno {errno}"),
        }
    }
}

impl core::error::Error for Error {}
