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
//! The hard side's lock inherits priority, so that threads arming hard
//! timers cannot hold its real-time thread up; a forked child gets a
//! service of its own; dropping the service frees every callback; and
//! [`TimerService::statistics`] counts soft timers that missed their bound
//! and callbacks that panicked (see [`TimerService`]).
//!
//! Deadlines are [`timehands::Instant`]s, points on CLOCK_MONOTONIC, so the
//! expiry threads sleep on timerfds with absolute deadlines, and
//! [`sleep_until`] is `clock_nanosleep(TIMER_ABSTIME)`.
//!
//! The data structures ([`heap`], [`wheel`], [`periodic`]) know no clock:
//! they take `now` as an argument, which makes them testable with time driven
//! by hand, and usable inside another event loop.

mod alarm;
mod arena;
mod fork;
pub mod heap;
mod lock;
pub mod periodic;
pub mod sched;
mod service;
mod side;
mod simulated;
mod sleep;
pub mod wheel;

pub use sched::Scheduling;
pub use service::{Builder, Expiry, SideStatistics, Statistics, Timer, TimerService};
pub use simulated::Simulation;
pub use sleep::sleep_until;
