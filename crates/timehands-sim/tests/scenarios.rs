//! The scenarios, seeded: their targets are properties of the algorithm,
//! asserted here.

use timehands_sim::scenario::{acquire, ntp, robust, steady};

fn assert_met(rows: Vec<timehands_sim::scenario::Row>) {
    for row in rows {
        eprintln!("{row:?}");
        assert!(row.met, "{row:?}");
    }
}

/// 100 ppm and 300 µs off: under 1 µs within 20 s, under 10 ppb by 120 s.
#[test]
fn acquisition_takes_seconds() {
    for seed in [1, 2, 3] {
        assert_met(acquire(seed));
    }
}

/// Outliers and drops cost little, a minute's holdover stays within 0.5
/// µs where the oscillator allows it, and a frequency step is followed
/// within 30 s, over several seeds.
#[test]
fn outliers_drops_outages_and_steps_are_handled() {
    for seed in [2, 4, 7] {
        let (rows, beyond_the_limit): (Vec<_>, Vec<_>) = robust(seed)
            .into_iter()
            .partition(|row| !(row.metric.contains("outage") && row.metric.contains("w = 1 ppb")));
        assert_met(rows);
        // At 1 ppb/√s the best prediction after a minute is 366 ns RMS: 0.5
        // µs is missed one run in six by any discipline (see `robust`).
        // Within three times that, always.
        for row in beyond_the_limit {
            let (ours, limit) = (row.ours.unwrap(), row.limit.unwrap());
            assert!(ours <= 3.0 * limit, "{row:?}");
        }
    }
}

/// An hour of steady state past the first is near the limit already (the
/// day's run is `tests/day.rs`).
#[test]
fn an_hour_of_steady_state_is_near_the_limit() {
    assert_met(steady(11, 1));
}

/// NTP offsets every 64 s through the PLL: within twice chrony's RMS once
/// acquired, and no read steps back.
#[test]
fn ntp_offsets_keep_the_clock_within_twice_chronys_rms() {
    assert_met(ntp(5));
}
