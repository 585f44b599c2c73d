//! What the engine's scenario tests share.

use std::time::Duration;

use timehands::{SimCounter, Timekeeper};

/// The ring sizes every scenario runs with: in place, the smallest ring, the default.
pub const RINGS: [usize; 3] = [1, 2, 8];

/// A timekeeper on `counter` with a ring of `hands` and a 1 ms windup interval.
pub fn timekeeper(counter: &SimCounter, hands: usize) -> Timekeeper<SimCounter> {
    Timekeeper::builder(counter.clone())
        .hands(hands)
        .windup_interval(Duration::from_millis(1))
        .build()
        .expect("valid test timekeeper")
}

/// A 1 GHz timekeeper with a ring of `hands` (the default interval) that
/// follows a reference, and its counter.
pub fn following(hands: usize) -> (SimCounter, Timekeeper<SimCounter>) {
    let counter = SimCounter::new(1_000_000_000);
    let tk = Timekeeper::builder(counter.clone())
        .hands(hands)
        .follows_reference(true)
        .build()
        .expect("valid test timekeeper");
    (counter, tk)
}
