//! The rate and the slews, as the engine's discipline keeps them: a frequency
//! adjustment runs the clock exactly that fast, and `adjtime` slews at 500 ppm
//! until the amount is used up, whatever the windups, with the remainder exact.
//! Each scenario for each ring size.

mod common;

use common::{RINGS, following, timekeeper};
use timehands::{SimCounter, Timekeeper};

/// The time a 1 GHz counter's timekeeper reads over 1000 windups of `step`
/// counts each, once `adjust` has set its rate (set at the windup after it,
/// one interval, 1 ms, ahead).
fn elapsed_at(hands: usize, adjust: impl Fn(&Timekeeper<SimCounter>), step: u64) -> i128 {
    let counter = SimCounter::new(1_000_000_000);
    let tk = timekeeper(&counter, hands);
    adjust(&tk);
    tk.windup();
    counter.advance(1_000_000);
    tk.windup();
    let start = tk.uptime();
    for _ in 0..1000 {
        counter.advance(step);
        tk.windup();
    }
    (tk.uptime() - start).as_nanos()
}

/// A frequency adjustment runs the clock exactly that many ppb fast or slow.
#[test]
fn a_frequency_adjustment_sets_the_rate() {
    for hands in RINGS {
        let adjust = |tk: &Timekeeper<SimCounter>| tk.set_frequency_adjustment(100_000).unwrap(); // +100 ppm
        // One second of counts reads as 1.0001 s, to the ns.
        let elapsed = elapsed_at(hands, adjust, 1_000_000);
        assert!(
            (1_000_099_999..=1_000_100_001).contains(&elapsed),
            "{elapsed}"
        );
    }
}

/// A frequency adjustment in ppt runs the clock a fraction of a ppb fast:
/// 1.5 ppb is 1.5 µs over 1000 s (less the scale's resolution, 2^-64 s a
/// count: 54 ppt at 1 GHz), where whole ppb would say 1 or 2 µs.
#[test]
fn a_frequency_adjustment_in_ppt_sets_a_fraction_of_a_ppb() {
    for hands in RINGS {
        let adjust = |tk: &Timekeeper<SimCounter>| tk.set_frequency_adjustment_ppt(1_500).unwrap();
        let elapsed = elapsed_at(hands, adjust, 1_000_000_000);
        assert!(
            (1_000_000_001_446..=1_000_000_001_500).contains(&elapsed),
            "{elapsed}"
        );
    }
}

/// `adjtime` slews at 500 ppm until the amount is used up, and a new request
/// replaces the remainder and returns it.
#[test]
fn adjtime_slews_at_500_ppm_until_done() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        let tk = timekeeper(&counter, hands);
        let ms = 1_000_000; // the interval, in counts
        assert_eq!(tk.adjtime(3_000_000), 0); // 3 ms ahead: 6 s at 500 ppm
        let mut elapsed = 0i128;
        let mut step = |n: u64| {
            for _ in 0..n {
                counter.advance(ms);
                tk.windup();
            }
            elapsed += (n * ms) as i128;
            tk.uptime().as_nanos() - elapsed
        };
        // The slew starts at the first switch point, 1.25 ms in: 998.75 ms at
        // 500 ppm by the end of the first second.
        let gained = step(1000);
        assert!((499_370..=499_380).contains(&gained), "{gained}");
        let gained = step(1000);
        assert!((999_370..=999_380).contains(&gained), "{gained}");
        // Replace: what had not run comes back, rounded toward zero.
        let left = tk.adjtime(-1_000_000);
        assert!(
            (left as i128 - (3_000_000 - gained)).abs() <= 1,
            "{left} after {gained}"
        );
        // The new request is used up exactly: in the end the clock has gained
        // what the first request used and the second request in full.
        let gained = step(3000);
        let expected = (3_000_000 - left as i128) - 1_000_000;
        assert!(
            (gained - expected).abs() <= 2,
            "{gained} against {expected}"
        );
        assert_eq!(step(1000), gained, "the slew has stopped");
        assert_eq!(tk.adjtime(0), 0);
    }
}

/// A slew runs at 500 ppm from its switch point until the amount is used up
/// (BSD `adjtime(2)`), however far apart windups come: a 100 Hz tick, a
/// tenth of a second, readers a second apart. Before, a slew lasted one
/// interval past each windup, and 1 ms asked with windups 10 ms apart had
/// slewed 0.15 ms after 3 s. Checked halfway between windups and at each,
/// to within 2 ns of `min(amount, 500 ppm * (t - switch))`.
#[test]
fn a_slew_runs_at_its_rate_whatever_the_windup_spacing() {
    // Under miri, a thousand times slower, the longest spacing only.
    let spacings: &[u64] = if cfg!(miri) {
        &[1_000_000_000]
    } else {
        &[10_000_000, 100_000_000, 1_000_000_000]
    };
    for &spacing in spacings {
        for hands in RINGS {
            let counter = SimCounter::new(1_000_000_000);
            let tk = timekeeper(&counter, hands);
            assert_eq!(tk.adjtime(1_000_000), 0);
            let mut elapsed = 0u64;
            // The first windup plans the slew a lead (a quarter interval) on.
            let switch = spacing + 250_000;
            let bsd = |t: u64| (t.saturating_sub(switch) as i128 / 2_000).min(1_000_000);
            while elapsed < 4_000_000_000 {
                for _ in 0..2 {
                    counter.advance(spacing / 2);
                    elapsed += spacing / 2;
                    let gained = tk.uptime().as_nanos() - elapsed as i128;
                    let expected = bsd(elapsed);
                    assert!(
                        (gained - expected).abs() <= 2,
                        "{spacing} ns apart, at {elapsed} ns: gained {gained}, BSD {expected}"
                    );
                }
                tk.windup();
            }
            assert_eq!(tk.adjtime(0), 0, "{spacing} ns apart");
        }
    }
}

/// `adjtime`'s return is what has not run at the moment it is called,
/// whatever the windups: in the middle of a plan, between windups.
#[test]
fn adjtime_returns_the_exact_remainder() {
    for hands in RINGS {
        let counter = SimCounter::new(1_000_000_000);
        let tk = timekeeper(&counter, hands);
        tk.adjtime(-1_000_000);
        let mut elapsed = 0i128;
        for advance in [10_000_000, 333_333_333, 1_000, 77_777_777] {
            counter.advance(advance);
            elapsed += advance as i128;
            tk.windup();
            counter.advance(advance / 3);
            elapsed += (advance / 3) as i128;
            let gained = tk.uptime().as_nanos() - elapsed;
            let left = tk.adjtime(-1_000_000 - gained as i64);
            assert!(
                (left as i128 - (-1_000_000 - gained)).abs() <= 1,
                "{left} after {gained}"
            );
        }
    }
}

/// On a timekeeper that follows a reference, `adjtime` after a gap the
/// reference did not see counts only the slew that ran up to the promise
/// (reads stood there): the remainder it returns is what did not run.
#[test]
fn adjtime_after_a_gap_counts_only_the_slew_that_ran() {
    use timehands::BinTime;
    for hands in RINGS {
        let (counter, tk) = following(hands);
        tk.adjtime(10_000_000);
        let mut reference = 0i128;
        for _ in 0..5 {
            counter.advance(1_000_000);
            reference += 1_000_000;
            tk.windup_following(|| BinTime::from_nanos(reference));
        }
        counter.advance(3_600_000_000_000); // an hour the reference did not see
        // At most 2.5 ms of slew ran (5 ms of windups, and reads stand at
        // the promise): the rest did not.
        let left = tk.adjtime(0);
        assert!(left > 9_990_000, "{left} left after a gap");
    }
}

/// On a timekeeper that follows a reference, windups that come a little
/// past the promise (a reader's windup when due, after a windup that left the
/// switch point at its base) while the line and the reference differ by
/// some nanoseconds (a rate error): the slew still runs to the end. When
/// every such windup was taken for a gap, none planned a slew, and the
/// steering's corrections never ran.
#[test]
fn slews_run_when_windups_come_just_past_the_promise() {
    use timehands::BinTime;
    for hands in RINGS {
        let (counter, tk) = following(hands);
        let mut reference = 0i128;
        let mut wind = |counter: &timehands::SimCounter| {
            counter.advance(1_000_100);
            // The reference runs 10 ppm slower than the counter says.
            reference += 1_000_090;
            tk.windup_following(|| BinTime::from_nanos(reference));
        };
        for _ in 0..5 {
            wind(&counter);
        }
        tk.adjtime(-25);
        for _ in 0..20 {
            wind(&counter);
        }
        assert_eq!(tk.adjtime(0), 0, "{hands} hands: the slew did not run");
    }
}
