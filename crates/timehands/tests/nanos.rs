//! The nanosecond reads against the exact timeline: over random counters
//! (frequency and width), windup intervals and delays, slews, frequency
//! adjustments, realtime steps and retirement, `uptime_nanos()` is the floor
//! of the exact `uptime()` in nanoseconds, equal and not merely close, and
//! `realtime_nanos()` adds the boottime offset rounded down. So they never
//! step back where the exact time does not.

use std::time::Duration;

use proptest::prelude::*;
use timehands::{BinTime, SimCounter, Timekeeper, Windup};

/// The floor of `t` in nanoseconds, held to what a `u64` holds.
fn floor_nanos(t: BinTime) -> u64 {
    t.as_nanos().clamp(0, u64::MAX as i128) as u64
}

/// What the nanosecond reads must give at the counter's current value: the
/// floor of uptime, and that plus the floor of realtime minus uptime.
fn expected(tk: &Timekeeper<SimCounter>) -> (u64, u64) {
    let uptime = tk.uptime();
    let boottime = tk.realtime().saturating_sub(uptime);
    let realtime = floor_nanos(uptime) as i128 + boottime.as_nanos();
    (
        floor_nanos(uptime),
        realtime.clamp(0, u64::MAX as i128) as u64,
    )
}

/// One step of the walk.
#[derive(Clone, Debug)]
enum Step {
    /// Counts forward, as a fraction (in 1/1000) of the windup interval: up
    /// to three intervals, so windups come early, on time and late.
    Advance(u64),
    /// Counts forward by a fraction (in 1/1000) of an eighth of the wrap: a
    /// windup very late.
    Stall(u64),
    Windup,
    /// A windup following a reference that is this many windup intervals
    /// (in 1/1000) ahead of the last exact read (negative: behind; the
    /// reference missed a suspend).
    WindupFollowing(i64),
    Adjtime(i64),
    FrequencyAdjustment(i64),
    SetRealtime(i64),
    Retire,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0u64..3000).prop_map(Step::Advance),
        1 => (0u64..1000).prop_map(Step::Stall),
        6 => Just(Step::Windup),
        3 => (-3000i64..3000).prop_map(Step::WindupFollowing),
        2 => (-5_000_000i64..5_000_000).prop_map(Step::Adjtime),
        2 => (-500_000i64..=500_000).prop_map(Step::FrequencyAdjustment),
        1 => (-4_000_000_000i64..4_000_000_000).prop_map(Step::SetRealtime),
        1 => Just(Step::Retire),
    ]
}

/// A counter of `bits` bits at `hz` with an interval of `interval` (in 1/1000
/// of the longest it allows, at least 4 counts), starting at `start` seconds of
/// uptime and at counter value `first_count`; and the interval in counts.
fn timekeeper(
    hz: u64,
    bits: u32,
    interval: u64,
    start: i64,
    first_count: u64,
    follows_reference: bool,
) -> Option<(SimCounter, Timekeeper<SimCounter>, u64)> {
    let mask = u64::MAX >> (64 - bits);
    let counter = SimCounter::with_mask(hz, mask);
    counter.set(first_count & mask);
    let longest = (mask / 8).min(hz.saturating_mul(10));
    let counts = (longest as u128 * interval as u128 / 1000).max(4) as u64;
    let ns = (counts as u128 * 1_000_000_000).div_ceil(hz as u128) as u64;
    let tk = Timekeeper::builder(counter.clone())
        .windup_interval(Duration::from_nanos(ns))
        .start_at(BinTime::new(start, 0))
        .follows_reference(follows_reference)
        .build()
        .ok()?;
    Some((counter, tk, counts))
}

/// Steps in a walk: fewer under miri, which is a thousand times slower.
fn max_steps() -> usize {
    if cfg!(miri) { 12 } else { 120 }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn nanosecond_reads_are_the_floor_of_the_exact_time(
        hz in prop_oneof![2u64..1_000, 1_000u64..100_000_000, 100_000_000u64..8_000_000_000],
        bits in 20u32..=64,
        interval in 0u64..1000,
        start in prop_oneof![-20i64..20, 0i64..1 << 34],
        first_count in any::<u64>(),
        follows_reference in any::<bool>(),
        steps in proptest::collection::vec(step(), 1..max_steps()),
    ) {
        let Some((counter, tk, interval)) = timekeeper(hz, bits, interval, start, first_count, follows_reference)
        else {
            return Err(TestCaseError::reject("the counter cannot hold such an interval"));
        };
        let mask = u64::MAX >> (64 - bits);
        // Counts since the last windup: past seven eighths of the wrap the
        // exact time itself wraps back (no lost time is promised up to there).
        let mut since_windup = 0u64;
        let mut last = (tk.uptime_nanos(), tk.realtime_nanos());
        prop_assert_eq!(last, expected(&tk));
        for step in steps {
            let mut stepped_realtime = false;
            let mut advance = |counts: u64| {
                counter.advance(counts);
                since_windup = since_windup.saturating_add(counts);
            };
            match step {
                Step::Advance(part) => advance(interval * part / 1000),
                Step::Stall(part) => advance(mask / 8 / 1000 * part),
                Step::Windup => {
                    if tk.windup() == Windup::Published {
                        since_windup = 0;
                    }
                }
                Step::WindupFollowing(part) => {
                    let scale = ((1u128 << 64) / hz as u128) as u64;
                    let lag = BinTime::from_counts(interval * part.unsigned_abs() / 1000, scale);
                    let reference = if part < 0 {
                        tk.uptime().saturating_sub(lag)
                    } else {
                        tk.uptime().saturating_add(lag)
                    };
                    if tk.windup_following(|| reference) == Windup::Published {
                        since_windup = 0;
                    }
                }
                Step::Adjtime(ns) => {
                    tk.adjtime(ns);
                }
                Step::FrequencyAdjustment(ppb) => tk.set_frequency_adjustment(ppb).unwrap(),
                Step::SetRealtime(sec) => {
                    tk.set_realtime(BinTime::new(sec, 0x1234_5678_9abc_def0));
                    stepped_realtime = true;
                }
                Step::Retire => {
                    tk.retire();
                }
            }
            if since_windup > mask - mask / 8 {
                return Ok(());
            }
            let read = (tk.uptime_nanos(), tk.realtime_nanos());
            prop_assert_eq!(read, expected(&tk));
            prop_assert!(read.0 >= last.0, "uptime went from {} to {} ns", last.0, read.0);
            if !stepped_realtime {
                prop_assert!(read.1 >= last.1, "realtime went from {} to {} ns", last.1, read.1);
            }
            last = read;
        }
    }
}
