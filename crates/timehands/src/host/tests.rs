//! The host clock on test counters: the move to the chosen counter, failovers,
//! and the choice's verdicts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::choice::*;
use super::clock::*;
use super::counter::*;
#[cfg(feature = "serde")]
use super::info::info;
use super::read::*;
use crate::host::kernel_clocks::SystemClocks;
use crate::{BinTime, Counter, Timekeeper};

/// The kernel's CLOCK_MONOTONIC, in ns.
fn monotonic() -> u64 {
    crate::os::kernel_nanos(crate::os::KernelClock::Monotonic).expect("every OS has Monotonic")
}

/// CLOCK_MONOTONIC's nanoseconds as a 1 GHz counter, which the test can
/// make jump or stop.
#[derive(Clone, Default)]
pub(crate) struct Faulty {
    jump: Arc<AtomicU64>,
    /// Where the counter stands, once stopped. Reads take the lock, so that
    /// a stop lands after every read made before it.
    stopped_at: Arc<Mutex<Option<u64>>>,
}

impl Faulty {
    /// Stops the counter where it is: no read made before is past it.
    fn stop(&self) {
        let mut stopped = self.stopped_at.lock().expect("the counter's lock");
        *stopped = Some(monotonic() + self.jump.load(Ordering::Relaxed));
    }

    /// Stops the counter at `count`, wherever reads were.
    fn stop_at(&self, count: u64) {
        *self.stopped_at.lock().expect("the counter's lock") = Some(count);
    }
}

impl Counter for Faulty {
    fn read(&self) -> u64 {
        let stopped = self.stopped_at.lock().expect("the counter's lock");
        stopped.unwrap_or_else(|| monotonic() + self.jump.load(Ordering::Relaxed))
    }
    fn frequency(&self) -> u64 {
        1_000_000_000
    }
    fn name(&self) -> &str {
        "faulty"
    }
}

/// What a reader saw: its last time, and every step back (from, to).
struct Seen {
    last: BinTime,
    steps_back: Vec<(BinTime, BinTime)>,
}

/// Any hint splits nanoseconds right: the hint's second and the next go
/// the short way, every other one (a stale hint, a step of realtime) the
/// long way.
#[test]
fn seconds_split_right_whatever_the_hint() {
    let hint = AtomicU64::new(0);
    for ns in [0, 999_999_999, 1_000_000_000, 5_123_456_789, u64::MAX] {
        for second in [0, 4, 5, 6, 7, 1_000, u64::MAX / 1_000_000_000] {
            hint.store(second, Ordering::Relaxed);
            assert_eq!(
                split_near(ns, &hint),
                Duration::from_nanos(ns),
                "{ns} near {second}"
            );
        }
    }
}

/// A thread that reads `clock` as `now()` does, winding it up when due,
/// until `stop`.
fn read_until(clock: &'static HostClock, stop: Arc<AtomicBool>) -> JoinHandle<Seen> {
    std::thread::spawn(move || {
        let mut seen = Seen {
            last: BinTime::ZERO,
            steps_back: Vec::new(),
        };
        while !stop.load(Ordering::Relaxed) {
            let (now, due) = clock.timekeeper().uptime_and_due();
            if now < seen.last {
                seen.steps_back.push((seen.last, now));
            }
            seen.last = now;
            if due {
                clock.windup_from_reader();
            }
        }
        seen
    })
}

/// A clock started as the process's is starts on the kernel's clock
/// (nothing to choose at the first read) and moves to the counter
/// `choose` picks, measured over the windups its readers make, with no
/// step back for a reader reading through it.
#[test]
#[cfg_attr(miri, ignore = "reads the CPU's counter and the kernel's clocks")]
fn the_clock_starts_on_the_kernel_clock_and_moves_to_the_chosen_counter() {
    let clock: &'static HostClock = Box::leak(Box::new(HostClock::start()));
    assert!(on_kernel_clock(clock.timekeeper()));
    assert_eq!(clock.choice.load(Ordering::Acquire), TO_CHOOSE);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = read_until(clock, stop.clone());
    // The loop bound only keeps a broken hand-over from hanging the test.
    for _ in 0..5000 {
        if clock.choice.load(Ordering::Acquire) == CHOSEN {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(5));
    stop.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("the reader ran");
    assert_eq!(seen.steps_back, []);
    let chosen = choose();
    assert_eq!(
        clock.timekeeper().counter().name(),
        chosen.counter.name(),
        "{:?}",
        clock.facts().fallback
    );
    if !on_kernel_clock(clock.timekeeper()) {
        assert_eq!(
            clock.stages[0].get().map(Timekeeper::windup),
            Some(crate::Windup::Retired)
        );
    }
    assert!(clock.timekeeper().uptime() >= seen.last);
}

/// A host clock on `counter`, read by a thread that winds it up as
/// `now()` does, and asked a millisecond apart whether it is stale, as
/// `getres` and a coarse read ask (the one way a counter that stopped is
/// found: reads of it never fall due), until the watchdog fails it over
/// after `fault`: no windup but these. Returns the clock (leaked, as the
/// process's clock is static) and what the reader saw.
fn fail_over_after(counter: Faulty, fault: impl FnOnce(&Faulty)) -> (&'static HostClock, Seen) {
    let clock = HostClock::on_test_counter(Arc::new(counter.clone()), &SystemClocks, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = read_until(clock, stop.clone());
    // Some steerings of a counter that keeps time, enough for the
    // watchdog to know its rate: no failover.
    std::thread::sleep(Duration::from_millis(60));
    assert!(
        clock.facts().fallback.is_none(),
        "{:?}",
        clock.facts().fallback
    );
    fault(&counter);
    // The loop bound only keeps a broken watchdog from hanging the test.
    for _ in 0..5000 {
        if clock.facts().fallback.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
        clock.wind_up_if_stale(monotonic());
    }
    std::thread::sleep(Duration::from_millis(5));
    stop.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("the reader ran");
    (clock, seen)
}

/// With `serde`, `info()` is the JSON document tools print: the fields by
/// name, the accuracy in nanoseconds, the verdicts as objects.
#[cfg(feature = "serde")]
#[test]
#[cfg_attr(miri, ignore = "reads the CPU's counter and the kernel's clocks")]
fn info_serializes_by_name() {
    let doc = serde_json::to_value(info()).expect("serializes");
    assert_eq!(doc["counter"], info().counter.name());
    assert!(doc["accuracy_ns"].is_u64(), "{doc}");
    assert!(doc["frequency_hz"].as_u64().is_some_and(|hz| hz > 0));
    let verdicts = doc["verdicts"].as_array().expect("an array");
    for v in verdicts {
        assert!(v["check"].is_string() && v["passed"].is_boolean() && v["detail"].is_string());
    }
}

/// A suspend (the Boottime offset grew) restarts the rate's baseline:
/// counts that ran on while CLOCK_MONOTONIC stood still are no frequency.
/// Offsets that did not move keep it.
#[test]
#[cfg_attr(miri, ignore = "reads the kernel's clocks")]
fn a_suspend_restarts_the_rate_baseline() {
    let counter = Faulty::default();
    let start = crate::host::brackets::Pair::new(counter.read(), monotonic(), 0);
    let clock = HostClock::new(
        Choice {
            counter: HostCounter::Test(Arc::new(counter)),
            frequency_source: "the test".into(),
            verdicts: super::choice::KeptVerdicts::default(),
            fallback: None,
            anchor: Some(start),
            uncertainty_ppb: Some(0),
            own_evidence: None,
        },
        &SystemClocks,
    );
    let mut steering = clock.steering();
    steering.follow_offsets(clock.kernel);
    assert!(steering.has_rate_anchor());
    steering.pretend_suspended(1_000_000_000);
    let found = steering.follow_offsets(clock.kernel);
    assert!(found.boottime.is_some());
    assert!(!steering.has_rate_anchor());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn cross_cpu_verdicts() {
    use crate::diagnostics::tsc_sync::{PairBounds, Report, SyncError};
    let pair = |lo: i64, hi: i64| PairBounds {
        cpus: (0, 3),
        lo,
        hi,
        lo_ns: lo as f64 / 2.0,
        hi_ns: hi as f64 / 2.0,
        min_round_trip: (hi - lo) as u64,
        min_round_trip_ns: (hi - lo) as f64 / 2.0,
        handoffs: 2_000,
        backward: 0,
    };
    let (verdict, why) = verdict_of(Ok(Report {
        pairs: vec![pair(-300, 500)],
    }));
    assert!(verdict.passed && why.is_none(), "{verdict:?}");
    assert_eq!(
        verdict.detail,
        "1 CPU pairs agree, bounds at most 400 ns wide"
    );

    let (verdict, why) = verdict_of(Ok(Report {
        pairs: vec![pair(-300, 500), pair(2_000, 2_800)],
    }));
    assert!(!verdict.passed);
    assert_eq!(verdict.detail, "CPUs (0, 3) are [1000, 1400] ns apart");
    assert_eq!(
        why.as_deref(),
        Some("the cross-CPU TSC check found CPUs (0, 3) are [1000, 1400] ns apart")
    );

    // Not measured: no verdict against the TSC, and no failover.
    let (verdict, why) = verdict_of(Err(SyncError::Frequency));
    assert!(!verdict.passed && verdict.detail.starts_with("not run: "));
    assert!(why.is_none());
    let (verdict, why) = verdict_of(Ok(Report { pairs: Vec::new() }));
    assert!(!verdict.passed && verdict.detail.starts_with("not run: "));
    assert!(why.is_none());
}

#[test]
#[cfg_attr(miri, ignore = "reads the kernel's clocks and sleeps")]
fn a_counter_that_jumps_is_replaced_by_the_kernel_clock_without_a_step_back() {
    let (clock, seen) = fail_over_after(Faulty::default(), |c| {
        c.jump.store(1_000_000_000, Ordering::Relaxed)
    });
    let why = clock.facts().fallback.expect("the watchdog failed over");
    assert!(why.contains("ppm"), "{why}");
    assert_eq!(
        clock.timekeeper().counter().name(),
        crate::os::KernelClock::Monotonic.name()
    );
    assert_eq!(seen.steps_back, []);
    assert!(clock.timekeeper().uptime() >= seen.last);
    assert_eq!(
        clock.stages[0].get().map(Timekeeper::windup),
        Some(crate::Windup::Retired)
    );
}

#[test]
#[cfg_attr(miri, ignore = "reads the kernel's clocks and sleeps")]
fn a_counter_that_stops_is_replaced_by_the_kernel_clock_without_a_step_back() {
    // Stopped where it is: past no read the reader made (which would be a
    // step back of the counter's own, not the clock's).
    let (clock, seen) = fail_over_after(Faulty::default(), Faulty::stop);
    assert_eq!(seen.steps_back, []);
    let why = clock.facts().fallback.expect("the watchdog failed over");
    // The steering interval in which it stopped shows a counter far too
    // slow; the next ones a stopped one: either is caught.
    assert!(why.contains("stopped") || why.contains("ppm"), "{why}");
    // The kernel's clock moves on where the stopped counter could not,
    // once the readers moved to it (at the first windup past its point, up
    // to two windup intervals after the failover: a run whose windup came
    // 7 ms after it found the retired one still standing).
    let before = clock.timekeeper().uptime();
    let limit = std::time::Instant::now() + Duration::from_secs(1);
    while clock.timekeeper().uptime() <= before.max(seen.last) && std::time::Instant::now() < limit
    {
        std::thread::sleep(Duration::from_millis(1));
        clock.windup();
    }
    assert!(clock.timekeeper().uptime() > before.max(seen.last));
}

/// Engine reads behind the base clamp to the base (the engine's defence
/// against a few cycles of skew), which here is one step back: to the time
/// of the last windup. There they stand until the watchdog fails over, and
/// the kernel's clock carries on from it. (The process's reads stand on
/// CLOCK_MONOTONIC less the bound meanwhile: `read::read_after_windup`.)
#[test]
#[cfg_attr(miri, ignore = "reads the kernel's clocks and sleeps")]
fn a_counter_that_goes_backwards_is_replaced_by_the_kernel_clock() {
    // Stopped a second in the past: behind every earlier read.
    let (clock, seen) = fail_over_after(Faulty::default(), |c| {
        c.stop_at(monotonic() - 1_000_000_000)
    });
    let why = clock.facts().fallback.expect("the watchdog failed over");
    assert!(why.contains("backwards"), "{why}");
    assert!(seen.steps_back.len() <= 1, "{:?}", seen.steps_back);
    assert!(clock.timekeeper().uptime() >= seen.last);
}

/// The watchdog finds a counter gone wrong at a read's windup inside a
/// signal handler, and the read fails over there, as any read does: a
/// failover allocates nothing and waits for no lock.
#[cfg(unix)]
#[test]
#[cfg_attr(
    miri,
    ignore = "reads the kernel's clocks and installs a signal handler"
)]
fn a_failover_found_in_a_signal_handler_is_made_there() {
    use std::sync::atomic::AtomicPtr;
    static CLOCK: AtomicPtr<HostClock> = AtomicPtr::new(std::ptr::null_mut());
    extern "C" fn handler(_: libc::c_int) {
        // SAFETY: set below to a leaked clock before the signal is raised.
        let clock: &'static HostClock = unsafe { &*CLOCK.load(Ordering::Acquire) };
        clock.windup();
    }
    let counter = Faulty::default();
    let clock = HostClock::on_test_counter(Arc::new(counter.clone()), &SystemClocks, 0);
    CLOCK.store(std::ptr::from_ref(clock).cast_mut(), Ordering::Release);
    // Steerings of a counter that keeps time, for the watchdog to know its
    // rate.
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(12));
        clock.windup();
    }
    assert!(clock.facts().fallback.is_none());
    counter.jump.store(1_000_000_000, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(12));
    // SIGURG, whose default is to be ignored, is this test's own (every
    // unix has it; the other tests of this binary use SIGUSR1 and SIGUSR2).
    let signal = libc::SIGURG;
    // SAFETY: a zeroed sigaction with this handler and an empty mask is
    // valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(libc::sigaction(signal, &action, std::ptr::null_mut()), 0);
        assert_eq!(libc::raise(signal), 0);
    }
    assert!(
        clock.steering().misbehaving.is_none(),
        "the finding was left for later"
    );
    let why = clock.facts().fallback.expect("failed over after");
    assert!(why.contains("watchdog"), "{why}");
    assert_eq!(
        clock.timekeeper().counter().name(),
        crate::os::KernelClock::Monotonic.name()
    );
}
