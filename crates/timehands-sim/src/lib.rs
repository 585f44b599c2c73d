//! The discipline simulator: how well the engine's PPS discipline (and its
//! NTP control) keeps time, against models of `hardpps` and of chrony's
//! PPS refclock and the physical limit, in deterministic seeded runs.
//!
//! An [`Oscillator`] (a frequency offset, a random-walk wander, steps)
//! drives simulated counters at once: one under a real
//! [`Timekeeper`](timehands::Timekeeper) disciplined by
//! [`Pps`](timehands::Pps), others under `Timekeeper`s driven by the
//! [`HardPps`] model and by the [`Chrony`] model. The PPS source stamps
//! each true second's edge with Gaussian jitter, some pulses late
//! (outliers) or dropped, and outages; every discipline gets the same
//! pulses. Each second (at its middle) the
//! run records each clock's error against true time; the [`scenario`]s
//! turn those traces into the figures of the targets table.

mod chrony;
mod hardpps;
mod limit;
mod oracle;
mod oscillator;
mod receiver;
mod run;
pub mod scenario;

pub use chrony::Chrony;
pub use hardpps::HardPps;
pub use limit::{holdover, limit};
pub use oracle::Oracle;
pub use oscillator::{Oscillator, gaussian};
pub use receiver::{Pulses, Receiver};
pub use run::{Config, NtpSource, TUNINGS, Trace, run};
