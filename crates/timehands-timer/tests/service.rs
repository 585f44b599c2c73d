//! The threaded service, on real time: timers fire once, on the right side,
//! not before their deadline, hard ones even while the soft thread is stuck,
//! thousands of them armed and cancelled while others fire; cancel before,
//! during and after expiry; reschedule moves a sleeping thread's alarm; a
//! timer armed by a callback on the other side's thread; a panicking callback
//! and a callback that drops the service; the hard thread's scheduling;
//! `sleep_until` returns not before its deadline; a periodic soft timer on
//! two workers never runs twice at once nor loses an expiry; threads that
//! arm, reschedule and cancel hard timers at once, racing their expiries,
//! get answers the expiries agree with. No timing thresholds: the
//! generous `recv_timeout`s only turn a hang into a failure, and "during
//! expiry" is made by holding the expiry thread in a callback. What needs no
//! thread (deadline order, periodic timers and overruns, callbacks that
//! cancel or reschedule their own timers) is tested on simulated time, in
//! tests/simulated.rs.
// wasm32-wasip1 has no threads: there the service is refused (a unit test in
// src/service.rs checks the refusal's message).
#![cfg(not(target_os = "wasi"))]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
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

/// What one caller did to one hard timer: the deadline it last set, and
/// whether its cancel said the callback would not run.
struct Fate {
    deadline: Instant,
    cancelled: bool,
}

#[test]
fn threads_arming_rescheduling_and_cancelling_timers_get_answers_the_expiries_agree_with() {
    // Requests reach each side through a lock-free stack and are applied by
    // whoever holds the side's lock (hard callers, the hard thread, the soft
    // workers); a cancel and a reschedule decide at once, racing the expiry
    // (see the crate's `control`).
    for hard in [true, false] {
        arm_reschedule_and_cancel_from_threads(hard);
    }
}

/// Four threads arm, reschedule and cancel timers on one side at random;
/// each timer fires once, for the deadline its last reschedule set, unless
/// its cancel said it would not.
fn arm_reschedule_and_cancel_from_threads(hard: bool) {
    const THREADS: u64 = 4;
    const EACH: u64 = 5_000;
    let service = Arc::new(TimerService::new().unwrap());
    let (tx, rx) = mpsc::channel();
    let callers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (service, tx) = (Arc::clone(&service), tx.clone());
            std::thread::spawn(move || {
                let mut seed = thread + 1;
                let mut random = move |below: u64| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 33) % below
                };
                let mut fates = Vec::new();
                for n in 0..EACH {
                    let id = thread * EACH + n;
                    let tx = tx.clone();
                    let mut deadline = soon(random(2000));
                    let timer = arm(&service, hard, deadline, move |expiry| {
                        let _ = tx.send((id, expiry.deadline, timehands::now()));
                    });
                    if random(2) == 0 {
                        let moved = soon(random(2000));
                        if timer.reschedule(moved) {
                            deadline = moved;
                        }
                    }
                    let cancelled = random(3) == 0 && timer.cancel();
                    fates.push(Fate {
                        deadline,
                        cancelled,
                    });
                }
                fates
            })
        })
        .collect();
    drop(tx);
    let fates: Vec<Fate> = callers
        .into_iter()
        .flat_map(|caller| caller.join().unwrap())
        .collect();
    let expected = fates.iter().filter(|fate| !fate.cancelled).count();
    let mut fired = vec![false; fates.len()];
    for _ in 0..expected {
        let (id, deadline, at) = rx.recv_timeout(HANG).unwrap();
        let fate = &fates[id as usize];
        assert!(!fate.cancelled, "timer {id} fired after its cancel said no");
        assert!(!fired[id as usize], "timer {id} fired twice");
        fired[id as usize] = true;
        assert_eq!(
            deadline, fate.deadline,
            "timer {id} fired for another deadline"
        );
        assert!(
            at >= deadline,
            "timer {id} due {deadline:?} fired at {at:?}"
        );
    }
    drop(Arc::into_inner(service).expect("the callers are gone"));
    assert!(
        rx.recv().is_err(),
        "a timer fired twice or after its cancel"
    );
}

#[test]
fn a_hard_timer_fires_while_the_soft_thread_is_held_in_a_callback() {
    // One soft worker, so that holding it holds every soft timer (with two,
    // the other may fire the soft one before the hard one is due).
    let service = Builder::new().soft_workers(1).build().unwrap();
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
    // One soft worker: held, it holds the whole soft side.
    let service = Builder::new().soft_workers(1).build().unwrap();
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
    // process's rights and the OS's policies; either way it is said.
    match TimerService::new().unwrap().scheduling() {
        Scheduling::Fifo { priority } => assert_eq!(*priority, 50),
        // timehands' refusals name the policy, whatever the OS.
        Scheduling::Normal { reason } => assert!(reason.contains("SCHED_FIFO"), "{reason}"),
    }
}

/// The nice value of the soft worker that runs a soft timer's callback.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn soft_workers_nice(service: &TimerService) -> i32 {
    let (tx, rx) = mpsc::channel();
    service.soft_at(soon(0), Duration::ZERO, move |_| {
        // SAFETY: gettid and getpriority take no pointers.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let _ = tx.send(nice);
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the soft timer fires")
}

/// The soft workers run niced (10) beside a hard thread that has no
/// real-time priority, so that the fair scheduler favours it, and at the
/// process's nice value beside a SCHED_FIFO one, which needs no favour:
/// niced, they lost the CPU ten to one to every other thread.
#[test]
#[cfg(any(target_os = "linux", target_os = "android"))]
fn the_soft_workers_are_niced_only_beside_a_hard_thread_without_real_time_priority() {
    // SAFETY: as above.
    let process = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
    // Niced means 10, or the process's own where that is higher and the
    // process may not lower it (`nice -n 15 cargo test`, unprivileged).
    let niced = |nice: i32| nice == 10 || (nice == process && process > 10);
    let normal = Builder::new().realtime_priority(None).build().unwrap();
    let nice = soft_workers_nice(&normal);
    assert!(niced(nice), "nice {nice} beside a normal hard thread");
    let fifo = TimerService::new().unwrap();
    match fifo.scheduling() {
        Scheduling::Fifo { .. } => assert_eq!(soft_workers_nice(&fifo), process),
        Scheduling::Normal { reason } => {
            let nice = soft_workers_nice(&fifo);
            assert!(niced(nice), "nice {nice} beside a refused hard thread");
            println!("SCHED_FIFO refused here ({reason}): only the niced case was seen");
        }
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

#[test]
fn a_periodic_soft_callback_never_runs_on_two_workers_at_once_nor_loses_an_expiry() {
    // Soft ticks of 1 µs, so that expiries come due while the callback
    // runs, and the other worker is free to take them.
    let service = Builder::new()
        .soft_workers(2)
        .soft_tick_shift(10)
        .build()
        .unwrap();
    let period = Duration::from_micros(100);
    let running = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = Arc::clone(&running);
    let timer = service
        .soft_periodic(soon(0), period, Duration::ZERO, move |expiry| {
            let overlapped = flag.swap(true, Ordering::SeqCst);
            sleep_until(timehands::now() + period * 3);
            flag.store(false, Ordering::SeqCst);
            let _ = tx.send((overlapped, expiry));
        })
        .unwrap();
    let runs: Vec<(bool, Expiry)> = (0..20).map(|_| rx.recv_timeout(HANG).unwrap()).collect();
    assert!(timer.cancel());
    assert!(runs.iter().all(|(overlapped, _)| !overlapped), "{runs:?}");
    // Each run's next is the first expiry after those it skipped: every
    // expiry of the series is run or counted.
    for pair in runs.windows(2) {
        let ((_, a), (_, b)) = (pair[0], pair[1]);
        let periods = u32::try_from(a.overruns + 1).unwrap();
        assert_eq!(
            b.deadline - a.deadline,
            period * periods,
            "{a:?} then {b:?}"
        );
    }
}

#[test]
fn a_soft_timer_due_behind_a_slow_callback_counts_behind_callbacks() {
    // One worker: a callback arms a timer due at once, then holds the
    // worker well past that timer's bound (deadline + one tick).
    let service = Builder::new().soft_workers(1).build().unwrap();
    let service = Arc::new(service);
    let (tx, rx) = mpsc::channel();
    let inner = Arc::clone(&service);
    service.soft_at(soon(0), Duration::ZERO, move |_| {
        let tx = tx.clone();
        inner.soft_at(timehands::now(), Duration::ZERO, move |_| {
            let _ = tx.send(());
        });
        sleep_until(timehands::now() + Duration::from_millis(20));
    });
    rx.recv_timeout(HANG).unwrap();
    // The inner timer is behind the callback; the outer one may be beyond
    // its bound too on a busy machine (a worker late to its first
    // deadline), and then stalled: every miss has one cause.
    let soft = service.statistics().soft;
    assert!(soft.beyond_bound_behind_callbacks >= 1, "{soft:?}");
    assert_eq!(
        soft.beyond_bound,
        soft.beyond_bound_behind_callbacks + soft.beyond_bound_stalled,
        "{soft:?}"
    );
}
