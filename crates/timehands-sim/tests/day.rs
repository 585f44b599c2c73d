//! The 24-hour steady state, asserting the targets: run in release by
//! `.ci/run` (`cargo test --release -p timehands-sim --features day`).

use timehands_sim::scenario::steady;

/// Over 24 simulated hours at σ ∈ {1 µs, 100 ns}, w ∈ {1, 10 ppb/√s}: RMS
/// within 1.25 × the limit, maximum within 5 × the RMS, no step back.
#[test]
fn a_day_of_steady_state_is_near_the_limit() {
    for row in steady(20, 24) {
        assert!(row.met, "{row:?}");
    }
}
