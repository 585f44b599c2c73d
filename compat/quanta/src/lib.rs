//! quanta 0.12's API on timehands' clock: one `[patch.crates-io]` line moves
//! every crate in a program's tree that reads quanta (governor, moka,
//! metrics-util, metrics-exporter-prometheus, …) onto timehands, without a
//! change to their code.
//!
//! # The line to add
//!
//! In the program's (or its workspace's) `Cargo.toml`, with the path to this
//! folder of a timehands checkout:
//!
//! ```toml
//! [patch.crates-io]
//! quanta = { path = "../timehands/compat/quanta" }
//! ```
//!
//! then `cargo update -p quanta`, so that the lock file leaves crates.io's
//! quanta for this one; `cargo tree -i quanta` shows which is in use. A crate
//! that asks for quanta 0.12 gets this one; one that asks for 0.11 or 0.13
//! keeps its own.
//!
//! # What changes for the program
//!
//! Every signature is quanta's, and so are the semantics that programs build
//! on: a mocked clock starts at zero and moves only by hand, [`with_clock`]
//! mocks a thread's [`Instant::now`], [`set_recent`] pins the recent time,
//! one [`Upkeep`] runs at a time, subtracting instants saturates,
//! `delta_as_nanos(0, raw())` is a nanosecond timeline. What differs is
//! where quanta's behaviour is a known fault:
//!
//! | quanta 0.12 | here |
//! |---|---|
//! | its TSC reads can go back across CPUs where the TSC is not synchronised | [`Instant::now`] never returns an instant earlier than one any thread has seen |
//! | its calibrated rate drifts from the OS's clock (3 ppm in five minutes on the machine these docs were measured on) | timehands is steered onto CLOCK_MONOTONIC, and follows the kernel's own rate changes |
//! | the first `Clock` calibrates for up to 200 ms | no calibration: the first read answers from the kernel's clock |
//! | across a suspend, its TSC time may jump by the time suspended | follows CLOCK_MONOTONIC through a suspend, as `std::time::Instant` does |
//! | it reads the TSC wherever CPUID calls it invariant, whether or not it agrees across CPUs and with the kernel's clock | timehands checks the counter across CPUs and against the kernel's clock, watches it, and falls back to the kernel's clock |
//! | `Clock::recent()` is zero until an upkeep starts, and stale after it stops | fresh with or without an [`Upkeep`]: timehands' coarse time, the kernel's coarse clock less 50 µs, a tick behind `now()` (six at most where the kernel's own is held up), whatever the scheduler does |
//! | `Instant::recent()` is `now()` until an upkeep starts | the same coarse time as `Clock::recent()` |
//! | the upkeep thread wakes every interval, read or not; the recent time is as fresh as the interval asked | no thread: the kernel's tick keeps the recent time; the interval asks for nothing |
//! | a `set_recent` while an upkeep runs is overwritten by its next store | while a host clock's upkeep runs, it stands until the handle is dropped |
//! | raw values are TSC ticks | raw values are nanoseconds, the same as [`Clock::now`]'s |
//! | `Mock` and `+=` wrap around past zero or `u64::MAX` in a release build | `Mock` saturates; `+=` and `-=` panic as `+` and `-` do |
//! | `with_clock` leaves its clock set when the closure panics | the thread's earlier clock comes back on unwinding too |
//!
//! # Platforms and Rust
//!
//! Every target timehands builds on (Linux, Android, macOS, iOS, Windows,
//! the BSDs, illumos, wasm32-wasip1). Not wasm32-unknown-unknown in a
//! browser, which quanta reads through `performance.now()` and timehands
//! does not run on. It needs Rust 1.85, where quanta 0.12 needs 1.70.
//!
//! # Recipes
//!
//! Timing a piece of code, as with quanta:
//!
//! ```
//! let clock = quanta::Clock::new();
//! let start = clock.raw();
//! let work: u64 = (0..1000u64).sum();
//! let took = clock.delta(start, clock.raw());
//! assert_eq!(work, 499_500);
//! assert!(took.as_secs() < 60);
//! ```
//!
//! A test that moves time by hand, through code that calls
//! [`Instant::now`]:
//!
//! ```
//! use std::time::Duration;
//!
//! fn timed_out(since: quanta::Instant) -> bool {
//!     since.elapsed() > Duration::from_secs(30)
//! }
//!
//! let (clock, mock) = quanta::Clock::mock();
//! quanta::with_clock(&clock, || {
//!     let start = quanta::Instant::now();
//!     mock.increment(Duration::from_secs(31));
//!     assert!(timed_out(start));
//! });
//! ```
//!
//! The cheap recent time, with or without an upkeep:
//!
//! ```
//! let clock = quanta::Clock::new();
//! let recent = clock.recent();
//! assert!(recent <= clock.now());
//! assert!(quanta::Instant::recent() >= recent);
//! ```
//!
//! # Features
//!
//! - `prost`: `From<Instant>` for `prost_types::Timestamp` (prost-types 0.11).
//! - `flaky_tests` (default): quanta's switch for its timing tests; this
//!   crate's tests measure no time, so it changes nothing.

mod clock;
mod instant;
mod mock;
mod padded;
mod recent;
mod thread_clock;
mod upkeep;

pub use clock::Clock;
pub use instant::Instant;
pub use mock::{IntoNanoseconds, Mock};
pub use recent::set_recent;
pub use thread_clock::with_clock;
pub use upkeep::{Error, Handle, Upkeep};
