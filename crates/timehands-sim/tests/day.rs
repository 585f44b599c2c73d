//! The long runs, asserting the targets: the 24-hour steady state, and
//! acquisition, robustness and the receiver's world on fifty seeds. Run in release by `.ci/run`
//! (`cargo test --release -p timehands-sim --features day`).

use timehands_sim::scenario::{acquire, receiver, robust, steady};

/// Over 24 simulated hours at σ ∈ {1 µs, 100 ns}, w ∈ {1, 10 ppb/√s}: RMS
/// within 1.25 × the limit, maximum within 1.25 × the oracle's, RMS under
/// `hardpps` at its best tuning, no step back.
#[test]
fn a_day_of_steady_state_is_near_the_limit() {
    for row in steady(20, 24) {
        assert!(row.met, "{row:?}");
    }
}

/// Acquisition (an outlier among the first ten pulses included: the first
/// on seeds 10, 20, ...), and the second world's receiver, on fifty seeds:
/// every target met on every seed.
#[test]
fn acquisition_and_a_receiver_meet_their_targets_on_fifty_seeds() {
    for seed in 1..=50 {
        for row in acquire(seed).into_iter().chain(receiver(seed)) {
            assert!(row.met, "seed {seed}: {row:?}");
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
