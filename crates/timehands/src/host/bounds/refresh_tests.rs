//! The sources' steps, one at a time: chronyd's answers and what is kept
//! of them (its correction, its `maxclockerror`, a step, a stop),
//! ClockBound 2's segment, the kernel's state.

use super::*;
use crate::host::bounds::{BoundsSource, LeapSecond};

/// 2026-11-23 12:00:00 UTC, in ns.
const NOON: u64 = 1_795_435_200_000_000_000;

/// An offset measured to 100 ns.
fn at(ns: i64) -> Offset {
    Offset {
        ns,
        uncertainty: 100,
    }
}

/// A measure wide by a preemption is no step; a step beyond both
/// measures' uncertainty is.
#[test]
fn an_offset_moved_only_beyond_both_measures() {
    let wide = Offset {
        ns: 2_000_000,
        uncertainty: 2_500_000,
    };
    assert_eq!(wide.moved_from(&at(0)), 0);
    assert_eq!(at(5_000).moved_from(&at(0)), 4_800);
    assert_eq!(at(0).moved_from(&at(5_000)), 4_800);
    let now = realtime_offset();
    assert!(now.uncertainty >= 1, "{now:?}");
}

fn tracking(correction: f64, dispersion: f64) -> Tracking {
    Tracking {
        ref_id: 0x7f00_0001,
        leap_status: 0,
        ref_time: 1_795_435_199.5,
        current_correction: correction,
        resid_freq_ppm: -0.25,
        skew_ppm: 0.5,
        root_delay: 100e-6,
        root_dispersion: dispersion,
        last_update_interval: 2.0,
    }
}

/// The correction still to slew widens the side it is on, and only
/// that; the rate is chronyd's skew, residual frequency and
/// `maxclockerror`, a tenth more for the slew.
#[test]
fn chronyd_s_correction_widens_its_own_side() {
    let behind = from_tracking(&tracking(20e-6, 40e-6), NOON, 1_000, None);
    assert_eq!((behind.below, behind.above), (90_000, 110_000));
    assert_eq!(behind.rate_q32, q32(1_925), "(500 + 250 + 1000) * 1.1");
    assert_eq!(behind.status, Some(BoundsStatus::Synchronized));
    assert_eq!(behind.source, BoundsSource::Chronyd);
    assert_eq!(
        behind.free_running_at,
        NOON - SECOND + 16 * SECOND + SECOND / 2
    );
    let ahead = from_tracking(&tracking(-20e-6, 40e-6), NOON, 1_000, None);
    assert_eq!((ahead.below, ahead.above), (110_000, 90_000));
    let unsynchronized = from_tracking(
        &Tracking {
            leap_status: 3,
            ..tracking(0.0, 0.0)
        },
        NOON,
        1_000,
        None,
    );
    assert_eq!(unsynchronized.status, None);
}

const SECOND: u64 = 1_000_000_000;

/// Two answers of one update, 1 s apart, whose dispersion grew by
/// 1.75 µs: 0.75 ppm of it stated, so `maxclockerror` is 1 ppm.
#[test]
fn maxclockerror_is_read_off_the_dispersion_s_growth() {
    let first = Answer {
        tracking: tracking(0.0, 40e-6),
        received: 5 * SECOND,
    };
    let second = tracking(0.0, 41.75e-6);
    let ppb = max_clock_error_ppb(&first, &second, 6 * SECOND).expect("measured");
    assert!((999..=1_001).contains(&ppb), "{ppb}");
    // Another update, answers too close, or unsynchronized: no measure.
    let other = Tracking {
        ref_time: 1_795_435_201.0,
        ..second
    };
    assert_eq!(max_clock_error_ppb(&first, &other, 6 * SECOND), None);
    assert_eq!(
        max_clock_error_ppb(&first, &second, 5 * SECOND + 1_000),
        None
    );
    let lost = Tracking {
        leap_status: 3,
        ..second
    };
    assert_eq!(max_clock_error_ppb(&first, &lost, 6 * SECOND), None);
}

/// chronyd's last synchronized state is carried on, free-running and
/// wider by the step tolerance once, growing faster by a change of the
/// kernel's rate, while the clock is not stepped; a step, or a slew's
/// rate, ends it.
#[test]
fn a_stopped_chronyd_s_state_is_carried_on_until_a_step() {
    let mut sources = Sources::new(1, None);
    assert_eq!(sources.carried_on(at(0), None), None, "nothing held");
    let held = from_tracking(&tracking(20e-6, 40e-6), NOON, 1_000, None);
    let hold = |sources: &mut Sources| {
        sources.held = Some(Held {
            state: held,
            offset: at(5_000),
            ref_time: 1.0,
            rate_ppb: Some(1_000),
            rate_change_ppb: 0,
        });
    };
    hold(&mut sources);
    for _ in 0..2 {
        let carried = sources.carried_on(at(5_400), Some(1_000)).expect("no step");
        assert_eq!(carried.status, Some(BoundsStatus::FreeRunning));
        assert_eq!((carried.below, carried.above), (91_000, 111_000));
        assert_eq!(
            (carried.as_of, carried.rate_q32),
            (held.as_of, held.rate_q32)
        );
    }
    // The kernel's rate moved by 2 ppm, and back: 2 ppm more growth
    // (with the slew's tenth), for good.
    let moved = sources.carried_on(at(5_000), Some(3_000)).expect("no step");
    assert_eq!(moved.rate_q32, held.rate_q32 + q32(2_200));
    let back = sources.carried_on(at(5_000), Some(1_000)).expect("no step");
    assert_eq!(back.rate_q32, moved.rate_q32);
    // A slew's rate is past what the read grows: no bound from then on.
    assert_eq!(
        sources.carried_on(at(5_000), Some(83_333_000)),
        None,
        "a slew"
    );
    assert_eq!(
        sources.carried_on(at(5_000), Some(1_000)),
        None,
        "after a slew"
    );
    hold(&mut sources);
    assert_eq!(
        sources.carried_on(at(5_000 + 1_201), Some(1_000)),
        None,
        "a step"
    );
    assert_eq!(
        sources.carried_on(at(5_000), Some(1_000)),
        None,
        "dropped for good"
    );
}

/// A step by someone else while chronyd made no update: no bound from
/// that update, until chronyd's next; chronyd's own step (at an update)
/// is no such step.
#[test]
fn a_step_by_someone_else_ends_chronyd_s_bound_until_its_next_update() {
    let mut sources = Sources::new(1, None);
    let answer = tracking(20e-6, 40e-6);
    sources.held = Some(Held {
        state: from_tracking(&answer, NOON, 1_000, None),
        offset: at(5_000),
        ref_time: answer.ref_time,
        rate_ppb: None,
        rate_change_ppb: 0,
    });
    assert!(
        !sources.stepped_since(&answer, at(5_000 + 100_000)),
        "within the bound"
    );
    assert!(
        sources.stepped_since(&answer, at(5_000 + 300_000_000)),
        "a step"
    );
    assert!(sources.stepped_since(&answer, at(5_000)), "the same update");
    let next = Tracking {
        ref_time: answer.ref_time + 1.0,
        ..answer
    };
    assert!(
        !sources.stepped_since(&next, at(5_000 + 300_000_000)),
        "chronyd's update"
    );
}

#[test]
fn the_kernel_s_maxerror_grows_at_500_ppm_and_an_unsynchronized_kernel_gives_none() {
    let ntp = |synchronized| NtpState {
        synchronized,
        maxerror_us: 1_500,
        esterror_us: 20,
        tai_offset_s: 37,
        leap: LeapSecond::None,
        rate_ppb: None,
    };
    let state = from_kernel(NOON, &ntp(true));
    assert_eq!(
        (state.below, state.above, state.rate_q32),
        (1_500_000, 1_500_000, q32(500_000))
    );
    assert_eq!(state.status, Some(BoundsStatus::Synchronized));
    assert_eq!(from_kernel(NOON, &ntp(false)).status, None);
}

/// Steps until one publishes, each after the wait the last set (an
/// answer sent may reach the socket a moment after the server counted
/// it, on a loaded machine).
#[cfg(unix)]
pub(super) fn published(sources: &mut Sources) -> (State, Duration) {
    loop {
        match sources.advance() {
            (Some(state), wait) => return (state, wait),
            (None, wait) => std::thread::sleep(wait),
        }
    }
}

/// Steps against a chronyd of the test's own: a step sends the request
/// and publishes nothing; a step after the answer came publishes
/// chronyd's state, and asks again 20 ms on to measure
/// `maxclockerror`; with chronyd gone its last state is carried on,
/// free-running.
#[cfg(unix)]
#[test]
#[cfg_attr(miri, ignore = "sockets")]
fn steps_take_chronyd_s_answer_a_step_after_its_request() {
    let chronyd = super::super::fake_chronyd::FakeChronyd::start();
    let mut sources = Sources::new(std::process::id(), Some(chronyd.address));
    let replied = chrony::parse(&chrony::tests::reply(1), 1).expect("a reply");
    let stated = ((replied.skew_ppm + replied.resid_freq_ppm.abs()) * 1e3).ceil() as u64;
    assert_eq!(sources.advance(), (None, PICKUP), "asked");
    chronyd.wait_answered(1);
    let (state, wait) = published(&mut sources);
    assert_eq!(
        (state.source, state.status),
        (BoundsSource::Chronyd, Some(BoundsStatus::Synchronized))
    );
    assert_eq!(wait, MEASURE_SPAN, "asks again to measure");
    assert_eq!(
        state.rate_q32,
        read_rate(stated + ASSUMED_MAX_CLOCK_ERROR_PPB),
        "skew and residual frequency, the assumed maxclockerror"
    );
    // The span the measure needs, as the wait said.
    std::thread::sleep(MEASURE_SPAN);
    assert_eq!(sources.advance(), (None, PICKUP), "asked again");
    chronyd.wait_answered(2);
    let (state, wait) = published(&mut sources);
    // The test's replies keep their dispersion: nothing beyond the
    // stated rates.
    assert_eq!(sources.max_clock_error_ppb, Some(0));
    assert_eq!(state.rate_q32, read_rate(stated));
    assert_eq!(wait, REFRESH_INTERVAL);
    let port = sources.chronyd.as_ref().expect("a socket").local_port();
    drop(chronyd);
    assert_eq!(sources.advance(), (None, PICKUP), "asked, nobody there");
    // The refusal comes at once on loopback, or the timeout in 500 ms.
    let (carried, wait) = published(&mut sources);
    assert_eq!(wait, REFRESH_INTERVAL);
    // chronyd's last state, free-running; or, where another process
    // (a test of the kernel's clock) stepped the clock or changed its
    // rate meanwhile, the next source's: never chronyd synchronized.
    match carried.source {
        BoundsSource::Chronyd => {
            assert_eq!(carried.status, Some(BoundsStatus::FreeRunning))
        }
        other => println!("chronyd's state not carried on ({other:?}): the clock moved"),
    }
    // Sources of another process (a forked child's): a socket of
    // their own, which asks from another port.
    let chronyd = super::super::fake_chronyd::FakeChronyd::start();
    sources.belong_to(std::process::id() + 1, false);
    sources.address = Some(chronyd.address);
    assert!(sources.chronyd.is_none() && sources.held.is_none());
    assert_eq!(sources.advance(), (None, PICKUP));
    chronyd.wait_answered(1);
    let peers = chronyd.peers();
    assert_eq!(peers.len(), 1);
    assert!(peers.iter().all(|p| p.port() != port), "{peers:?} {port}");
}

/// A step with no chronyd to ask publishes the next source's state at
/// once.
#[test]
#[cfg_attr(miri, ignore = "calls adjtimex")]
fn without_chronyd_a_step_publishes_the_next_source_at_once() {
    let mut sources = Sources::new(std::process::id(), None);
    let (state, wait) = sources.advance();
    assert_eq!(wait, REFRESH_INTERVAL);
    if let Some(state) = state {
        assert_ne!(state.source, BoundsSource::Chronyd, "{state:?}");
    }
}

/// ClockBound's bound, grown to now, on both sides; its drift with the
/// slew's tenth.
#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(miri, ignore = "reads the kernel's clocks")]
fn clockbound_s_segment_gives_its_bound() {
    let monotonic = kernel_now(KernelClock::Monotonic);
    let mut segment = vec![0u8; 80];
    segment[0..4].copy_from_slice(&0x414D_5A4Eu32.to_ne_bytes());
    segment[4..8].copy_from_slice(&0x4342_0200u32.to_ne_bytes());
    segment[12..14].copy_from_slice(&2u16.to_ne_bytes());
    segment[14..16].copy_from_slice(&2u16.to_ne_bytes());
    let as_of = monotonic / SECOND;
    segment[16..24].copy_from_slice(&(as_of as i64).to_ne_bytes());
    segment[32..40].copy_from_slice(&(as_of as i64 + 1000).to_ne_bytes());
    segment[48..56].copy_from_slice(&91_000i64.to_ne_bytes());
    segment[64..68].copy_from_slice(&1_000u32.to_ne_bytes());
    segment[68..72].copy_from_slice(&1i32.to_ne_bytes());
    let path = std::env::temp_dir().join(format!("timehands-clockbound-{}", std::process::id()));
    std::fs::write(&path, &segment).expect("a temporary file");
    let c_path = std::ffi::CString::new(path.to_str().expect("UTF-8")).expect("no NUL");
    let mut mapped = Page::new(Box::leak(c_path.into_boxed_c_str()));
    let reading = clockbound::look(&mut mapped).expect("a reading");
    std::fs::remove_file(&path).expect("removed");
    assert_eq!(clockbound::look(&mut mapped), Some(reading), "still mapped");
    let state = from_clockbound(&reading, None).expect("a reading");
    assert_eq!(state.source, BoundsSource::ClockBound);
    assert_eq!(state.status, Some(BoundsStatus::Synchronized));
    assert_eq!(state.below, state.above);
    // 91 µs, and 1 ppm for at most a few seconds since.
    assert!((91_000..100_000).contains(&state.below), "{state:?}");
    assert_eq!(state.rate_q32, q32(1_100));
    let stale = clockbound::ClockBoundReading {
        as_of: Duration::from_nanos(monotonic) - Duration::from_secs(11),
        ..reading
    };
    assert_eq!(from_clockbound(&stale, None), None, "stale");
    let mut absent = Page::new(c"/nonexistent/shm0");
    assert_eq!(clockbound::look(&mut absent), None);
}
