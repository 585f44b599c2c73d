//! quanta's API, as its users meet it, on timehands.
//!
//! The recent time and the upkeep are one per process: the tests that pin,
//! start or stop them take `GLOBALS` first, so that no other test sees them
//! half-way.

use std::panic;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use quanta::{Clock, Error, Instant, Upkeep, set_recent, with_clock};

static GLOBALS: Mutex<()> = Mutex::new(());

/// The process's recent time and upkeep, to one test at a time; the recent
/// time is unpinned again when the test ends, passed or failed, so that a
/// failure does not spread to the tests after it.
struct Globals {
    _turn: MutexGuard<'static, ()>,
}

impl Drop for Globals {
    fn drop(&mut self) {
        set_recent(zero());
    }
}

fn globals() -> Globals {
    let turn = GLOBALS.lock();
    Globals {
        _turn: turn.unwrap_or_else(|poisoned| poisoned.into_inner()),
    }
}

/// Waits until `done`, which a thread of the crate's makes true: a wait
/// that asserts no speed, with a deadline so that a bug fails rather than
/// hangs.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within a minute"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

fn nanos(t: Instant) -> u64 {
    timehands::Instant::from(t).as_nanos()
}

/// `Instant(0)`: the instant that unpins the recent time.
fn zero() -> Instant {
    Clock::new().scaled(0)
}

#[test]
fn the_types_cross_threads_as_quantas_do() {
    // governor keeps an `Arc<Handle>` in a clock its limiters share.
    fn shared<T: Send + Sync + Unpin + 'static>() {}
    fn unwind_safe<T: panic::UnwindSafe + panic::RefUnwindSafe>() {}
    shared::<Clock>();
    shared::<Instant>();
    shared::<quanta::Mock>();
    shared::<Upkeep>();
    shared::<quanta::Handle>();
    shared::<Error>();
    unwind_safe::<Clock>();
    unwind_safe::<Instant>();
    unwind_safe::<quanta::Mock>();
    unwind_safe::<Upkeep>();
}

#[test]
fn host_instants_are_timehands_nanoseconds() {
    let clock = Clock::new();
    let before = timehands::now().as_nanos();
    let instant = nanos(Instant::now());
    let clock_now = nanos(clock.now());
    let raw = clock.raw();
    let timeline = clock.delta_as_nanos(0, clock.raw());
    let after = timehands::now().as_nanos();
    assert!(before <= instant && instant <= clock_now && clock_now <= raw);
    assert!(raw <= timeline && timeline <= after);
    assert_eq!(
        clock.scaled(raw),
        Instant::from(timehands::Instant::from_nanos(raw))
    );
}

#[test]
fn raw_deltas_are_nanoseconds_and_saturate_at_zero() {
    let clock = Clock::new();
    assert_eq!(clock.delta_as_nanos(3, 1_000_003), 1_000_000);
    assert_eq!(clock.delta(3, 1_000_003), Duration::from_millis(1));
    assert_eq!(clock.delta_as_nanos(5, 3), 0);
    assert_eq!(clock.delta(5, 5), Duration::ZERO);
}

#[test]
fn now_never_goes_back_across_threads() {
    // Each thread reads the latest instant any thread published, then its
    // own: its own may not be earlier.
    let latest = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let latest = latest.clone();
            thread::spawn(move || {
                let clock = Clock::new();
                for i in 0..100_000u32 {
                    let seen = latest.load(Ordering::Acquire);
                    let now = if i % 2 == 0 {
                        nanos(Instant::now())
                    } else {
                        clock.raw()
                    };
                    assert!(now >= seen, "{now} read after {seen}");
                    latest.fetch_max(now, Ordering::AcqRel);
                }
            })
        })
        .collect();
    for reader in readers {
        reader.join().unwrap();
    }
}

#[test]
fn a_mock_starts_at_zero_and_moves_only_by_hand() {
    let (clock, mock) = Clock::mock();
    assert_eq!(clock.raw(), 0);
    // A bare literal, as quanta's users write it: only u64 can be it.
    mock.increment(42);
    mock.increment(Duration::from_micros(1));
    assert_eq!(clock.now(), clock.scaled(1_042));
    assert_eq!(clock.recent(), clock.now());
    let other_hand = (*mock).clone();
    other_hand.decrement(Duration::from_nanos(40));
    assert_eq!(mock.value(), 1_002);
    assert_eq!(clock.clone().raw(), 1_002);
}

#[test]
fn a_mock_saturates_at_both_ends() {
    let (clock, mock) = Clock::mock();
    mock.decrement(1u64);
    assert_eq!(clock.raw(), 0);
    mock.increment(u64::MAX);
    mock.increment(Duration::MAX);
    assert_eq!(clock.raw(), u64::MAX);
}

#[test]
fn with_clock_mocks_this_threads_instants_until_it_returns() {
    let (outer, outer_mock) = Clock::mock();
    let (inner, inner_mock) = Clock::mock();
    outer_mock.increment(1_000u64);
    inner_mock.increment(2_000u64);
    let host_before = Instant::now();
    with_clock(&outer, || {
        assert_eq!(nanos(Instant::now()), 1_000);
        with_clock(&inner, || assert_eq!(nanos(Instant::now()), 2_000));
        assert_eq!(nanos(Instant::now()), 1_000);
        let start = Instant::now();
        outer_mock.increment(Duration::from_secs(30));
        assert_eq!(start.elapsed(), Duration::from_secs(30));
        // Another thread reads the host clock meanwhile.
        let elsewhere = thread::spawn(Instant::now).join().unwrap();
        assert!(elsewhere >= host_before);
    });
    let host_after = Instant::now();
    assert!(host_after >= host_before);
    assert!(nanos(host_after) <= timehands::now().as_nanos());
    // A host clock as the thread's clock: its recent time is the host's.
    with_clock(&Clock::new(), || {
        let recent = Instant::recent();
        assert!(recent <= Instant::now() && nanos(recent) > 0);
    });
}

#[test]
fn with_clock_is_undone_by_a_panic() {
    let (clock, mock) = Clock::mock();
    mock.increment(7u64);
    let host_before = Instant::now();
    let unwound = panic::catch_unwind(|| {
        with_clock(&clock, || {
            assert_eq!(nanos(Instant::now()), 7);
            panic!("the closure fails");
        })
    });
    assert!(unwound.is_err());
    assert!(Instant::now() >= host_before);
    // An inner closure's panic gives the outer closure its clock back.
    with_clock(&clock, || {
        let (inner, _inner_mock) = Clock::mock();
        let unwound = panic::catch_unwind(|| with_clock(&inner, || panic!("the inner one fails")));
        assert!(unwound.is_err());
        assert_eq!(nanos(Instant::now()), 7);
    });
}

#[test]
fn the_recent_time_is_fresh_without_an_upkeep() {
    let _globals = globals();
    let clock = Clock::new();
    let first = clock.recent();
    assert!(nanos(first) > 0);
    let mut last = first;
    for _ in 0..1_000 {
        let recent = clock.recent();
        let instant_recent = Instant::recent();
        let now = clock.now();
        assert!(last <= recent && recent <= instant_recent && instant_recent <= now);
        last = recent;
    }
    // It moves on while it is read, though no upkeep runs.
    let later = clock.now();
    eventually("the recent time passing a later now()", || {
        clock.recent() >= later
    });
}

#[test]
fn set_recent_pins_the_recent_time_until_it_is_set_to_zero() {
    let _globals = globals();
    let clock = Clock::new();
    let pinned = clock.scaled(1_440);
    set_recent(pinned);
    assert_eq!(clock.recent(), pinned);
    assert_eq!(Instant::recent(), pinned);
    // A mocked clock's recent time is the mock's, pinned or not; its
    // thread's `Instant::recent` is the pinned one, as in quanta.
    let (mock_clock, mock) = Clock::mock();
    mock.increment(42u64);
    assert_eq!(nanos(mock_clock.recent()), 42);
    with_clock(&mock_clock, || assert_eq!(Instant::recent(), pinned));
    set_recent(zero());
    assert!(clock.recent() > pinned);
    with_clock(&mock_clock, || assert_eq!(nanos(Instant::recent()), 42));
}

#[test]
fn one_upkeep_runs_at_a_time() {
    let _globals = globals();
    let first = Upkeep::new(Duration::from_millis(1)).start().unwrap();
    let second = Upkeep::new(Duration::from_millis(1)).start();
    let Err(error) = second else {
        panic!("a second upkeep started beside the first");
    };
    assert!(matches!(error, Error::UpkeepRunning));
    assert_eq!(error.to_string(), "upkeep thread already running");
    assert!(std::error::Error::source(&error).is_none());
    drop(first);
    let again = Upkeep::new_with_clock(Duration::from_millis(1), Clock::new()).start();
    assert!(again.is_ok());

    let refused = Error::FailedToSpawnUpkeepThread(std::io::Error::other("no threads here"));
    assert_eq!(
        refused.to_string(),
        "failed to spawn upkeep thread: no threads here"
    );
    assert!(std::error::Error::source(&refused).is_some());
}

/// The threads of this process named as quanta names its upkeep thread.
#[cfg(target_os = "linux")]
fn upkeep_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "quanta-upkeep")
        .count()
}

#[cfg(target_os = "linux")]
#[test]
fn an_upkeep_of_the_host_clock_starts_no_thread_and_one_of_a_mock_does() {
    let _globals = globals();
    let host = Upkeep::new(Duration::from_millis(1)).start().unwrap();
    assert_eq!(upkeep_threads(), 0);
    drop(host);
    let mock = Upkeep::new_with_clock(Duration::from_millis(1), Clock::mock().0);
    let mock = mock.start().unwrap();
    // The thread names itself once it runs.
    eventually("the mock's upkeep thread named", || upkeep_threads() == 1);
    drop(mock);
    assert_eq!(upkeep_threads(), 0);
}

#[test]
fn an_upkeep_of_the_host_clock_unpins_the_recent_time() {
    let _globals = globals();
    let clock = Clock::new();
    let pinned = clock.scaled(1);
    set_recent(pinned);
    let handle = Upkeep::new(Duration::from_secs(1)).start().unwrap();
    let recent = clock.recent();
    assert!(recent > pinned && recent <= clock.now());
    drop(handle);
    assert!(clock.recent() >= recent);
}

#[test]
fn an_upkeep_of_a_mocked_clock_stores_its_time_as_the_recent_time() {
    let _globals = globals();
    let (clock, mock) = Clock::mock();
    mock.increment(Duration::from_secs(5));
    let handle = Upkeep::new_with_clock(Duration::from_millis(1), clock.clone())
        .start()
        .unwrap();
    assert_eq!(nanos(Instant::recent()), 5_000_000_000);
    mock.increment(Duration::from_secs(1));
    eventually("the mock's new time stored", || {
        nanos(Instant::recent()) == 6_000_000_000
    });
    drop(handle);
    // The mock's time is not the host's recent time any more.
    let host = Clock::new();
    assert!(host.recent() <= host.now());
    assert_ne!(nanos(host.recent()), 6_000_000_000);
}

#[test]
fn instants_saturate_where_quanta_does_and_panic_where_it_does() {
    let clock = Clock::new();
    let early = clock.scaled(1_000);
    let late = clock.scaled(3_000);
    assert_eq!(late - early, Duration::from_nanos(2_000));
    assert_eq!(early - late, Duration::ZERO);
    assert_eq!(early.duration_since(late), Duration::ZERO);
    assert_eq!(early.saturating_duration_since(late), Duration::ZERO);
    assert_eq!(early.checked_duration_since(late), None);
    assert_eq!(early + Duration::from_nanos(2_000), late);
    assert_eq!(late - Duration::from_nanos(2_000), early);
    let mut moved = early;
    moved += Duration::from_nanos(2_000);
    assert_eq!(moved, late);
    moved -= Duration::from_nanos(2_000);
    assert_eq!(moved, early);
    assert!(early < late && late.max(early) == late);
    assert_eq!(early.checked_sub(Duration::from_nanos(1_001)), None);
    assert_eq!(early.checked_add(Duration::from_secs(u64::MAX)), None);
    assert_eq!(
        clock.scaled(u64::MAX).checked_add(Duration::from_nanos(1)),
        None
    );
    assert_eq!(format!("{late:?}"), "3000");
    let future = Instant::now() + Duration::from_secs(3600);
    assert_eq!(future.elapsed(), Duration::ZERO);

    let overflows = [
        panic::catch_unwind(|| early - Duration::from_nanos(1_001)),
        panic::catch_unwind(|| clock.scaled(u64::MAX) + Duration::from_nanos(1)),
        panic::catch_unwind(|| {
            let mut t = early;
            t -= Duration::from_micros(2);
            t
        }),
        panic::catch_unwind(|| {
            let mut t = clock.scaled(u64::MAX);
            t += Duration::from_nanos(1);
            t
        }),
    ];
    assert!(overflows.iter().all(Result::is_err));
}
