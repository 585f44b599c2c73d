//! Periodic timers in simulated time: a timer re-armed with `forward` after
//! each expiry accounts for every period exactly once, as an expiry or as an
//! overrun, however late its expiries are handled.

use timehands_timer::heap::DeadlineHeap;
use timehands_timer::periodic::forward;

#[test]
fn every_period_is_an_expiry_or_an_overrun() {
    const FIRST: u64 = 1_000;
    const PERIOD: u64 = 250;
    let mut heap = DeadlineHeap::new();
    heap.push(FIRST, ());
    let (mut expiries, mut overruns) = (0u64, 0u64);
    let mut now = 0;
    let mut seed = 3u64;
    for _ in 0..5_000 {
        // The handler runs at irregular times: sometimes several periods late.
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        now += (seed >> 33) % (3 * PERIOD);
        while let Some((deadline, ())) = heap.pop_expired(now) {
            assert!(deadline <= now);
            let (next, skipped) = forward(deadline, now, PERIOD);
            assert!(next > now, "re-armed in the past");
            expiries += 1;
            overruns += skipped;
            heap.push(next, ());
        }
        // Every expiry point of the series up to now is accounted for.
        let points_due = if now >= FIRST {
            (now - FIRST) / PERIOD + 1
        } else {
            0
        };
        assert_eq!(expiries + overruns, points_due, "at {now}");
    }
    assert!(overruns > 0 && expiries > overruns);
}
