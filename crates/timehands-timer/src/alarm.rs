//! `Alarm`: what an expiry thread sleeps on until its queue's next deadline.
//!
//! The expiry thread blocks in [`Alarm::wait`] until the alarm's absolute
//! deadline (nanoseconds of a `timehands::Instant`). Any thread may move the
//! deadline with [`Alarm::set`]: the sleeper then wakes at the new time, so
//! arming an earlier timer needs no separate wake-up channel, and setting a
//! deadline that has already passed wakes it at once. A ring is taken by
//! one wait; setting the alarm again drops a ring not taken yet.
//!
//! - Linux and Android: a timerfd with an absolute deadline on
//!   CLOCK_MONOTONIC, the origin of `timehands::Instant` there, so no
//!   conversion, and the kernel moves the sleeper's wake-up itself.
//! - Elsewhere (the BSDs and illumos have timerfds only in recent releases,
//!   macOS and Windows none): a deadline under a mutex and a condition
//!   variable. A waiter sleeps for what is left of the time on std's
//!   monotonic clock, which `timehands::Instant` converts from exactly, and
//!   `set` wakes it to look again.
//!
//! A forked child shares the parent's alarm: the timerfd's open file (setting
//! it there would move the parent's alarm, reading it would take the parent's
//! rings), or a mutex a parent's thread may have held at the fork. So the
//! child's service replaces it with [`Alarm::reset_after_fork`] before it
//! uses it.

// Each has the same interface: `new`, `set`, `wait`, `reset_after_fork`.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod timerfd;
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) use timerfd::Alarm;

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod condvar;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) use condvar::Alarm;
