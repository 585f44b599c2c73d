//! Invariant 1 and every conversion of `BinTime`, against a big-integer oracle.
//!
//! The oracle works in exact rationals: a `BinTime` is the integer
//! `sec * 2^64 + frac` in units of 2^-64 s; conversions are exact products and
//! floor divisions of big integers, which the code under test must match bit for
//! bit without dividing.

use std::time::Duration;

use num_bigint::BigInt;
use proptest::prelude::*;
use timehands::BinTime;

fn units(t: BinTime) -> BigInt {
    (BigInt::from(t.sec()) << 64) + BigInt::from(t.frac())
}

fn from_units(u: &BigInt) -> Option<BinTime> {
    let sec = i64::try_from(u >> 64u32).ok()?;
    let frac = u64::try_from(u - (BigInt::from(sec) << 64)).unwrap();
    Some(BinTime::new(sec, frac))
}

/// floor(a / b) for b > 0.
fn floor_div(a: &BigInt, b: &BigInt) -> BigInt {
    let q = a / b;
    if a < &BigInt::from(0) && &q * b != *a {
        q - 1
    } else {
        q
    }
}

/// The time `t` in units of `1/per_sec` s, rounded toward negative infinity.
fn floor_in(t: BinTime, per_sec: u64) -> BigInt {
    floor_div(&(units(t) * per_sec), &(BigInt::from(1) << 64))
}

/// The least `BinTime` that is at least `n / per_sec` seconds.
fn least_at_least(n: &BigInt, per_sec: u64) -> BigInt {
    -floor_div(&(-(n << 64u32)), &BigInt::from(per_sec))
}

fn bintime() -> impl Strategy<Value = BinTime> {
    prop_oneof![
        (any::<i64>(), any::<u64>()).prop_map(|(s, f)| BinTime::new(s, f)),
        (-1_000_000i64..1_000_000, any::<u64>()).prop_map(|(s, f)| BinTime::new(s, f)),
        Just(BinTime::MAX),
        Just(BinTime::MIN),
        Just(BinTime::ZERO),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Invariant 1: for every delta below 2^64 and every scale, scaling equals
    /// the exact product (the exact rational value at 2^-64 s resolution),
    /// saturating only where the product is beyond the range of `BinTime`.
    #[test]
    fn scaling_is_the_exact_product(delta in any::<u64>(), scale in any::<u64>()) {
        let exact = BigInt::from(delta) * BigInt::from(scale);
        let scaled = BinTime::from_counts(delta, scale);
        match from_units(&exact) {
            Some(t) => prop_assert_eq!(scaled, t),
            None => prop_assert_eq!(scaled, BinTime::MAX),
        }
    }

    #[test]
    fn scaling_small_deltas_is_exact(delta in 0u64..1 << 40, scale in any::<u64>()) {
        let scaled = BinTime::from_counts(delta, scale);
        prop_assert_eq!(units(scaled), BigInt::from(delta) * BigInt::from(scale));
    }

    #[test]
    fn order_is_the_order_of_values(a in bintime(), b in bintime()) {
        prop_assert_eq!(a.cmp(&b), units(a).cmp(&units(b)));
    }

    #[test]
    fn add_and_sub_are_exact_or_none(a in bintime(), b in bintime()) {
        prop_assert_eq!(a.checked_add(b), from_units(&(units(a) + units(b))));
        prop_assert_eq!(a.checked_sub(b), from_units(&(units(a) - units(b))));
        let sum = a.saturating_add(b);
        match from_units(&(units(a) + units(b))) {
            Some(t) => prop_assert_eq!(sum, t),
            None if b.sec() < 0 => prop_assert_eq!(sum, BinTime::MIN),
            None => prop_assert_eq!(sum, BinTime::MAX),
        }
        let difference = a.saturating_sub(b);
        match from_units(&(units(a) - units(b))) {
            Some(t) => prop_assert_eq!(difference, t),
            None if b.sec() < 0 => prop_assert_eq!(difference, BinTime::MAX),
            None => prop_assert_eq!(difference, BinTime::MIN),
        }
    }

    #[test]
    fn as_nanos_rounds_toward_negative_infinity(t in bintime()) {
        prop_assert_eq!(BigInt::from(t.as_nanos()), floor_in(t, 1_000_000_000));
    }

    /// `from_nanos(n)` is the least `BinTime` that is n ns, so it converts back
    /// to exactly `n` and nothing smaller does.
    #[test]
    fn from_nanos_is_the_least_bintime_of_those_nanoseconds(ns in any::<i128>()) {
        let n = BigInt::from(ns);
        match from_units(&least_at_least(&n, 1_000_000_000)) {
            Some(t) => {
                prop_assert_eq!(BinTime::checked_from_nanos(ns), Some(t));
                prop_assert_eq!(BinTime::from_nanos(ns), t);
                prop_assert_eq!(t.as_nanos(), ns);
            }
            None => {
                prop_assert_eq!(BinTime::checked_from_nanos(ns), None);
                let saturated = if ns < 0 { BinTime::MIN } else { BinTime::MAX };
                prop_assert_eq!(BinTime::from_nanos(ns), saturated);
            }
        }
    }

    #[test]
    fn nanoseconds_round_trip(ns in -(1i128 << 90)..(1i128 << 90)) {
        prop_assert_eq!(BinTime::from_nanos(ns).as_nanos(), ns);
    }

    #[test]
    fn timespec_and_timeval_are_floors_and_round_trip(t in bintime()) {
        let (sec, nsec) = t.to_timespec();
        prop_assert_eq!(
            BigInt::from(sec) * 1_000_000_000 + BigInt::from(nsec),
            floor_in(t, 1_000_000_000)
        );
        let back = BinTime::from_timespec(sec, nsec).unwrap();
        prop_assert_eq!(units(back), least_at_least(&floor_in(t, 1_000_000_000), 1_000_000_000));
        prop_assert!(back <= t);

        let (sec, usec) = t.to_timeval();
        prop_assert_eq!(BigInt::from(sec) * 1_000_000 + BigInt::from(usec), floor_in(t, 1_000_000));
        let back = BinTime::from_timeval(sec, usec).unwrap();
        prop_assert_eq!(units(back), least_at_least(&floor_in(t, 1_000_000), 1_000_000));
        prop_assert_eq!(back.to_timeval(), (sec, usec));
    }

    #[test]
    fn durations_convert_exactly(secs in 0u64..=i64::MAX as u64, nanos in 0u32..1_000_000_000) {
        let d = Duration::new(secs, nanos);
        let t = BinTime::try_from(d).unwrap();
        prop_assert_eq!(Duration::try_from(t).unwrap(), d);
        prop_assert_eq!(BigInt::from(t.as_nanos()), BigInt::from(d.as_nanos()));
    }

    #[test]
    fn display_shows_floor_nanoseconds(t in bintime()) {
        let ns = floor_in(t, 1_000_000_000);
        let sign = if ns < BigInt::from(0) { "-" } else { "" };
        let abs = if ns < BigInt::from(0) { -ns } else { ns };
        let billion = BigInt::from(1_000_000_000);
        let expected = format!("{sign}{}.{:0>9}", &abs / &billion, (&abs % &billion).to_string());
        prop_assert_eq!(t.to_string(), expected);
    }
}

#[test]
fn out_of_range_conversions_are_errors_that_say_why() {
    let err = BinTime::from_timespec(0, 1_000_000_000).unwrap_err();
    assert!(err.to_string().contains("nanoseconds must be below"));
    let err = BinTime::from_timeval(0, 1_000_000).unwrap_err();
    assert!(err.to_string().contains("microseconds must be below"));
    let err = Duration::try_from(BinTime::new(-1, 0)).unwrap_err();
    assert!(err.to_string().contains("negative"));
    let err = BinTime::try_from(Duration::new(u64::MAX, 0)).unwrap_err();
    assert!(err.to_string().contains("2^63"));
}

#[test]
#[should_panic(expected = "overflow when adding")]
fn operator_add_panics_on_overflow_as_integers_do() {
    let _ = BinTime::MAX + BinTime::new(0, 1);
}
