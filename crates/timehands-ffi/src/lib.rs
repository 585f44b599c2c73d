//! # libtimehands
//!
//! The timehands clock for C and C++ programs: `libtimehands.so` and
//! `libtimehands.a`, declared by `include/timehands.h` (which cbindgen makes
//! from this crate; `tests/header.rs` fails when it is stale).
//!
//! # The model
//!
//! The functions have the shape C programmers know from `clock_gettime(2)`:
//!
//! - a `clockid_t` from `<time.h>` names the clock: timehands keeps
//!   CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW,
//!   CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE and CLOCK_TAI;
//!   `th_clock_gettime` and `th_clock_getres` pass every other id (the
//!   CPU-time clocks, the alarm and auxiliary clocks) to the kernel, so that
//!   they can stand in for `clock_gettime` and `clock_getres`;
//! - `th_clock_getbounds` gives the earliest and the latest UTC the true time
//!   can be, from chronyd, AWS ClockBound or the kernel's NTP state, and
//!   `th_clock_surely_past`, `th_clock_surely_not_yet` and
//!   `th_clock_commit_wait` are TrueTime's verbs on it;
//! - a call returns 0, or -1 with `errno` set (EINVAL for an id refused,
//!   EFAULT for a null pointer, the id checked first as Linux does);
//! - every function may be called from any thread at any time; the first call
//!   starts the clock (the counter is chosen and its frequency measured by
//!   the clock's own thread, off the caller's path);
//! - the reads are async-signal-safe, as `clock_gettime` is, so that a
//!   program that calls `clock_gettime` in a signal handler (a profiler's
//!   `SIGPROF`, a tracer's probe) can call them there: `th_clock_gettime`,
//!   `th_clock_getres`, `th_clock_getaccuracy`, `th_now_ns`,
//!   `th_now_unordered_ns` and `th_clock_getbounds` never wait for a lock,
//!   allocate or start a thread, whatever call of the clock's they
//!   interrupted; `th_info` and `th_clock_description_ctf` are not.
//!
//! Texts handed out (counter name, verdicts) are C strings that live as long
//! as the process; the clock's description is copied into the caller's buffer
//! as `snprintf` does.
//!
//! # No panic crosses into C
//!
//! Every call into the Rust library runs under `catch_unwind` (see
//! `boundary.rs`); what runs outside it (the id's match, null checks, stores
//! through the caller's pointers, the fallbacks) has no operation that can
//! panic. A read of the time that panics is answered by the kernel's clock;
//! any other call fails with EIO.

// The API is clock_gettime's: clockid_t, struct timespec and errno, which
// Windows has none of (README.md, "Each OS"). There the crate is empty, and
// its build script says so, so that a workspace build still succeeds.
#[cfg(unix)]
mod boundary;
#[cfg(unix)]
mod bounds;
#[cfg(unix)]
mod clock;
#[cfg(unix)]
mod info;
#[cfg(unix)]
mod trace;

#[cfg(unix)]
pub use bounds::{
    th_clock_commit_wait, th_clock_getbounds, th_clock_surely_not_yet, th_clock_surely_past,
    th_realtime_bounds,
};
#[cfg(unix)]
pub use clock::{
    th_clock_getaccuracy, th_clock_getres, th_clock_gettime, th_now_ns, th_now_unordered_ns,
};
#[cfg(unix)]
pub use info::{th_info, th_verdict};
#[cfg(unix)]
pub use trace::th_clock_description_ctf;
