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
//!   future, which readers can veto (see [`Timekeeper`] and the engine's design in
//!   [`design`]);
//! - **readers never lock and never wait**, and in the common case write nothing,
//!   so reads scale with cores;
//! - **reads behind the base are clamped**, never wrapped into a huge delta.
//!
//! How it works, the invariants it keeps and the test that checks each: the
//! [`design`] module (the repository's `docs/DESIGN.md`).
//!
//! With `std` (the default), the process's clock is ready to read on every OS,
//! over that OS's own clocks ([`sys::KernelClock`]; the repository's
//! `docs/platforms.md` has the table):
//!
//! ```
//! let start = timehands::now();
//! let std_start: std::time::Instant = start.into(); // exact, both ways
//! assert_eq!(timehands::Instant::from(std_start), start);
//! println!("{:?} since start", start.elapsed());
//! ```
//!
//! # Who keeps the time
//!
//! The readers, as the kernel's tick keeps the kernel's clock: the library
//! starts no thread, takes no priority and changes no limit, signal mask or
//! disposition. A read that finds the clock due winds it up (and steers it,
//! and takes the next step of choosing its counter) without waiting for
//! anything, so the clock is the same for every caller: a thread that blocks
//! every signal, a SCHED_FIFO thread, a signal handler. A process that
//! stopped reading costs nothing at all. The one check that needs threads of
//! its own, the TSC's across CPUs, runs when a program asks
//! ([`check_across_cpus`]); it lets the TSC keep time on a guest whose kernel
//! reads a paravirtual clock.
//!
//! # In a signal handler
//!
//! POSIX lets a signal handler call `clock_gettime`; these may be called
//! wherever it may, a handler that interrupted any step of the clock's life
//! on its own thread included (they never wait for a lock, allocate or
//! start a thread): [`now`], [`now_unordered`], [`now_coarse`],
//! [`now_coherent`], [`now_coarse_coherent`], [`Instant::now`] and
//! [`Instant`]'s arithmetic, [`gettime`] and [`try_gettime`] of every
//! [`ClockId`], [`getres`] and [`realtime_bounds`]. [`info`] is not (it
//! allocates its report), nor is anything of the engine's writers. A profiler
//! that stamps its `SIGPROF` samples with [`now`] needs nothing more.
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

pub mod design {
    #![doc = include_str!("../DESIGN.md")]
}
#[cfg(feature = "std")]
pub mod diagnostics;
mod engine;
mod error;
#[cfg(feature = "std")]
mod host;
#[cfg(feature = "std")]
mod hw;
#[cfg(feature = "std")]
mod os;
#[cfg(feature = "std")]
pub mod sys;
/// One keeper for the machine: the process that publishes the clock in a
/// page every process on the machine reads (Linux on x86_64).
///
/// `timehands keeper` runs it. A process whose first read finds the page
/// (at `/run/timehands/page`, or where `TIMEHANDS_PAGE` says) good reads
/// the time from it with the TSC and loads, and keeps no clock of its own;
/// where there is none, or it is stale, of another version or boot,
/// writable by others, or off this process's kernel clocks, the process
/// keeps its own clock as it would with no keeper.
/// [`info`](crate::info()) says which, and why. The page's layout is
/// written down in the repository's `docs/page.md`.
#[cfg(all(feature = "std", target_os = "linux", target_arch = "x86_64"))]
pub mod keeper {
    pub use crate::host::page::{Keeper, Keeping, NotYet, published};
}
#[cfg(feature = "tracing")]
pub mod tracing_time;

pub use engine::bintime::BinTime;
pub use engine::counter::Counter;
#[cfg(all(feature = "alloc", target_has_atomic = "64"))]
pub use engine::counter::SimCounter;
pub use engine::{
    Builder, DEFAULT_HANDS, DEFAULT_WINDUP_INTERVAL, MAX_HANDS, Ntp, NtpState, NtpStatus, NtpTime,
    Pps, PpsState, PpsStatus, Stamp, Stats, TimeState, Timekeeper, Timex, Windup,
};
#[cfg(feature = "std")]
pub use host::{
    ClockId, CounterKind, Info, Resolution, Verdict,
    bounds::{
        BoundsSource, BoundsStatus, LeapSecond, RealtimeBounds, clockbound, commit_wait,
        realtime_bounds, realtime_bounds_when_ready, surely_not_yet, surely_past,
    },
    check_across_cpus, getres, gettime, info,
    instant::{AtomicInstant, Instant},
    mock::{Clock, Mock},
    now, now_coarse, now_coarse_coherent, now_coherent, now_unordered,
    trace::{ClockDescription, clock_description},
    try_gettime,
};

pub use error::Error;
