//! The sides' unit tests: callers that never wait for a side's lock, a
//! stopped side, a pile of soft requests behind a due timer, and a soft
//! expiry that comes due while its callback runs on another worker.

use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use timehands::{Clock, Instant};

use super::*;
use crate::expiry::{Expiry, Round};
use crate::service::Shared;

/// A one-shot timer due at `deadline`, doing nothing.
fn idle(deadline: u64) -> Armed {
    Armed {
        deadline,
        slack: 0,
        period: None,
        callback: Box::new(|_| {}),
    }
}

/// Arming, cancelling and rescheduling timers take no lock their side
/// takes: they all complete while another thread holds it, so a caller
/// preempted at any point holds nothing an expiry thread could wait for.
/// (Before, each took that lock: this hung, and on the soft side a thread
/// arming 100 000 timers held it for some 20 ms.)
#[test]
fn timers_are_armed_cancelled_and_rescheduled_while_their_sides_lock_is_held() {
    fn on<Q: Queue + 'static>(shared: &Arc<Shared>, side: fn(&Shared) -> &Side<Q>) {
        let held = side(shared).state.lock();
        let (done, finished) = mpsc::channel();
        let caller = {
            let shared = Arc::clone(shared);
            std::thread::spawn(move || {
                let side = side(&shared);
                let deadline = timehands::now().as_nanos() + 1_000_000;
                let one_shot = side.arm(idle(deadline));
                let periodic = side.arm(Armed {
                    period: Some(1_000),
                    ..idle(deadline)
                });
                let moved = side.reschedule(&periodic, 5);
                let cancelled = side.cancel(&one_shot);
                let _ = done.send((moved, cancelled, side.cancel(&one_shot)));
            })
        };
        let answers = finished.recv_timeout(Duration::from_secs(60));
        drop(held);
        caller.join().unwrap();
        assert_eq!(answers, Ok((true, true, false)));
        // The requests wait for an expiry thread (here: this one): the
        // periodic timer, moved to 5 ns, is due (the wheel's first tick
        // after it); the one-shot is gone.
        let grace = side(shared).state.lock().queue.grace().unwrap_or(0);
        assert!(side(shared).next_deadline() <= Some(5 + grace));
        assert_eq!(side(shared).armed(), 1);
    }
    let shared = crate::Builder::new().shared(Clock::new(), false).unwrap();
    on(&shared, |shared| &shared.hard);
    on(&shared, |shared| &shared.soft);
}

/// Once the service has stopped (it is being dropped), nobody applies
/// requests: a timer armed then is cancelled at once, and a reschedule
/// says it moved nothing.
#[test]
fn after_the_service_stops_a_timer_is_neither_armed_nor_moved() {
    fn on<Q: Queue>(side: &Side<Q>) {
        let before = side.arm(idle(u64::MAX));
        side.stop();
        assert_eq!(side.clear().len(), 1, "the armed timer's callback");
        assert!(!side.reschedule(&before, 5));
        let after = side.arm(idle(u64::MAX));
        assert!(!side.cancel(&after), "cancelled when it was refused");
        assert_eq!(side.next_deadline(), None);
    }
    let shared = crate::Builder::new().shared(Clock::new(), false).unwrap();
    on(&shared.hard);
    on(&shared.soft);
}

/// A thread arms 100 000 soft timers just before one comes due: the first
/// round a tick after its deadline (its bound, with no slack) fires it,
/// having applied none of the pile (the workers apply requests in rounds
/// that find no timer due), and the pile goes in, walked [`WALK_BATCH`]
/// nodes a round, then applied a batch a round (see `walk_the_pile`).
#[test]
fn a_pile_of_soft_requests_delays_a_due_timer_by_one_round_at_most() {
    const PILE: usize = 100_000;
    let (clock, mock) = Clock::mock();
    let shared = crate::Builder::new().shared(clock, false).unwrap();
    let soft = &shared.soft;
    // A CPU to spare for another worker (see
    // `requests_wait_for_callbacks_a_tick_at_most_where_no_cpu_is_to_spare`
    // for none).
    soft.sharing.set_cpus(4);
    let tick = soft.state.lock().queue.tick_nanos();
    let due = mock.now().as_nanos() + 10 * tick;
    let (tx, fired) = mpsc::channel();
    soft.arm(Armed {
        callback: Box::new(move |expiry| tx.send(expiry.deadline).unwrap()),
        ..idle(due)
    });
    let mut rounds = Rounds::new();
    assert!(matches!(soft.round(&mut rounds), Round::Idle));
    let later = due + 3_600_000_000_000;
    for _ in 0..PILE {
        soft.arm(idle(later));
    }
    mock.set(Instant::from_nanos(due + tick));
    assert!(matches!(soft.round(&mut rounds), Round::Fired));
    assert_eq!(fired.try_recv(), Ok(Instant::from_nanos(due)));
    assert_eq!(soft.requests.pending(), PILE as u64, "none applied");
    assert_eq!(
        soft.state.lock().alarm_at,
        0,
        "the pile rings the alarm at once, for another worker"
    );
    let rounds_for_the_pile = walk_the_pile(soft, PILE, || {
        assert!(matches!(soft.round(&mut rounds), Round::More | Round::Idle));
    });
    assert_eq!(
        rounds_for_the_pile,
        PILE.div_ceil(WALK_BATCH) + PILE.div_ceil(soft.batch) - 1,
        "the round that walks the chain's last nodes applies a batch too"
    );
    assert_eq!(soft.armed(), PILE);
}

/// Runs `round` until the `pile` requests pending on `side` are applied,
/// asserting that, until the chain taken is walked whole, each round walks
/// [`WALK_BATCH`] nodes of it and applies none (the oldest requests are
/// walked last), so that the pile takes rounds to walk; how many rounds it
/// ran. (Before, the first round took the whole stack, and walked it at
/// once.)
fn walk_the_pile<Q: Queue>(side: &Side<Q>, pile: usize, mut round: impl FnMut()) -> usize {
    assert!(pile > 2 * WALK_BATCH, "a pile of several batches");
    let walk = || {
        let state = side.state.lock();
        (state.walk.walked(), state.walk.is_whole())
    };
    let (mut rounds, mut walking_rounds) = (0, 0);
    while side.requests.pending() > 0 {
        let (before, _) = walk();
        round();
        rounds += 1;
        let (after, whole) = walk();
        if !whole {
            walking_rounds += 1;
            assert_eq!(after - before, WALK_BATCH, "round {rounds}");
            assert_eq!(side.requests.pending(), pile as u64, "none applied");
        }
    }
    assert_eq!(
        walking_rounds,
        pile.div_ceil(WALK_BATCH) - 1,
        "rounds that walked, and applied nothing"
    );
    rounds
}

/// 100 000 hard timers armed while the hard lock is held (their callers
/// leave the requests on the stack, as the lock is taken): the hard
/// thread's next round walks [`WALK_BATCH`] nodes of the chain it takes,
/// applies none (the oldest are walked last), and sets its alarm to come
/// back soon, to walk on, where before it walked all 100 000 at once.
#[test]
fn a_hard_round_walks_a_bounded_batch_of_a_pile_and_comes_back_soon() {
    use crate::hard::{BACKLOG_POLL_NS, IDLE_BATCH};
    const PILE: usize = 100_000;
    let (clock, mock) = Clock::mock();
    let shared = crate::Builder::new().shared(clock, false).unwrap();
    let hard = &shared.hard;
    let held = hard.state.lock();
    let caller = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            for _ in 0..PILE {
                shared.hard.arm(idle(u64::MAX));
            }
        })
    };
    caller.join().unwrap();
    drop(held);
    assert_eq!(hard.requests.pending(), PILE as u64, "none applied");
    let now = mock.now().as_nanos();
    let mut rounds = Rounds::new();
    let mut alarms = Vec::new();
    let rounds_for_the_pile = walk_the_pile(hard, PILE, || {
        assert!(matches!(hard.round(&mut rounds), Round::Idle));
        alarms.push(hard.state.lock().alarm_at);
    });
    assert_eq!(
        rounds_for_the_pile,
        PILE.div_ceil(WALK_BATCH) + PILE.div_ceil(IDLE_BATCH) - 1
    );
    let (last, back_soon) = alarms.split_last().unwrap();
    assert!(
        back_soon.iter().all(|&at| at <= now + BACKLOG_POLL_NS),
        "asleep with requests taken: {back_soon:?}"
    );
    assert_eq!(*last, u64::MAX, "nothing due and nothing left");
    assert_eq!(hard.armed(), PILE);
}

/// Hard callers keep off the hard lock from a little before the deadline
/// the hard thread sleeps for until its round begins (or a while after the
/// deadline, should it not come), so that the thread, woken for its timer,
/// finds the lock free rather than waits for a caller's batch: through a
/// priority-inheriting lock, a sleep in the kernel and a wakeup. Outside
/// that window they apply requests as before, and a thread that sleeps
/// only to come back for requests keeps nobody off.
#[test]
fn hard_callers_keep_off_the_lock_while_a_hard_timer_comes_due() {
    let (clock, mock) = Clock::mock();
    let shared = crate::Builder::new().shared(clock, false).unwrap();
    let hard = &shared.hard;
    let due = mock.now().as_nanos() + 1_000_000;
    let mut rounds = Rounds::new();
    // Whether a caller that arms a timer now applies the pending requests.
    let applies = || {
        hard.arm(idle(u64::MAX));
        hard.requests.pending() == 0
    };
    assert!(applies(), "nothing sleeps yet");
    hard.arm(idle(due));
    assert!(matches!(hard.round(&mut rounds), Round::Idle));
    assert_eq!(hard.state.lock().alarm_at, due, "asleep for the timer");
    let at = |ns: u64| mock.set(Instant::from_nanos(ns));
    at(due - KEEP_OFF_BEFORE_NS - 1);
    assert!(applies(), "before the window");
    at(due - KEEP_OFF_BEFORE_NS);
    assert!(!applies(), "in the window, before the deadline");
    at(due + KEEP_OFF_AFTER_NS);
    assert!(!applies(), "in the window, after the deadline");
    at(due + KEEP_OFF_AFTER_NS + 1);
    assert!(applies(), "past the window: the hard thread did not come");
    at(due);
    assert!(!applies(), "in the window again");
    assert!(matches!(hard.round(&mut rounds), Round::Fired));
    assert!(applies(), "the round has begun");
}

/// Two soft workers: while one runs a periodic timer's callback, the timer
/// is rescheduled, and the other worker applies that and takes the new
/// expiry, which is busy (the callback is out); it fires, for its new
/// deadline, once the callback is back, and never on two workers at once.
/// (Taken as stale, the expiry would be lost, and the timer with it.)
#[test]
fn a_soft_expiry_due_while_its_callback_runs_on_another_worker_waits_for_it() {
    let (clock, mock) = Clock::mock();
    let shared = crate::Builder::new().shared(clock, false).unwrap();
    // A CPU to spare: the other worker applies the reschedule at once.
    shared.soft.sharing.set_cpus(4);
    let start = mock.now().as_nanos();
    // Past by the time it is applied (the clock is a tick on): due at once.
    let moved_to = start + 1;
    let control: Arc<OnceLock<Arc<TimerControl>>> = Arc::new(OnceLock::new());
    let runs = Arc::new(Mutex::new(Vec::new()));
    let callback = {
        let (shared, control, runs) =
            (Arc::clone(&shared), Arc::clone(&control), Arc::clone(&runs));
        move |expiry: Expiry| {
            let first = runs.lock().unwrap().is_empty();
            runs.lock()
                .unwrap()
                .push((expiry.deadline.as_nanos(), None));
            if first {
                // Worker A runs this; worker B takes the moved expiry.
                let soft = &shared.soft;
                assert!(soft.reschedule(control.get().unwrap(), moved_to));
                let other = soft.round(&mut Rounds::new());
                let busy = soft.state.lock().busy.len();
                runs.lock().unwrap()[0].1 = Some(matches!(other, Round::Idle) && busy == 1);
            }
        }
    };
    let armed = shared.soft.arm(Armed {
        period: Some(1_000_000_000),
        callback: Box::new(callback),
        ..idle(start)
    });
    control.set(Arc::clone(&armed)).ok().unwrap();
    let tick = shared.soft.state.lock().queue.tick_nanos();
    mock.set(Instant::from_nanos(start + tick));
    let mut worker_a = Rounds::new();
    assert!(matches!(shared.soft.round(&mut worker_a), Round::Fired));
    assert!(matches!(shared.soft.round(&mut worker_a), Round::Fired));
    assert_eq!(
        *runs.lock().unwrap(),
        [(start, Some(true)), (moved_to, None)],
        "the other worker fired nothing, the moved expiry waiting out of the queue; it ran after the first"
    );
    // The callback holds the service: the test lets it go.
    assert!(shared.soft.cancel(&armed));
}

/// Requests pushed while a worker runs callbacks: on two CPUs (the
/// callbacks' and the caller's) another worker leaves them until a tick
/// has passed since the last batch, then applies them; on four it applies
/// them at once. (A worker applying requests alongside the callbacks on
/// their CPU held the timers waiting in the batch up for its turns.)
#[test]
fn requests_wait_for_callbacks_a_tick_at_most_where_no_cpu_is_to_spare() {
    for (cpus, pending_at_once) in [(2, 10), (4, 0)] {
        let (clock, mock) = Clock::mock();
        let shared = crate::Builder::new().shared(clock, false).unwrap();
        let soft = &shared.soft;
        soft.sharing.set_cpus(cpus);
        let tick = soft.state.lock().queue.tick_nanos();
        let start = mock.now().as_nanos();
        let pending = Arc::new(Mutex::new(Vec::new()));
        let callback = {
            let (shared, pending, mock) = (Arc::clone(&shared), Arc::clone(&pending), mock.clone());
            move |_: Expiry| {
                // Worker A runs this: requests come, and worker B looks,
                // at once and a tick on.
                let soft = &shared.soft;
                for _ in 0..10 {
                    soft.arm(idle(u64::MAX));
                }
                let mut worker_b = Rounds::new();
                soft.round(&mut worker_b);
                pending.lock().unwrap().push(soft.requests.pending());
                // Callers are told not to ring while requests wait, and
                // of the alarm again once none does.
                let told = soft.requests.alarm_at();
                assert_eq!(told == 0, pending_at_once > 0, "{told}");
                mock.advance(Duration::from_nanos(tick));
                soft.round(&mut worker_b);
                // (A failed assertion here is a panic the record catches:
                // the pending count after it is then missing.)
                assert_eq!(soft.requests.alarm_at(), soft.state.lock().alarm_at);
                pending.lock().unwrap().push(soft.requests.pending());
            }
        };
        let armed = soft.arm(Armed {
            callback: Box::new(callback),
            ..idle(start)
        });
        mock.set(Instant::from_nanos(start + tick));
        assert!(matches!(soft.round(&mut Rounds::new()), Round::Fired));
        assert_eq!(
            *pending.lock().unwrap(),
            [pending_at_once, 0],
            "{cpus} CPUs"
        );
        // The callback holds the service: the test lets it go.
        soft.cancel(&armed);
    }
}

/// With no worker keeping up, soft callers past [`SOFT_BACKLOG`] requests
/// walk and apply some themselves, a batch a request: the requests
/// waiting, and their memory, stay bounded (a push for each batch walked
/// of the chain taken at the backlog, before any of it is applied).
#[test]
fn past_the_soft_backlog_callers_apply_requests_themselves() {
    let shared = crate::Builder::new().shared(Clock::new(), false).unwrap();
    let soft = &shared.soft;
    for _ in 0..SOFT_BACKLOG + 10 * HELP_BATCH as u64 {
        soft.arm(idle(u64::MAX));
        assert!(soft.requests.pending() <= SOFT_BACKLOG + 1 + SOFT_BACKLOG / WALK_BATCH as u64);
    }
    assert_eq!(
        soft.armed(),
        (SOFT_BACKLOG + 10 * HELP_BATCH as u64) as usize
    );
}

/// A soft timer beyond its bound counts behind callbacks when the worker
/// that took it had returned from its last wait before the bound (it was
/// busy since), and as a stall when it was still waiting after the bound.
#[test]
fn a_soft_timer_beyond_its_bound_is_counted_with_its_cause() {
    let (clock, mock) = Clock::mock();
    let shared = crate::Builder::new().shared(clock, false).unwrap();
    let soft = &shared.soft;
    let tick = soft.state.lock().queue.tick_nanos();
    let mut rounds = Rounds::new();
    for (woke_after_bound, cause) in [(false, "behind callbacks"), (true, "stalled")] {
        let due = mock.now().as_nanos() + tick;
        soft.arm(idle(due));
        soft.round(&mut rounds);
        let bound = due + tick;
        rounds.worker.woke_at = if woke_after_bound { bound + 1 } else { bound };
        mock.set(Instant::from_nanos(bound + 2 * tick));
        assert!(matches!(soft.round(&mut rounds), Round::Fired), "{cause}");
    }
    let statistics = soft.record().statistics();
    assert_eq!(
        (
            statistics.beyond_bound,
            statistics.beyond_bound_behind_callbacks,
            statistics.beyond_bound_stalled
        ),
        (2, 1, 1)
    );
}
