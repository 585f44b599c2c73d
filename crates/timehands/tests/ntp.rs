//! `ntp_adjtime` over the engine: the leap second (inserted and deleted,
//! realtime showing it as the kernel does, TAI continuous, uptime
//! untouched), the errors' growth, refused settings, and the PLL.

use std::time::Duration;

use timehands::{BinTime, Error, Ntp, NtpStatus, SimCounter, TimeState, Timekeeper, Timex};

/// A 1 kHz timekeeper (a count a millisecond) at realtime `at`, with a
/// 100 ms windup interval, and an `Ntp` with `status` and TAI − UTC 37 s.
fn clock(at: i64, status: NtpStatus) -> (SimCounter, Timekeeper<SimCounter>, Ntp) {
    let counter = SimCounter::new(1_000);
    let tk = Timekeeper::builder(counter.clone())
        .windup_interval(Duration::from_millis(100))
        .build()
        .expect("valid test timekeeper");
    tk.set_realtime(BinTime::new(at, 0));
    let mut ntp = Ntp::new();
    let mut timex = Timex::default();
    timex.status = Some(status);
    timex.tai = Some(37);
    ntp.adjtime(&tk, &timex).unwrap();
    ntp.second(&tk);
    (counter, tk, ntp)
}

/// Realtime's seconds, TAI's seconds, uptime's seconds, and whether the
/// second is a leap second, every 500 ms for `n` steps.
fn run(
    counter: &SimCounter,
    tk: &Timekeeper<SimCounter>,
    ntp: &mut Ntp,
    n: usize,
) -> Vec<(i64, i64, i64, bool)> {
    (0..n)
        .map(|_| {
            for _ in 0..5 {
                counter.advance(100);
                tk.windup();
                ntp.second(tk);
            }
            let now = ntp.gettime(tk);
            (
                now.realtime.sec(),
                now.tai.sec(),
                tk.uptime().sec(),
                now.leap_second,
            )
        })
        .collect()
}

/// An inserted leap second: 23:59:59 twice (the second time shown as
/// 23:59:60), TAI and uptime on without a step, TAI − UTC one more.
#[test]
fn a_leap_second_is_inserted_at_the_end_of_the_day() {
    let day = 20_000 * 86_400;
    let (counter, tk, mut ntp) = clock(day - 2, NtpStatus::INS);
    assert_eq!(ntp.state().state, TimeState::Insert);
    let seen = run(&counter, &tk, &mut ntp, 8);
    let realtime: Vec<i64> = seen.iter().map(|s| s.0 - day).collect();
    assert_eq!(realtime, [-2, -1, -1, -1, -1, 0, 0, 1]);
    let leap: Vec<bool> = seen.iter().map(|s| s.3).collect();
    assert_eq!(leap, [false, false, false, true, true, false, false, false]);
    for (i, &(_, tai, uptime, _)) in seen.iter().enumerate() {
        // TAI is uptime plus a constant: it never stepped.
        assert_eq!(tai - uptime, day - 2 + 37, "{i}: {seen:?}");
    }
    assert_eq!(ntp.state().tai, 38);
    assert_eq!(ntp.state().state, TimeState::Wait);
    let mut clear = Timex::default();
    clear.status = Some(NtpStatus(0));
    ntp.adjtime(&tk, &clear).unwrap();
    run(&counter, &tk, &mut ntp, 2);
    assert_eq!(ntp.state().state, TimeState::Ok);
}

/// A deleted leap second: from 23:59:58 straight to 00:00:00; TAI on.
#[test]
fn a_leap_second_is_deleted_at_the_end_of_the_day() {
    let day = 20_000 * 86_400;
    let (counter, tk, mut ntp) = clock(day - 3, NtpStatus::DEL);
    let seen = run(&counter, &tk, &mut ntp, 6);
    let realtime: Vec<i64> = seen.iter().map(|s| s.0 - day).collect();
    assert_eq!(realtime, [-3, -2, -2, 0, 0, 1]);
    for &(_, tai, uptime, leap) in &seen {
        assert_eq!(tai - uptime, day - 3 + 37);
        assert!(!leap);
    }
    assert_eq!(ntp.state().tai, 36);
}

/// The maximum error grows 500 µs a second up to 16 s, where the clock is
/// marked unsynchronized.
#[test]
fn the_maximum_error_grows_until_unsynchronized() {
    let (counter, tk, mut ntp) = clock(0, NtpStatus::PLL);
    let mut timex = Timex::default();
    timex.maxerror_us = Some(15_999_000);
    timex.esterror_us = Some(20);
    ntp.adjtime(&tk, &timex).unwrap();
    counter.advance(1_000);
    tk.windup();
    ntp.second(&tk);
    assert_eq!(ntp.state().maxerror_us, 15_999_500);
    assert!(!ntp.state().status.contains(NtpStatus::UNSYNC));
    counter.advance(2_000);
    tk.windup();
    ntp.second(&tk);
    let state = ntp.state();
    assert_eq!((state.maxerror_us, state.esterror_us), (16_000_000, 20));
    assert!(state.status.contains(NtpStatus::UNSYNC));
}

/// Settings out of range are refused with the field and value, and change
/// nothing.
#[test]
fn settings_out_of_range_are_refused() {
    let (_, tk, mut ntp) = clock(0, NtpStatus::PLL);
    let before = ntp.state();
    let mut timex = Timex::default();
    timex.constant = Some(11);
    assert_eq!(
        ntp.adjtime(&tk, &timex),
        Err(Error::Timex {
            field: "constant",
            value: 11
        })
    );
    let mut timex = Timex::default();
    timex.frequency_ppb = Some(500_001);
    timex.constant = Some(3);
    assert_eq!(
        ntp.adjtime(&tk, &timex),
        Err(Error::FrequencyAdjustment { ppb: 500_001 })
    );
    let mut timex = Timex::default();
    timex.esterror_us = Some(-1);
    let error = ntp.adjtime(&tk, &timex).unwrap_err();
    assert_eq!(error.to_string().lines().count(), 1);
    assert!(error.to_string().contains("esterror -1"), "{error}");
    assert_eq!(ntp.state(), before);
}

/// The PLL takes a clock 20 ppm slow to its frequency from exact offsets
/// every 16 s, and its phase to within a microsecond.
#[test]
#[cfg_attr(
    miri,
    ignore = "thousands of windups: minutes under miri; the leap tests cover the paths"
)]
fn the_pll_finds_the_frequency() {
    let counter = SimCounter::new(1_000_000);
    let tk = Timekeeper::builder(counter.clone())
        .windup_interval(Duration::from_millis(250))
        .build()
        .unwrap();
    let mut ntp = Ntp::new();
    let mut timex = Timex::default();
    timex.status = Some(NtpStatus::PLL);
    ntp.adjtime(&tk, &timex).unwrap();
    let mut truth = 0i128; // true ns since the start
    for second in 0..4_000 {
        for _ in 0..4 {
            counter.advance(249_995); // 20 ppm slow
            truth += 250_000_000;
            tk.windup();
            ntp.second(&tk);
        }
        if second % 16 == 0 {
            let mut timex = Timex::default();
            timex.offset_ns = Some((truth - tk.realtime().as_nanos()) as i64);
            ntp.adjtime(&tk, &timex).unwrap();
        }
    }
    let state = ntp.state();
    assert!(
        (19_000..=21_000).contains(&state.frequency_ppb),
        "{state:?}"
    );
    let error = truth - tk.realtime().as_nanos();
    assert!(error.abs() < 1_000, "{error}");
}
