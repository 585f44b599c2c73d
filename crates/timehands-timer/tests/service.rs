//! The threaded service: timers fire, on the right side, not before their
//! deadline; cancel, reschedule and periodic timers work; `sleep_until`
//! returns not before its deadline. No timing thresholds: the generous
//! `recv_timeout`s only turn a hang into a failure.

use std::sync::mpsc;
use std::time::Duration;

use timehands::Instant;
use timehands_timer::{Builder, Expiry, Scheduling, TimerService, sleep_until};

const HANG: Duration = Duration::from_secs(60);

fn soon(micros: u64) -> Instant {
    timehands::now() + Duration::from_micros(micros)
}

/// Each expiry with the time the callback saw and the thread it ran on.
fn reporter(tx: mpsc::Sender<(Expiry, Instant, String)>) -> impl FnMut(Expiry) + Send + 'static {
    move |expiry| {
        let name = std::thread::current().name().unwrap_or("").to_string();
        let _ = tx.send((expiry, timehands::now(), name));
    }
}

#[test]
fn hard_and_soft_timers_fire_once_on_their_own_threads_never_early() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let hard = soon(500);
    let soft = soon(300);
    service.hard_at(hard, reporter(tx.clone()));
    service.soft_at(soft, Duration::from_micros(100), reporter(tx));
    let mut seen = vec![
        rx.recv_timeout(HANG).unwrap(),
        rx.recv_timeout(HANG).unwrap(),
    ];
    seen.sort_by_key(|(e, _, _)| e.deadline);
    assert_eq!(seen[0].0.deadline, soft);
    assert_eq!(seen[0].2, "timehands-soft");
    assert_eq!(seen[1].0.deadline, hard);
    assert_eq!(seen[1].2, "timehands-hard");
    for (expiry, at, _) in &seen {
        assert!(*at >= expiry.deadline, "{expiry:?} fired at {at:?}");
        assert_eq!(expiry.overruns, 0);
    }
    drop(service);
    assert!(rx.recv().is_err(), "fired more than once");
}

#[test]
fn a_cancelled_timer_never_fires_and_a_fired_one_cannot_be_cancelled() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let far_hard = service.hard_at(soon(200_000), reporter(tx.clone()));
    let far_soft = service.soft_at(soon(200_000), Duration::ZERO, reporter(tx.clone()));
    assert!(far_hard.cancel());
    assert!(far_soft.cancel());
    assert!(!far_hard.cancel(), "cancelled twice");
    let near = service.hard_at(soon(100), reporter(tx));
    assert!(rx.recv_timeout(HANG).is_ok());
    assert!(!near.cancel(), "already fired");
    // Wait past the cancelled deadlines: nothing else arrives.
    sleep_until(soon(250_000));
    drop(service);
    assert!(rx.recv().is_err());
}

#[test]
fn reschedule_moves_a_timer_and_fails_after_it_fired() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let timer = service.soft_at(soon(3_600_000_000), Duration::ZERO, reporter(tx));
    let moved = soon(200);
    assert!(timer.reschedule(moved));
    let (expiry, at, _) = rx.recv_timeout(HANG).unwrap();
    assert_eq!(expiry.deadline, moved);
    assert!(at >= moved);
    assert!(!timer.reschedule(soon(100)));
}

#[test]
fn a_periodic_timer_keeps_its_phase_and_counts_every_period() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let first = soon(100);
    let period = Duration::from_micros(300);
    let timer = service.hard_periodic(first, period, reporter(tx));
    let expiries: Vec<Expiry> = (0..5).map(|_| rx.recv_timeout(HANG).unwrap().0).collect();
    assert!(timer.cancel());
    // Each expiry is on the series first + k * period, and the periods in
    // between were all either fired or counted as overruns.
    let mut next = first;
    for expiry in expiries {
        assert_eq!(expiry.deadline, next);
        next = expiry.deadline + period * (expiry.overruns as u32 + 1);
    }
}

#[test]
fn callbacks_may_arm_timers_and_a_panic_loses_only_its_timer() {
    let service = std::sync::Arc::new(TimerService::new().unwrap());
    let (tx, rx) = mpsc::channel();
    service.hard_at(soon(50), |_| panic!("a callback's panic"));
    let chained = std::sync::Arc::clone(&service);
    service.soft_at(soon(100), Duration::ZERO, move |_| {
        chained.hard_at(soon(100), reporter(tx.clone()));
    });
    let (_, _, thread) = rx.recv_timeout(HANG).unwrap();
    assert_eq!(thread, "timehands-hard");
    assert_eq!(service.hard_lateness().len(), 2);
    assert_eq!(service.soft_lateness().len(), 1);
}

#[test]
fn the_hard_threads_scheduling_is_reported() {
    let normal = Builder::new().realtime_priority(None).build().unwrap();
    assert!(matches!(normal.scheduling(), Scheduling::Normal { .. }));
    let out_of_range = Builder::new()
        .realtime_priority(Some(1000))
        .build()
        .unwrap();
    match out_of_range.scheduling() {
        Scheduling::Normal { reason } => assert!(reason.contains("1000"), "{reason}"),
        other => panic!("priority 1000 granted: {other}"),
    }
    // Priority 50 is granted or refused with a reason, depending on the
    // process's rights; either way it is said.
    match TimerService::new().unwrap().scheduling() {
        Scheduling::Fifo { priority } => assert_eq!(*priority, 50),
        Scheduling::Normal { reason } => assert!(reason.contains("refused"), "{reason}"),
    }
}

#[test]
fn sleep_until_returns_not_before_its_deadline() {
    for micros in [0, 1, 50, 500] {
        let deadline = soon(micros);
        sleep_until(deadline);
        // Checked on CLOCK_MONOTONIC itself, the clock the sleep is on.
        let woke = Instant::from(std::time::Instant::now());
        assert!(woke >= deadline, "woke at {woke:?} before {deadline:?}");
    }
    // A deadline long past returns at once rather than failing.
    sleep_until(Instant::from_nanos(1));
}
