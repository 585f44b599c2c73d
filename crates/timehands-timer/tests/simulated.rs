//! The service on simulated time: timers fire when the clock is moved past
//! them, in deadline order, hard ones at their deadline and soft ones within
//! their slack and a tick (those a round takes together earliest bound
//! first, those beyond it already last); periodic timers every period, or
//! once with their overruns after a jump; cancel, reschedule and arming
//! from callbacks; a panicking callback; sleepers on the simulated clock.
//! Nothing sleeps: every expected time is exact.

use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use timehands::Instant;
use timehands_timer::{Builder, Expiry, Simulation, Timer, TimerService};

/// What fired: the expiry, and the simulated time its callback saw.
type Log = Arc<Mutex<Vec<(&'static str, Expiry, Instant)>>>;

/// A callback that logs its timer's `name`, the expiry and the time.
fn logger(
    log: &Log,
    simulation: &Simulation,
    name: &'static str,
) -> impl FnMut(Expiry) + Send + use<> {
    let log = Arc::clone(log);
    let clock = simulation.clock();
    move |expiry| log.lock().unwrap().push((name, expiry, clock.now()))
}

fn taken(log: &Log) -> Vec<(&'static str, Expiry, Instant)> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One soft tick of the default builder, in ns.
const TICK_NS: u64 = 1 << 20;

/// The start of the soft tick `n` ticks after the simulation's present
/// one.
fn tick_boundary(simulation: &Simulation, n: u64) -> Instant {
    Instant::from_nanos((simulation.now().as_nanos() / TICK_NS + n) * TICK_NS)
}

#[test]
fn timers_fire_when_time_reaches_them_in_deadline_order() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let log = Log::default();
    let start = simulation.now();
    let slack = ms(2);
    service.hard_at(start + ms(30), logger(&log, &simulation, "hard 30"));
    service.soft_at(start + ms(10), slack, logger(&log, &simulation, "soft 10"));
    service.hard_at(start + ms(20), logger(&log, &simulation, "hard 20"));
    service.soft_at(start + ms(25), slack, logger(&log, &simulation, "soft 25"));
    service.hard_at(start + ms(10), logger(&log, &simulation, "hard 10"));

    simulation.advance(ms(9));
    assert!(taken(&log).is_empty(), "fired before its deadline");
    simulation.advance(ms(100));
    let fired = taken(&log);
    let names: Vec<&str> = fired.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(
        names,
        ["hard 10", "soft 10", "hard 20", "soft 25", "hard 30"]
    );
    let tick = Duration::from_nanos(TICK_NS);
    for (name, expiry, at) in &fired {
        assert_eq!(expiry.overruns, 0);
        if name.starts_with("hard") {
            assert_eq!(*at, expiry.deadline, "{name}");
        } else {
            assert!(
                expiry.deadline <= *at && *at <= expiry.deadline + slack + tick,
                "{name} due {:?} fired at {at:?}",
                expiry.deadline
            );
        }
    }
    assert_eq!(simulation.now(), start + ms(109));
    assert_eq!(service.hard_lateness().len(), 3);
    assert_eq!(service.hard_lateness().max(), 0);
    assert_eq!(service.soft_lateness().len(), 2);
    simulation.advance(ms(1000));
    assert!(taken(&log).is_empty(), "fired twice");
}

#[test]
fn many_timers_fire_once_each_in_the_order_of_their_times() {
    // Rounds of one step and 1 µs soft ticks: the wheel cascades over three
    // levels, one move per round.
    for builder in [Builder::new(), Builder::new().batch(1).soft_tick_shift(10)] {
        let (service, simulation) = builder.simulated().unwrap();
        let log = Log::default();
        let start = simulation.now();
        let mut seed = 1u64;
        let mut armed = Vec::new();
        for id in 0..2000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let deadline = start + Duration::from_micros((seed >> 33) % 5000);
            let hard = id % 4 == 0;
            let name = if hard { "hard" } else { "soft" };
            let timer = if hard {
                service.hard_at(deadline, logger(&log, &simulation, name))
            } else {
                let slack = Duration::from_micros((seed >> 20) % 300);
                service.soft_at(deadline, slack, logger(&log, &simulation, name))
            };
            if id % 3 == 0 {
                assert!(timer.cancel());
            } else {
                armed.push(deadline);
            }
        }
        simulation.advance(ms(10));
        let fired = taken(&log);
        assert_eq!(fired.len(), armed.len());
        for pair in fired.windows(2) {
            assert!(pair[0].2 <= pair[1].2, "{:?} before {:?}", pair[0], pair[1]);
        }
        let mut deadlines: Vec<Instant> = fired.iter().map(|(_, e, _)| e.deadline).collect();
        deadlines.sort_unstable();
        armed.sort_unstable();
        assert_eq!(deadlines, armed, "each armed timer fires once");
        for (name, expiry, at) in &fired {
            assert!(*at >= expiry.deadline);
            if *name == "hard" {
                assert_eq!(*at, expiry.deadline);
            }
        }
    }
}

#[test]
fn a_periodic_timer_fires_every_period_and_after_a_jump_counts_what_it_missed() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let log = Log::default();
    let period = ms(3);
    for hard in [true, false] {
        let name = if hard { "hard" } else { "soft" };
        let start = simulation.now();
        let first = start + ms(1);
        let timer = if hard {
            service.hard_periodic(first, period, logger(&log, &simulation, name))
        } else {
            service.soft_periodic(
                first,
                period,
                Duration::ZERO,
                logger(&log, &simulation, name),
            )
        }
        .unwrap();
        // Four periods' expiries, each on the series first + k * period (a
        // soft one fires at the wheel's tick after it: one more tick).
        let tick = if hard {
            Duration::ZERO
        } else {
            Duration::from_nanos(TICK_NS)
        };
        simulation.advance(ms(10) + tick);
        let expiries: Vec<Expiry> = taken(&log).into_iter().map(|(_, e, _)| e).collect();
        let expected: Vec<Expiry> = (0..4)
            .map(|k| Expiry {
                deadline: first + period * k,
                overruns: 0,
            })
            .collect();
        assert_eq!(expiries, expected, "{name}");
        // Held up for 10 ms, past 13, 16 and 19 ms: it fires once, for 13 ms,
        // with two overruns, and keeps its phase (next at 22 ms).
        simulation.jump(ms(10));
        simulation.advance(ms(3));
        let expiries: Vec<Expiry> = taken(&log).into_iter().map(|(_, e, _)| e).collect();
        assert_eq!(
            expiries,
            [
                Expiry {
                    deadline: first + period * 4,
                    overruns: 2
                },
                Expiry {
                    deadline: first + period * 7,
                    overruns: 0
                },
            ],
            "{name}"
        );
        assert!(timer.cancel());
    }
}

#[test]
fn callbacks_may_cancel_or_reschedule_their_own_timers() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let (tx, rx) = mpsc::channel();
    let later = simulation.now() + Duration::from_secs(3600);
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
            service
                .hard_periodic(later, Duration::from_micros(100), callback)
                .unwrap()
        } else {
            service.hard_at(later, callback)
        };
        assert!(own.set(timer.clone()).is_ok());
        assert!(timer.reschedule(simulation.now() + ms(1)));
    }
    simulation.advance(ms(1));
    // A periodic timer is armed while its callback runs: it may move and
    // cancel itself. A one-shot one has fired: it can do neither.
    let mut seen: Vec<_> = rx.try_iter().collect();
    seen.sort_unstable();
    assert_eq!(seen, [(false, false, false), (true, true, true)]);
    simulation.advance(Duration::from_secs(7200));
    assert!(
        rx.try_recv().is_err(),
        "the periodic timer fired after cancelling itself"
    );
}

#[test]
fn reschedule_moves_a_timer_and_fails_after_it_fired() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let log = Log::default();
    for (hard, name) in [(true, "hard"), (false, "soft")] {
        let start = simulation.now();
        let timer = if hard {
            service.hard_at(start + ms(50), logger(&log, &simulation, name))
        } else {
            service.soft_at(
                start + ms(50),
                Duration::ZERO,
                logger(&log, &simulation, name),
            )
        };
        assert!(timer.reschedule(start + ms(5)));
        simulation.advance(ms(10));
        let fired = taken(&log);
        assert_eq!(fired.len(), 1, "{name}");
        assert_eq!(fired[0].1.deadline, start + ms(5), "{name}");
        assert!(!timer.reschedule(start + ms(20)), "{name}");
        assert!(!timer.cancel(), "{name}");
    }
}

#[test]
fn timers_armed_by_callbacks_fire_in_the_same_advance_and_a_panic_loses_only_its_timer() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let service = Arc::new(service);
    let log = Log::default();
    let start = simulation.now();
    service.hard_at(start + ms(1), |_| panic!("a callback's panic"));
    let panicking = service
        .hard_periodic(start + ms(1), ms(1), |_| {
            panic!("a periodic callback's panic")
        })
        .unwrap();
    let chained = Arc::clone(&service);
    let chained_log = logger(&log, &simulation, "armed by a callback");
    let mut chained_log = Some(chained_log);
    service.soft_at(start + ms(2), Duration::ZERO, move |expiry| {
        if let Some(callback) = chained_log.take() {
            // Due already: it fires before the advance returns.
            chained.hard_at(expiry.deadline, callback);
        }
    });
    simulation.advance(ms(5));
    let fired = taken(&log);
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].1.deadline, start + ms(2));
    assert!(
        !panicking.cancel(),
        "still armed after its callback panicked"
    );
    assert_eq!(service.hard_lateness().len(), 3);
    assert_eq!(service.soft_lateness().len(), 1);
}

#[test]
#[cfg_attr(
    target_os = "wasi",
    ignore = "spawns threads, which wasm32-wasip1 has not"
)]
fn sleepers_on_the_simulated_clock_wake_when_it_reaches_their_deadline() {
    let (_service, simulation) = TimerService::simulated().unwrap();
    let deadline = simulation.now() + ms(10);
    let (tx, rx) = mpsc::channel();
    let sleepers: Vec<_> = (0..3)
        .map(|_| {
            let simulation = simulation.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                simulation.sleep_until(deadline);
                let _ = tx.send(simulation.now());
            })
        })
        .collect();
    simulation.advance(ms(9));
    assert!(rx.try_recv().is_err(), "a sleeper woke before its deadline");
    simulation.advance(ms(1));
    for sleeper in sleepers {
        sleeper.join().unwrap();
    }
    let woke: Vec<Instant> = rx.try_iter().collect();
    assert_eq!(woke, [deadline; 3]);
    // A deadline that has passed returns at once.
    simulation.sleep_until(deadline);
}

#[test]
fn a_dropped_service_fires_nothing_and_time_still_moves() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let log = Log::default();
    let start = simulation.now();
    service.hard_at(start + ms(1), logger(&log, &simulation, "hard"));
    service.soft_at(
        start + ms(1),
        Duration::ZERO,
        logger(&log, &simulation, "soft"),
    );
    drop(service);
    simulation.advance(ms(5));
    assert!(taken(&log).is_empty());
    assert_eq!(simulation.now(), start + ms(5));
}

/// Runs `f` on a thread of its own; fails (instead of hanging) if it has
/// not returned after a generous wait.
fn within_a_minute(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("returned (a panic or a hang fails here)");
}

#[test]
#[cfg_attr(
    target_os = "wasi",
    ignore = "spawns threads, which wasm32-wasip1 has not"
)]
fn advance_and_jump_by_any_duration_or_to_the_end_of_time_neither_panic_nor_hang() {
    type Move = fn(&Simulation);
    // `advance` fires a periodic timer every period, so its periods here are
    // long enough to count on the way to the end of time (2^60 ns, some 36
    // years); a jump fires it once, however short.
    let long = Duration::from_nanos(1 << 60);
    let moves: [(&str, Move, Duration); 4] = [
        ("advance(MAX)", |s| s.advance(Duration::MAX), long),
        ("jump(MAX)", |s| s.jump(Duration::MAX), ms(1)),
        (
            "advance_to(end)",
            |s| s.advance_to(Instant::from_nanos(u64::MAX)),
            long,
        ),
        (
            "jump_to(end)",
            |s| s.jump_to(Instant::from_nanos(u64::MAX)),
            ms(1),
        ),
    ];
    for (name, move_to_the_end, period) in moves {
        within_a_minute(move || {
            let (service, simulation) = TimerService::simulated().unwrap();
            let log = Log::default();
            let start = simulation.now();
            let hard = service
                .hard_periodic(start, period, logger(&log, &simulation, "hard"))
                .unwrap();
            let soft = service
                .soft_periodic(start, period, ms(1), logger(&log, &simulation, "soft"))
                .unwrap();
            service.hard_at(start + ms(1), logger(&log, &simulation, "one-shot"));
            move_to_the_end(&simulation);
            assert_eq!(simulation.now(), Instant::from_nanos(u64::MAX), "{name}");
            // All fired, and the periodic series ended at the end of time.
            let fired = taken(&log);
            for timer in ["hard", "soft", "one-shot"] {
                assert!(fired.iter().any(|(n, _, _)| *n == timer), "{name}: {timer}");
            }
            assert!(!hard.cancel() && !soft.cancel(), "{name}: still armed");
            // Time cannot move on; moving it is no error.
            move_to_the_end(&simulation);
            simulation.advance(ms(1));
            simulation.jump(ms(1));
            assert!(taken(&log).is_empty(), "{name}");
        });
    }
}

#[test]
fn a_zero_period_is_refused_with_an_error_that_names_it() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let hard = service.hard_periodic(simulation.now(), Duration::ZERO, |_| {});
    let soft = service.soft_periodic(simulation.now(), Duration::ZERO, ms(1), |_| {});
    for (refused, method) in [(hard, "hard_periodic"), (soft, "soft_periodic")] {
        let error = refused.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(
            error.to_string(),
            format!("{method}: a period of 0 ns: a periodic timer needs at least 1 ns")
        );
    }
    assert!(
        service
            .hard_periodic(simulation.now(), Duration::from_nanos(1), |_| {})
            .is_ok()
    );
}

#[test]
fn a_timer_armed_or_rescheduled_in_the_past_is_late_from_then() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let start = simulation.now();
    simulation.advance(Duration::from_secs(3600));
    service.hard_at(start, |_| {});
    let moved = service.hard_at(simulation.now() + ms(5), |_| {});
    assert!(moved.reschedule(start + ms(1)));
    service.soft_at(start, Duration::ZERO, |_| {});
    simulation.advance(ms(1));
    let hard = service.hard_lateness();
    assert_eq!((hard.len(), hard.max()), (2, 0));
    // A soft timer comes out at the wheel's next tick after it was armed.
    let soft = service.soft_lateness();
    assert_eq!(soft.len(), 1);
    assert!(soft.max() <= TICK_NS, "late by {} ns", soft.max());
    assert_eq!(service.statistics().soft.beyond_bound, 0);
}

#[test]
fn soft_timers_that_share_a_tick_fire_earliest_bound_first() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let log = Log::default();
    let boundary = tick_boundary(&simulation, 10);
    let us = Duration::from_micros;
    // No tick boundary in the first half of any of their slacks: all three
    // are filed under `boundary`. Bounds: "a" boundary - 900 µs, "b"
    // boundary - 100 µs, "c" boundary + 100 µs (each plus a tick), so
    // deadline order ("a", "c", "b") and the order armed ("c", "b", "a")
    // both differ from theirs.
    service.soft_at(boundary - us(500), us(600), logger(&log, &simulation, "c"));
    service.soft_at(
        boundary - us(100),
        Duration::ZERO,
        logger(&log, &simulation, "b"),
    );
    service.soft_at(
        boundary - us(900),
        Duration::ZERO,
        logger(&log, &simulation, "a"),
    );
    simulation.advance_to(boundary);
    let fired = taken(&log);
    let names: Vec<&str> = fired.iter().map(|(name, _, _)| *name).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(fired.iter().all(|(_, _, at)| *at == boundary), "{fired:?}");
}

#[test]
fn soft_timers_with_one_bound_fire_in_the_order_armed() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let boundary = tick_boundary(&simulation, 10);
    let arm = |id, deadline| {
        let order = Arc::clone(&order);
        service.soft_at(deadline, Duration::ZERO, move |_| {
            order.lock().unwrap().push(id)
        });
    };
    // 200 timers with one bound, then one with an earlier bound, all filed
    // under `boundary`: one round takes them all and puts the last first.
    for id in 1..=200 {
        arm(id, boundary - Duration::from_micros(100));
    }
    arm(0, boundary - Duration::from_micros(900));
    simulation.advance_to(boundary);
    assert_eq!(*order.lock().unwrap(), (0..=200).collect::<Vec<_>>());
}

#[test]
fn soft_timers_beyond_their_bound_already_fire_after_those_within() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let log = Log::default();
    let now = tick_boundary(&simulation, 20);
    // All four are due by `now`, filed under ticks in the order "beyond 2"
    // (now - 6 or 7 ticks), "beyond 1" (now - 3 ticks), "within 2" (now - 2
    // ticks), "within 1" (now), the reverse of their bounds' in each pair.
    // Bounds (deadline + slack + a tick): "beyond 1" now - 2.95 ms,
    // "beyond 2" now - 1.95 ms, "within 1" now + 1.05 ms, "within 2" now +
    // 2.05 ms.
    service.soft_at(now - ms(1), ms(1), logger(&log, &simulation, "within 1"));
    service.soft_at(now - ms(8), ms(5), logger(&log, &simulation, "beyond 2"));
    service.soft_at(now - ms(3), ms(4), logger(&log, &simulation, "within 2"));
    service.soft_at(
        now - ms(4),
        Duration::ZERO,
        logger(&log, &simulation, "beyond 1"),
    );
    // As if the soft workers had been held up until `now`: one round takes
    // all four.
    simulation.jump_to(now);
    let names: Vec<&str> = taken(&log).iter().map(|(name, _, _)| *name).collect();
    assert_eq!(names, ["within 1", "within 2", "beyond 1", "beyond 2"]);
    assert_eq!(service.statistics().soft.beyond_bound, 2);
}

#[test]
fn soft_timers_fired_beyond_their_bound_are_counted() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let start = simulation.now();
    // Bound: deadline + 1 ms of slack + one tick of 2^20 ns.
    service.soft_at(start + ms(1), ms(1), |_| {});
    service.soft_at(start + ms(20), ms(1), |_| {});
    simulation.advance(ms(5));
    // As if the soft workers had been held up past the second's bound.
    simulation.jump(ms(30));
    let statistics = service.statistics();
    assert_eq!(statistics.soft.fired, 2);
    assert_eq!(statistics.soft.beyond_bound, 1);
    assert_eq!(statistics.hard, Default::default());
}

#[test]
fn panicking_callbacks_are_counted_with_their_message() {
    let (service, simulation) = TimerService::simulated().unwrap();
    let start = simulation.now();
    service.hard_at(start + ms(1), |_| panic!("first"));
    let code = 7;
    service.soft_at(start + ms(2), Duration::ZERO, move |_| {
        panic!("soft, code {code}")
    });
    service.hard_at(start + ms(3), |_| std::panic::panic_any(42));
    simulation.advance(ms(1));
    assert_eq!(
        service.statistics().hard.last_panic.as_deref(),
        Some("first")
    );
    simulation.advance(ms(5));
    let statistics = service.statistics();
    assert_eq!((statistics.hard.fired, statistics.hard.panics), (2, 2));
    assert_eq!(
        statistics.hard.last_panic.as_deref(),
        Some("a panic with a payload that is not a string")
    );
    assert_eq!(statistics.soft.panics, 1);
    assert_eq!(statistics.soft.last_panic.as_deref(), Some("soft, code 7"));
}
