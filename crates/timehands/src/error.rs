//! Why a timekeeper could not be built, a value was refused, or a bound
//! does not exist: one error type, each message one line that names the
//! input and says what to do.

use core::fmt;
use core::time::Duration;

use crate::engine::state::{MAX_HANDS, max_interval};

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
    /// A slew rate outside 1 ppb to 10^9 ppb (standing still).
    SlewRate {
        /// The rate asked for, in parts per billion.
        ppb: i64,
    },
    /// A captured counter value older than every hands the ring still holds.
    Capture {
        /// The count, masked.
        count: u64,
    },
    /// An `ntp_adjtime` setting out of its range.
    Timex {
        /// The field of [`Timex`](crate::Timex).
        field: &'static str,
        /// The value given.
        value: i64,
    },
    /// A value outside the range of its target type; the text says which.
    OutOfRange(&'static str),
    /// The kernel's real time is not synchronized to UTC (no NTP daemon, or
    /// it lost its sources): no bound on it exists.
    Unsynchronized,
    /// Reading the kernel's NTP state (`adjtimex(2)`, `ntp_gettime(2)`)
    /// failed with this errno.
    Ntp {
        /// The error number.
        errno: i32,
    },
    /// timehands reads no NTP state on this OS (none a program can read, or
    /// none implemented here): it gives no bound on real time there.
    NoNtpState {
        /// The OS, as `std::env::consts::OS` names it.
        os: &'static str,
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
                max_interval(*mask)
            ),
            Error::FrequencyAdjustment { ppb } => write!(
                f,
                "frequency adjustment {ppb} ppb is beyond the ±500000 ppb (500 ppm) a timekeeper allows"
            ),
            Error::SlewRate { ppb } => write!(
                f,
                "slew rate {ppb} ppb is outside 1 to 1000000000 ppb (a slow-down as far as standing still)"
            ),
            Error::Capture { count } => write!(
                f,
                "captured count {count} is older than every hands the ring holds: stamp a capture within hands - 1 windups of it, or build with more hands"
            ),
            Error::Timex { field, value } => write!(
                f,
                "ntp_adjtime {field} {value} is out of range: the time constant is 0 to 10, the errors are not negative"
            ),
            Error::OutOfRange(what) => f.write_str(what),
            Error::Unsynchronized => f.write_str(
                "the kernel's real time is not synchronized to UTC: run an NTP daemon (chrony, ntpd, systemd-timesyncd) to get bounds on it"
            ),
            Error::Ntp { errno } => write!(
                f,
                "reading the kernel's NTP state failed with errno {errno}"
            ),
            Error::NoNtpState { os } => write!(
                f,
                "timehands reads no NTP state on {os}, so it gives no bound on real time here: it does on Linux, Apple's OSes, FreeBSD, NetBSD, DragonFly and illumos"
            ),
        }
    }
}

impl core::error::Error for Error {}
