//! Durations as cyclictest's `-D` reads them: a number of seconds, or a number
//! with `s`, `m`, `h` or `d` after it.

use std::time::Duration;

/// Parses `"90"`, `"90s"`, `"15m"`, `"2h"` or `"1d"`; clap shows the error
/// next to the flag.
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "bad duration {text:?}: want a positive number of seconds, or one followed by s, m, h or d"
        )
    };
    let (number, unit) = match text.char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => (&text[..at], c.to_ascii_lowercase()),
        _ => (text, 's'),
    };
    let seconds_per_unit = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    let count: u64 = number.parse().map_err(|_| bad())?;
    match count.checked_mul(seconds_per_unit) {
        Some(seconds) if seconds > 0 => Ok(Duration::from_secs(seconds)),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_are_seconds_and_suffixes_scale() {
        assert_eq!(parse("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse("2H"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn zero_garbage_and_unknown_units_are_refused() {
        for text in ["", "0", "0m", "s", "-5", "1.5", "10x", "ten"] {
            assert!(parse(text).is_err(), "{text:?} accepted");
        }
    }
}
