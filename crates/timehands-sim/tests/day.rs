//! The long runs, asserting the targets: the 24-hour steady state, and
//! acquisition, robustness and the receiver's world on fifty seeds. Run in release by `.ci/run`
//! (`cargo test --release -p timehands-sim --features day`).

use timehands_sim::scenario::{acquire, early_outlier, receiver, robust, steady};

/// Over 24 simulated hours at σ ∈ {1 µs, 100 ns}, w ∈ {1, 10 ppb/√s}: RMS
/// within 1.25 × the limit, maximum within 1.25 × the oracle's, RMS under
/// `hardpps` at its best tuning, no step back.
#[test]
fn a_day_of_steady_state_is_near_the_limit() {
    for row in steady(20, 24) {
        assert!(row.met, "{row:?}");
    }
}

/// Acquisition, and the second world's receiver, on fifty seeds: every
/// target met on every seed, but one: an outlier at the first pulse looks
/// like one at the third until the fourth pulse (either way two lie on a
/// line the other is late of), so no discipline can keep it from moving
/// the clock; it may do so for two seconds (the fourth pulse's correction
/// takes effect a windup after it), which its own row holds it to.
#[test]
fn acquisition_and_a_receiver_meet_their_targets_on_fifty_seeds() {
    for seed in 1..=50 {
        for row in acquire(seed).into_iter().chain(receiver(seed)) {
            let undecidable = early_outlier(seed) == 1
                && row
                    .metric
                    .starts_with("error a 20 µs outlier among pulses 1-10");
            assert!(row.met || undecidable, "seed {seed}: {row:?}");
        }
    }
}

/// Outliers, drops, an outage and a step on fifty seeds: every target met
/// on every seed.
#[test]
fn robustness_meets_its_targets_on_fifty_seeds() {
    for seed in 1..=50 {
        for row in robust(seed) {
            assert!(row.met, "seed {seed}: {row:?}");
        }
    }
}
