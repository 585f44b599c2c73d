//! The threaded service: timers fire once, on the right side, not before
//! their deadline, hard ones even while the soft thread is stuck; cancel before, during and after expiry, also from a
//! timer's own callback; reschedule; periodic timers keep their phase and
//! count what they missed; a panicking callback and a callback that drops
//! the service; `sleep_until` returns not before its deadline. No timing
//! thresholds: the generous `recv_timeout`s only turn a hang into a failure,
//! and "during expiry" is made by holding the expiry thread in a callback.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock, mpsc};
use std::time::Duration;

use timehands::Instant;
use timehands_timer::{Builder, Expiry, Scheduling, Timer, TimerService, sleep_until};

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

/// A one-shot timer on either side (soft ones with no slack).
fn arm(
    service: &TimerService,
    hard: bool,
    deadline: Instant,
    callback: impl FnMut(Expiry) + Send + 'static,
) -> Timer {
    if hard {
        service.hard_at(deadline, callback)
    } else {
        service.soft_at(deadline, Duration::ZERO, callback)
    }
}

/// Holds one side's expiry thread inside a callback until the returned
/// sender is dropped, so that timers coming due meanwhile stay in their
/// queue; returns once the thread is held.
fn hold(service: &TimerService, hard: bool) -> mpsc::Sender<()> {
    let (started, held) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    arm(service, hard, timehands::now(), move |_| {
        let _ = started.send(());
        let _ = released.recv();
    });
    held.recv_timeout(HANG).unwrap();
    release
}

#[test]
fn thousands_of_timers_armed_and_cancelled_while_others_fire_each_fire_once() {
    // The defaults, and rounds of a single step with soft ticks of 1 µs, so
    // that the wheel spreads the timers over three levels and the soft
    // thread cascades them one move per round.
    for builder in [Builder::new(), Builder::new().batch(1).soft_tick_shift(10)] {
        let service = builder.build().unwrap();
        let (tx, rx) = mpsc::channel();
        let mut expected = BTreeSet::new();
        let mut seed = 1u64;
        for id in 0..4000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let deadline = soon((seed >> 33) % 5000);
            let tx = tx.clone();
            let callback = move |expiry: Expiry| {
                let _ = tx.send((id, expiry.deadline, timehands::now()));
            };
            let timer = if id % 4 == 0 {
                service.hard_at(deadline, callback)
            } else {
                let slack = Duration::from_micros((seed >> 20) % 300);
                service.soft_at(deadline, slack, callback)
            };
            // A third are cancelled, racing their expiry: `false` means the
            // timer fired or is firing.
            if id % 3 == 0 && timer.cancel() {
                continue;
            }
            expected.insert(id);
        }
        drop(tx);
        for _ in 0..expected.len() {
            let (id, deadline, at) = rx.recv_timeout(HANG).unwrap();
            assert!(
                expected.remove(&id),
                "timer {id} fired twice or after cancel"
            );
            assert!(
                at >= deadline,
                "timer {id} due {deadline:?} fired at {at:?}"
            );
        }
        drop(service);
        assert!(rx.recv().is_err(), "a timer fired twice or after cancel");
    }
}

#[test]
fn a_hard_timer_fires_while_the_soft_thread_is_held_in_a_callback() {
    let service = TimerService::new().unwrap();
    let release = hold(&service, false);
    // Soft timers due meanwhile wait for the held thread; the hard one
    // waits for nothing soft.
    let (tx, rx) = mpsc::channel();
    service.soft_at(timehands::now(), Duration::ZERO, reporter(tx.clone()));
    let deadline = soon(100);
    service.hard_at(deadline, reporter(tx));
    let (expiry, _, thread) = rx.recv_timeout(HANG).unwrap();
    assert_eq!(
        (expiry.deadline, thread.as_str()),
        (deadline, "timehands-hard")
    );
    drop(release);
    let (_, _, thread) = rx.recv_timeout(HANG).unwrap();
    assert_eq!(thread, "timehands-soft");
}

#[test]
fn cancel_before_during_and_after_expiry_on_both_sides() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    for hard in [true, false] {
        let before = arm(&service, hard, soon(3_600_000_000), reporter(tx.clone()));
        assert!(before.cancel());
        assert!(!before.cancel(), "cancelled twice");
        // During: due, but not yet taken, its thread being held elsewhere.
        let release = hold(&service, hard);
        let due = arm(&service, hard, timehands::now(), reporter(tx.clone()));
        let after_deadline = timehands::now();
        let after = arm(&service, hard, after_deadline, reporter(tx.clone()));
        assert!(due.cancel());
        drop(release);
        // `due` comes first in its queue: had it stayed armed, it would have
        // fired before `after`.
        let (expiry, _, _) = rx.recv_timeout(HANG).unwrap();
        assert_eq!(expiry.deadline, after_deadline);
        assert!(!after.cancel(), "already fired");
    }
    drop(tx);
    drop(service);
    assert!(rx.recv().is_err(), "a cancelled timer fired");
}

#[test]
fn callbacks_may_cancel_or_reschedule_their_own_timers() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let later = soon(3_600_000_000);
    for periodic in [true, false] {
        // The timer's handle reaches its callback before the timer is due.
        let own = Arc::new(OnceLock::<Timer>::new());
        let handle = Arc::clone(&own);
        let tx = tx.clone();
        let callback = move |_| {
            let timer = handle.get().expect("set before due");
            let _ = tx.send((periodic, timer.reschedule(later), timer.cancel()));
        };
        let timer = if periodic {
            service.hard_periodic(later, Duration::from_micros(100), callback)
        } else {
            service.hard_at(later, callback)
        };
        assert!(own.set(timer.clone()).is_ok());
        assert!(timer.reschedule(soon(100)));
    }
    // A periodic timer is armed while its callback runs: it may move and
    // cancel itself. A one-shot one has fired: it can do neither.
    let mut seen = vec![
        rx.recv_timeout(HANG).unwrap(),
        rx.recv_timeout(HANG).unwrap(),
    ];
    seen.sort_unstable();
    assert_eq!(seen, [(false, false, false), (true, true, true)]);
    drop(tx);
    drop(service);
    assert!(
        rx.recv().is_err(),
        "the periodic timer fired after cancelling itself"
    );
}

#[test]
fn cancelling_a_timer_may_drop_the_last_reference_to_the_service() {
    let service = Arc::new(TimerService::new().unwrap());
    let captured = Arc::clone(&service);
    let timer = service.hard_at(soon(3_600_000_000), move |_| {
        let _ = captured.scheduling();
    });
    drop(service);
    // Cancelling drops the callback, and with it the service: on a thread of
    // its own, so that a deadlock fails the test instead of hanging it.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(timer.cancel());
    });
    assert_eq!(rx.recv_timeout(HANG), Ok(true));
}

#[test]
fn a_callback_may_drop_the_last_reference_to_the_service() {
    let service = Arc::new(TimerService::new().unwrap());
    let (tx, rx) = mpsc::channel();
    let mut last = Some(Arc::clone(&service));
    let timer = service.hard_at(soon(3_600_000_000), move |_| {
        drop(last.take());
        let _ = tx.send(());
    });
    // Made due only once the callback holds the last reference.
    drop(service);
    assert!(timer.reschedule(soon(100)));
    rx.recv_timeout(HANG)
        .expect("the callback returns after dropping the service");
}

#[test]
fn reschedule_moves_a_timer_and_fails_after_it_fired() {
    let service = TimerService::new().unwrap();
    for hard in [true, false] {
        // An idle expiry thread sleeps on its alarm, set for the hour: the
        // earlier deadline must move the alarm, or this never fires.
        let (tx, rx) = mpsc::channel();
        let timer = arm(&service, hard, soon(3_600_000_000), reporter(tx));
        let moved = soon(200);
        assert!(timer.reschedule(moved));
        let (expiry, at, _) = rx.recv_timeout(HANG).unwrap();
        assert_eq!(expiry.deadline, moved);
        assert!(at >= moved);
        assert!(!timer.reschedule(soon(100)));
    }
}

#[test]
fn a_periodic_timer_keeps_its_phase_and_counts_the_periods_it_missed() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let first = soon(100);
    let period = Duration::from_micros(300);
    // The first callback holds the thread past four periods.
    let held_until = first + period * 4;
    let timer = service.hard_periodic(first, period, move |expiry| {
        if expiry.deadline == first {
            sleep_until(held_until);
        }
        let _ = tx.send(expiry);
    });
    let expiries: Vec<Expiry> = (0..5).map(|_| rx.recv_timeout(HANG).unwrap()).collect();
    assert!(timer.cancel());
    // Each expiry is on the series first + k * period, and the periods in
    // between were all either fired or counted as overruns.
    let mut next = first;
    for expiry in &expiries {
        assert_eq!(expiry.deadline, next);
        next = expiry.deadline + period * (expiry.overruns as u32 + 1);
    }
    // The second expiry was taken at `held_until` or later, and its
    // successor is due after that: first + (overruns + 2) periods of the
    // two is past first + 4 periods.
    let (a, b) = (expiries[0], expiries[1]);
    assert!(a.overruns + b.overruns >= 2, "{a:?} {b:?}");
}

#[test]
fn a_periodic_timer_whose_callback_panics_is_disarmed() {
    let service = TimerService::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let first = soon(100);
    let panicking = service.hard_periodic(first, Duration::from_millis(1), |_| {
        panic!("a periodic callback's panic")
    });
    // Hard timers fire in deadline order on one thread: when this one has
    // fired, the panic has been handled.
    service.hard_at(first + Duration::from_nanos(1), reporter(tx));
    rx.recv_timeout(HANG).unwrap();
    assert!(
        !panicking.cancel(),
        "still armed after its callback panicked"
    );
}

#[test]
fn callbacks_may_arm_timers_and_a_panic_loses_only_its_timer() {
    let service = Arc::new(TimerService::new().unwrap());
    let (tx, rx) = mpsc::channel();
    service.hard_at(soon(50), |_| panic!("a callback's panic"));
    let chained = Arc::clone(&service);
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
