//! A timer service on timehands' clock: precise hard timers that a pile of
//! deferrable soft timers cannot delay.
//!
//! Gratian Crisan's test load shows the problem on PREEMPT_RT Linux: a few
//! ordinary threads sleeping for random sub-second intervals put enough
//! timer-expiry work in front of a real-time thread's wake-up to add tens of
//! microseconds to its worst case. Any program with one timer queue has the
//! same problem one level up. This crate keeps two kinds of timers apart:
//!
//! - **hard** timers ([`TimerService::hard_at`]): exact, in a
//!   [`heap::DeadlineHeap`], expired by a thread that asks for SCHED_FIFO;
//! - **soft** timers ([`TimerService::soft_at`]): deferrable within a
//!   slack, in a hierarchical timing [`wheel::Wheel`] with O(1) arm and
//!   cancel, coalesced, expired by workers of their own.
//!
//! Threads that arm, cancel or reschedule timers never wait for a lock an
//! expiry thread takes, so none of them, preempted, can hold the real-time
//! thread up, and a pile of soft timers armed at once delays no soft timer
//! due meanwhile by more than a batch of requests;
//! a forked child gets a service of its own; dropping the service frees
//! every callback; and [`TimerService::statistics`] counts soft timers that
//! missed their bound and callbacks that panicked (see [`TimerService`]).
//!
//! Deadlines are [`timehands::Instant`]s, points on the kernel's monotonic
//! clock (CLOCK_MONOTONIC on Linux), so the expiry threads sleep on alarms
//! with absolute deadlines, and [`sleep_until`] sleeps to one.
//!
//! # Per OS
//!
//! The crate builds for each OS below, and says where one has less than
//! Linux rather than pretend. Each difference lives in one
//! module: `alarm`, `lock`, `sleep`, `fork` and [`sched`].
//!
//! - **Linux** (glibc or musl): everything above. The alarms are timerfds,
//!   [`sleep_until`] is `clock_nanosleep(TIMER_ABSTIME)`, the hard side's
//!   locks (which callers only ever try) are `PTHREAD_PRIO_INHERIT` mutexes
//!   (PI futexes), the hard thread gets a 1 ns timer slack, and the soft
//!   workers nice 10 where the hard thread has no real-time priority.
//! - **Android**: as Linux, but the locks inherit no priority (the libc
//!   crate has no `pthread_mutexattr_setprotocol` for bionic).
//! - **macOS, FreeBSD, NetBSD, illumos**: the alarms are condition
//!   variables' timed waits and [`sleep_until`] a relative sleep repeated to
//!   the deadline, both on std's monotonic clock; no lock inherits priority,
//!   there is no timer slack to set, and the soft workers keep the process's
//!   nice value (a nice value is per process there). Forks are handled as
//!   on Linux.
//! - **Windows**: as macOS, without fork.
//! - **wasm32-wasip1**: no threads, so [`TimerService::new`] is an error
//!   that says so; the data structures and [`TimerService::simulated`] work.
//!
//! On every OS the hard thread asks for SCHED_FIFO, and a refusal (for
//! lack of rights, or because timehands has no such policy for the OS:
//! illumos, Windows, WASI) is reported as [`Scheduling::Normal`] with its
//! reason.
//!
//! The data structures ([`heap`], [`wheel`], [`periodic`]) know no clock:
//! they take `now` as an argument, which makes them testable with time driven
//! by hand, and usable inside another event loop.

mod alarm;
mod arena;
mod control;
mod expiry;
mod fork;
mod hard;
pub mod heap;
mod lock;
pub mod periodic;
mod record;
mod requests;
pub mod sched;
mod service;
mod sharing;
mod side;
mod simulated;
mod sleep;
mod soft;
mod stall;
mod sync;
pub mod wheel;

pub use expiry::{Expiry, SideStatistics};
pub use sched::Scheduling;
pub use service::{Builder, Statistics, Timer, TimerService};
pub use simulated::Simulation;
pub use sleep::sleep_until;
