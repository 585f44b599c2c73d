//! Stamping captured counts and disciplining to a pulse: a capture is
//! stamped on the hands that was current at it however many windups came
//! since (within the ring), the discipline locks, rejects an outlier and
//! holds over, and no combination of pulses, offsets, slews and steps makes
//! a read step back.

use std::time::Duration;

use proptest::prelude::*;
use timehands::{BinTime, Error, Ntp, NtpStatus, Pps, PpsState, SimCounter, Timekeeper, Timex};

/// A 1 GHz timekeeper with a ring of `hands` and a 100 ms windup interval.
fn timekeeper(hands: usize) -> (SimCounter, Timekeeper<SimCounter>) {
    let counter = SimCounter::new(1_000_000_000);
    let tk = Timekeeper::builder(counter.clone())
        .hands(hands)
        .windup_interval(Duration::from_millis(100))
        .build()
        .expect("valid test timekeeper");
    (counter, tk)
}

/// A capture is stamped as a read at its count returned, after windups
/// that changed the rate and stepped realtime since (the older hands'
/// boottime: realtime as it was at the edge).
#[test]
fn a_pulse_captured_before_windups_is_stamped_on_the_hands_current_then() {
    for hands in [2, 3, 8] {
        let (counter, tk) = timekeeper(hands);
        tk.set_frequency_adjustment(200_000).unwrap();
        tk.adjtime(5_000_000);
        for _ in 0..5 {
            counter.advance(100_000_000);
            tk.windup();
        }
        counter.advance(12_345_678);
        let edge = counter.value();
        let (uptime, realtime) = (tk.uptime(), tk.realtime());
        // Windups that leave the capture's hands in the ring, one a step.
        tk.set_frequency_adjustment(-300_000).unwrap();
        for windup in 0..hands - 1 {
            counter.advance(100_000_000);
            if windup == 0 {
                tk.set_realtime(BinTime::new(1_700_000_000, 0));
            } else {
                tk.windup();
            }
        }
        let stamp = tk.time_of(edge).unwrap();
        assert_eq!(
            (stamp.uptime, stamp.realtime),
            (uptime, realtime),
            "{hands}"
        );
    }
}

/// A capture older than every hands the ring holds is refused, not
/// stamped wrong; a ring of one stamps only counts after its last windup.
#[test]
fn a_capture_older_than_the_ring_is_an_error() {
    for hands in [1, 2, 4] {
        let (counter, tk) = timekeeper(hands);
        counter.advance(1_000);
        let edge = counter.value();
        for _ in 0..hands {
            counter.advance(100_000_000);
            tk.windup();
        }
        assert_eq!(tk.time_of(edge), Err(Error::Capture { count: edge }));
    }
}

/// Runs `seconds` seconds of a counter `ppm` fast, ten windups a second,
/// calling `pulse` at each second's edge with the counter there.
fn seconds(counter: &SimCounter, tk: &Timekeeper<SimCounter>, n: u64, mut pulse: impl FnMut(u64)) {
    for _ in 0..n {
        for _ in 0..10 {
            counter.advance(100_010_000); // 100 ppm fast
            tk.windup();
        }
        pulse(counter.value());
    }
}

/// 100 ppm fast and 300 µs ahead: locked within ten pulses to the ns, a
/// pulse 50 µs late is rejected and moves nothing, and when pulses stop
/// the clock holds its frequency.
#[test]
fn the_discipline_locks_rejects_an_outlier_and_holds_over() {
    let (counter, tk) = timekeeper(8);
    counter.advance(300_000);
    let mut pps = Pps::new();
    seconds(&counter, &tk, 10, |edge| pps.event(&tk, edge).unwrap());
    let status = pps.status(&tk);
    assert_eq!(status.state, PpsState::Locked, "{status:?}");
    assert!(
        (99_999..=100_001).contains(&status.frequency_ppb),
        "{status:?}"
    );
    // A pulse's edge is a whole second of realtime: the clock is on it.
    let error = |tk: &Timekeeper<SimCounter>| {
        let frac = tk.realtime().frac() as i64 as i128;
        (frac * 1_000_000_000) >> 64
    };
    assert!(error(&tk).abs() <= 2, "{}", error(&tk));
    seconds(&counter, &tk, 1, |edge| {
        pps.event(&tk, edge + 50_000).unwrap();
    });
    assert_eq!(pps.status(&tk).outliers, 1);
    assert!(error(&tk).abs() <= 2, "{}", error(&tk));
    // Five seconds without a pulse: holdover, the clock still on time.
    seconds(&counter, &tk, 5, |_| ());
    let status = pps.status(&tk);
    assert_eq!(status.state, PpsState::Holdover, "{status:?}");
    assert!(error(&tk).abs() <= 10, "{}", error(&tk));
}

/// What the clock is put through in the property below.
#[derive(Clone, Debug)]
enum Op {
    /// The counter moves forward, with a windup after.
    Advance(u64),
    /// A pulse captured that many counts before now.
    Pulse(u64),
    /// An NTP offset, ns.
    Offset(i64),
    /// An `adjtime` slew, ns.
    Slew(i64),
    /// A frequency adjustment, ppb.
    Frequency(i64),
    /// A realtime step, s.
    Step(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..3_000_000_000).prop_map(Op::Advance),
        2 => (0u64..1_000_000).prop_map(Op::Pulse),
        1 => (-500_000_000i64..500_000_000).prop_map(Op::Offset),
        1 => (-1_000_000_000i64..1_000_000_000).prop_map(Op::Slew),
        1 => (-500_000i64..=500_000).prop_map(Op::Frequency),
        1 => (0i64..2_000_000_000).prop_map(Op::Step),
    ]
}

proptest! {
    /// Whatever pulses, NTP offsets, slews, frequency changes and realtime
    /// steps come, in any order, uptime never steps back (exact or in ns),
    /// and realtime steps back only when told to.
    #[test]
    fn no_discipline_makes_a_read_step_back(ops in prop::collection::vec(op(), 1..40)) {
        let (counter, tk) = timekeeper(4);
        let mut pps = Pps::new().step_threshold(u64::MAX);
        let mut ntp = Ntp::new();
        let mut timex = Timex::default();
        timex.status = Some(NtpStatus::PLL);
        ntp.adjtime(&tk, &timex).unwrap();
        let (mut uptime, mut nanos, mut realtime) = (tk.uptime(), tk.uptime_nanos(), tk.realtime());
        for op in ops {
            let mut stepped = false;
            match op {
                Op::Advance(counts) => {
                    counter.advance(counts);
                    tk.windup();
                    ntp.second(&tk);
                }
                Op::Pulse(ago) => {
                    let _ = pps.event(&tk, counter.value().saturating_sub(ago));
                }
                Op::Offset(ns) => {
                    let mut timex = Timex::default();
                    timex.offset_ns = Some(ns);
                    ntp.adjtime(&tk, &timex).unwrap();
                }
                Op::Slew(ns) => {
                    tk.adjtime(ns);
                }
                Op::Frequency(ppb) => tk.set_frequency_adjustment(ppb).unwrap(),
                Op::Step(sec) => {
                    tk.set_realtime(BinTime::new(sec, 0));
                    stepped = true;
                }
            }
            let (u, n, r) = (tk.uptime(), tk.uptime_nanos(), tk.realtime());
            prop_assert!(u >= uptime && n >= nanos, "{op:?}: {uptime:?} -> {u:?}");
            prop_assert!(stepped || r >= realtime, "{op:?}: {realtime:?} -> {r:?}");
            (uptime, nanos, realtime) = (u, n, r);
        }
    }
}
