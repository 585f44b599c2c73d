//! Timestamps for `tracing` logs: [`FormatTime`] timers for
//! `tracing_subscriber::fmt().with_timer(..)`, read from the timehands clock
//! (the `tracing` feature).
//!
//! - [`Uptime`]: CLOCK_MONOTONIC, seconds since boot with nanoseconds
//!   (`  3712.052380174s`), the time line of the kernel's log and of LTTng
//!   traces (`babeltrace2 --clock-cycles`), read with [`now`](crate::now);
//! - [`Rfc3339`]: real time in UTC, RFC 3339 with nanoseconds
//!   (`2026-11-23T20:40:01.123456789Z`), read with
//!   [`gettime`](crate::gettime)`(ClockId::Realtime)`.
//!
//! ```
//! use timehands::tracing_time::{Rfc3339, Uptime};
//! use tracing_subscriber::fmt::{format::Writer, time::FormatTime};
//!
//! let subscriber = tracing_subscriber::fmt().with_timer(Uptime).finish();
//! tracing::subscriber::with_default(subscriber, || tracing::info!("on CLOCK_MONOTONIC"));
//!
//! let mut stamp = String::new();
//! Rfc3339.format_time(&mut Writer::new(&mut stamp))?;
//! assert_eq!(stamp.len(), "2026-11-23T20:40:01.123456789Z".len());
//! # Ok::<(), std::fmt::Error>(())
//! ```

use core::fmt;

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use crate::ClockId;

/// CLOCK_MONOTONIC as `SECONDS.NANOSECONDSs`, the seconds padded with spaces
/// to 6 places.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uptime;

impl FormatTime for Uptime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        w.write_str(uptime(crate::now().as_nanos()).as_str())
    }
}

/// Real time in UTC as RFC 3339 with nanoseconds:
/// `YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rfc3339;

impl FormatTime for Rfc3339 {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let since_epoch = crate::gettime(ClockId::Realtime);
        w.write_str(rfc3339(since_epoch.as_secs(), since_epoch.subsec_nanos()).as_str())
    }
}

/// The text of a time, on the stack: `bytes[start..]`.
struct Stamp<const N: usize> {
    bytes: [u8; N],
    start: usize,
}

impl<const N: usize> Stamp<N> {
    fn as_str(&self) -> &str {
        // Only ASCII digits, spaces and separators are written.
        core::str::from_utf8(&self.bytes[self.start..]).unwrap_or("")
    }
}

/// Writes `value` in decimal into all of `digits`, zero-padded on the left.
fn put_digits(digits: &mut [u8], mut value: u64) {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// `SECONDS.NANOSECONDSs` for all of a `u64` of ns: 11 digits of seconds.
const UPTIME_LEN: usize = 22;

/// `nanos` as `SECONDS.NANOSECONDSs`, the seconds padded with spaces to 6
/// places.
fn uptime(nanos: u64) -> Stamp<UPTIME_LEN> {
    let seconds = nanos / 1_000_000_000;
    let places = seconds.checked_ilog10().map_or(1, |log| log as usize + 1);
    let mut bytes = [b' '; UPTIME_LEN];
    put_digits(&mut bytes[11 - places..11], seconds);
    bytes[11] = b'.';
    put_digits(&mut bytes[12..21], nanos % 1_000_000_000);
    bytes[21] = b's';
    Stamp {
        bytes,
        start: 11 - places.max(6),
    }
}

/// `YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ`: years 0 to 9999.
const STAMP_LEN: usize = 30;

/// `seconds` and `nanos` after the Unix epoch in UTC, as RFC 3339; years past
/// 9999 are written as 9999-12-31T23:59:59.999999999Z.
fn rfc3339(seconds: u64, nanos: u32) -> Stamp<STAMP_LEN> {
    const LAST: u64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    let (seconds, nanos) = if seconds > LAST {
        (LAST, 999_999_999)
    } else {
        (seconds, nanos)
    };
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let of_day = seconds % 86_400;
    let mut bytes = *b"0000-00-00T00:00:00.000000000Z";
    let mut put = |at: usize, width: usize, value: u64| {
        put_digits(&mut bytes[at..at + width], value);
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, of_day / 3600);
    put(14, 2, of_day / 60 % 60);
    put(17, 2, of_day % 60);
    put(20, 9, u64::from(nanos));
    Stamp { bytes, start: 0 }
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153; // March is 0
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::sys::KernelClock;

    fn format(timer: impl FormatTime) -> String {
        let mut text = String::new();
        timer
            .format_time(&mut Writer::new(&mut text))
            .expect("a String takes any text");
        text
    }

    #[test]
    fn uptimes() {
        for (nanos, text) in [
            (0, "     0.000000000s"),
            (3_712_052_380_174, "  3712.052380174s"),
            (999_999_999_999_999, "999999.999999999s"),
            (1_000_000_000_000_000, "1000000.000000000s"),
            (u64::MAX, "18446744073.709551615s"),
        ] {
            assert_eq!(uptime(nanos).as_str(), text, "{nanos} ns");
        }
    }

    #[test]
    fn rfc3339_dates() {
        for (seconds, nanos, text) in [
            (0, 0, "1970-01-01T00:00:00.000000000Z"),
            (951_782_400, 1, "2000-02-29T00:00:00.000000001Z"),
            (951_868_799, 999_999_999, "2000-02-29T23:59:59.999999999Z"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000000Z"),
            (1_795_466_038, 668_743_669, "2026-11-23T20:33:58.668743669Z"),
            (253_402_300_799, 5, "9999-12-31T23:59:59.000000005Z"),
            (u64::MAX, 0, "9999-12-31T23:59:59.999999999Z"),
        ] {
            assert_eq!(rfc3339(seconds, nanos).as_str(), text, "{seconds} s");
        }
    }

    /// Every day's date follows the day before, over four centuries.
    #[test]
    fn days_follow_each_other() {
        let days_in = |year: u64, month: u64| match month {
            2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let mut date = (1970, 1, 1);
        for day in 0..146_097 {
            assert_eq!(civil_from_days(day), date, "day {day}");
            date = match date {
                (y, 12, 31) => (y + 1, 1, 1),
                (y, m, d) if d == days_in(y, m) => (y, m + 1, 1),
                (y, m, d) => (y, m, d + 1),
            };
        }
    }

    /// Nanoseconds of the OS's `clock`.
    fn kernel(clock: KernelClock) -> u128 {
        crate::sys::kernel_nanos(clock).expect("a clock every OS has") as u128
    }

    /// The error bound of the clock against the kernel's, plus a microsecond.
    fn slack() -> u128 {
        crate::getres(ClockId::Monotonic).accuracy.as_nanos() + 1000
    }

    #[test]
    fn uptime_is_clock_monotonic() {
        let before = kernel(KernelClock::Monotonic);
        let text = format(Uptime);
        let after = kernel(KernelClock::Monotonic);
        let (seconds, nanos) = text
            .trim_start()
            .strip_suffix('s')
            .and_then(|t| t.split_once('.'))
            .unwrap_or_else(|| panic!("{text:?} is not SECONDS.NANOSECONDS s"));
        assert_eq!(nanos.len(), 9, "{text:?}");
        let uptime =
            seconds.parse::<u128>().unwrap() * 1_000_000_000 + nanos.parse::<u128>().unwrap();
        assert!(
            before - slack() <= uptime && uptime <= after + slack(),
            "{text:?} is not within CLOCK_MONOTONIC's {before} to {after} ns"
        );
    }

    #[test]
    fn rfc3339_is_clock_realtime() {
        let before = kernel(KernelClock::Realtime) - slack();
        let text = format(Rfc3339);
        let after = kernel(KernelClock::Realtime) + slack();
        let stamp = |nanos: u128| {
            rfc3339(
                (nanos / 1_000_000_000) as u64,
                (nanos % 1_000_000_000) as u32,
            )
            .as_str()
            .to_string()
        };
        // Stamps of one width sort as their times do.
        assert!(
            stamp(before) <= text && text <= stamp(after),
            "{text} is not within CLOCK_REALTIME's {} to {}",
            stamp(before),
            stamp(after)
        );
    }

    /// A log line through `tracing_subscriber::fmt()` starts with our stamp.
    #[test]
    fn fmt_subscriber_lines_start_with_the_stamp() {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_timer(Rfc3339)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let before = format(Rfc3339);
        tracing::subscriber::with_default(subscriber, || tracing::info!("hello"));
        let after = format(Rfc3339);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let (stamp, rest) = text.split_at(STAMP_LEN);
        assert!(
            before.as_str() <= stamp && stamp <= after.as_str(),
            "{text:?}"
        );
        assert!(rest.trim_end().ends_with("hello"), "{text:?}");
    }
}
