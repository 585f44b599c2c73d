//! Periodic timers: the next expiry and the overrun count, as Linux's
//! `hrtimer_forward` computes them (its return value counts the expiry being
//! handled as well, so it is one more than the overruns here, which are what
//! POSIX's `timer_getoverrun` reports).
//!
//! A periodic timer keeps its phase: its expiries are `first + k * period`,
//! never "now + period", so lateness does not accumulate into drift. When it
//! fires late by more than a period, the expiries it missed are not replayed
//! one after another (that would stack them in front of everything else);
//! they are counted as overruns and the timer moves to the first expiry after
//! `now`.
//!
//! ```
//! use timehands_timer::periodic::forward;
//!
//! // Due at 1000 every 100 ns, handled at 1350: the expiries at 1100, 1200
//! // and 1300 were missed; the next is 1400.
//! assert_eq!(forward(1000, 1350, 100), (1400, 3));
//! // Handled on time: no overrun.
//! assert_eq!(forward(1000, 1000, 100), (1100, 0));
//! ```

/// The first expiry of the series `expiry + k * period` (k >= 1) that is
/// after `now`, and how many expiries of the series strictly between
/// `expiry` and it were skipped (the overruns).
///
/// `now` before `expiry` is taken as `expiry` (the timer fired on time), and
/// a `period` of 0 as 1 ns. The next expiry saturates at `u64::MAX`.
pub fn forward(expiry: u64, now: u64, period: u64) -> (u64, u64) {
    let period = period.max(1);
    let late = now.saturating_sub(expiry);
    let skipped = late / period;
    let next = expiry.saturating_add(skipped.saturating_add(1).saturating_mul(period));
    (next, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_exactly_one_period_late_has_one_overrun() {
        assert_eq!(forward(1000, 1100, 100), (1200, 1));
        assert_eq!(forward(1000, 1099, 100), (1100, 0));
    }

    #[test]
    fn the_next_expiry_is_always_after_now_and_on_the_phase() {
        for now in 0..2000 {
            let (next, skipped) = forward(500, now, 70);
            assert!(next > now.max(500), "now {now} next {next}");
            assert_eq!((next - 500) % 70, 0);
            assert_eq!(next, 500 + (skipped + 1) * 70);
        }
    }

    #[test]
    fn far_futures_saturate_instead_of_wrapping() {
        assert_eq!(forward(u64::MAX - 10, u64::MAX, 100).0, u64::MAX);
        assert_eq!(forward(0, 5, 0), (6, 5));
        assert_eq!(forward(0, u64::MAX, 1), (u64::MAX, u64::MAX));
    }
}
