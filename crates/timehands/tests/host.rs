//! The host clock against the kernel: API semantics, agreement with
//! `clock_gettime` to loose bounds (milliseconds, so that a loaded machine never
//! makes them flake), monotonicity across real threads, the counter choice and
//! its environment variable, and a forked child (on unix). The OS's clocks
//! are those of `timehands::sys::kernel_nanos`, so that the tests run on
//! every OS.
// Miri runs neither CPUID nor rdtsc nor fork: these are the host's tests.
#![cfg(not(miri))]

use std::process::Command;

#[path = "support/emulator.rs"]
mod support;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use timehands::sys::KernelClock;
use timehands::{
    AtomicInstant, ClockId, CounterKind, Instant, getres, gettime, info, now, now_coarse,
    now_unordered,
};

/// A loose bound: the clocks agree to microseconds; this only catches a clock
/// that is wrong.
const LOOSE: Duration = Duration::from_millis(50);

fn kernel(clock: KernelClock) -> Duration {
    Duration::from_nanos(timehands::sys::kernel_nanos(clock).expect("a clock every OS has"))
}

fn near(ours: Duration, theirs: Duration, what: &str) {
    let gap = ours.abs_diff(theirs);
    assert!(
        gap < LOOSE,
        "{what}: ours {ours:?}, the kernel's {theirs:?}"
    );
}

#[test]
fn every_clock_id_agrees_with_the_kernel() {
    let cases = [
        (ClockId::Realtime, KernelClock::Realtime),
        (ClockId::Monotonic, KernelClock::Monotonic),
        (ClockId::Boottime, KernelClock::Boottime),
        (ClockId::MonotonicRaw, KernelClock::MonotonicRaw),
        (ClockId::RealtimeCoarse, KernelClock::Realtime),
        (ClockId::MonotonicCoarse, KernelClock::Monotonic),
    ];
    for (id, kernel_id) in cases {
        near(gettime(id), kernel(kernel_id), &format!("{id:?}"));
    }
    // Second is whole seconds of Realtime: at most a second behind it.
    let second = gettime(ClockId::Second);
    let behind = kernel(KernelClock::Realtime).saturating_sub(second);
    assert_eq!(second.subsec_nanos(), 0);
    assert!(
        behind < Duration::from_secs(1) + LOOSE,
        "Second {second:?} is {behind:?} behind"
    );
    near(
        Duration::from_nanos(now().as_nanos()),
        kernel(KernelClock::Monotonic),
        "now()",
    );
}

/// Every read of `now()` lies between two reads of the OS's Monotonic
/// around it, widened by the bound `getres` states: on every OS, whatever
/// the counter.
#[test]
fn now_is_within_its_stated_bound_of_the_os_clock() {
    for _ in 0..20_000 {
        let accuracy = getres(ClockId::Monotonic).accuracy;
        let before = kernel(KernelClock::Monotonic);
        let ours = Duration::from_nanos(now().as_nanos());
        let after = kernel(KernelClock::Monotonic);
        assert!(
            before.saturating_sub(accuracy) <= ours && ours <= after + accuracy,
            "now() {ours:?} outside [{before:?}, {after:?}] ± {accuracy:?}"
        );
    }
}

#[test]
fn resolutions_and_accuracy_bounds_are_stated() {
    for id in ClockId::ALL {
        let res = getres(id);
        assert!(res.resolution > Duration::ZERO, "{id:?}: {res:?}");
        assert!(res.accuracy < Duration::from_secs(2), "{id:?}: {res:?}");
    }
    // The coarse clock is the kernel's (a tick on Linux; the OS's precise
    // clock where it has no coarse one), and lags by its resolution and
    // the 50 µs a coarse read takes off.
    let coarse = getres(ClockId::MonotonicCoarse);
    assert!(
        coarse.accuracy >= coarse.resolution + Duration::from_micros(50),
        "a coarse clock lags by its resolution and the slack: {coarse:?}"
    );
}

#[test]
fn info_says_what_the_clock_runs_on() {
    now();
    let info = info();
    assert!(info.frequency_hz >= 1_000_000, "{info:?}");
    assert!(!info.frequency_source.is_empty());
    assert!(info.windups >= 1);
    match &info.fallback {
        Some(reason) => assert_eq!(info.counter, CounterKind::Kernel, "{reason}"),
        None => assert_ne!(info.counter, CounterKind::Kernel),
    }
}

/// The cross-CPU check runs when a program asks for it (never at a read):
/// its verdict joins the others, the same at a second call, and a TSC that
/// two CPUs read apart is dropped for the kernel's clock.
#[test]
fn the_cross_cpu_check_gives_a_verdict_on_the_tsc() {
    now();
    let verdict = timehands::check_across_cpus();
    println!("{verdict:?}");
    assert_eq!(verdict.check, "cross-CPU TSC check");
    assert_eq!(timehands::check_across_cpus(), verdict, "checked once");
    let info = info();
    assert!(info.verdicts.contains(&verdict), "{:?}", info.verdicts);
    if info.counter != CounterKind::Tsc && !verdict.detail.contains("apart") {
        println!("the clock does not run on the TSC here");
        return;
    }
    if verdict.detail.contains("apart") {
        assert!(!verdict.passed);
        assert!(info.fallback.is_some_and(|why| why.contains("cross-CPU")));
        assert_eq!(info.counter, CounterKind::Kernel);
    } else {
        // Agreed, or could not be run (no affinity to set, say): the TSC stays.
        assert!(
            verdict.passed || verdict.detail.starts_with("not run"),
            "{verdict:?}"
        );
    }
}

/// Readers wind the clock up, and the windups steer it: after some tens of
/// milliseconds of use the frequency has been measured against the kernel.
#[test]
fn use_measures_the_frequency() {
    let start = now();
    while start.elapsed() < Duration::from_millis(60) {
        now();
        thread::sleep(Duration::from_micros(200));
    }
    let info = info();
    let uncertainty = info.frequency_uncertainty_ppb.expect("measured by now");
    assert!(uncertainty < 1_000_000_000, "{info:?}");
    assert!(info.windups > 10, "{info:?}");
}

#[test]
fn instants_behave_like_std_instants() {
    let a = now();
    thread::sleep(Duration::from_millis(2));
    let b = Instant::now();
    assert!(b > a);
    assert_eq!(
        b.duration_since(a),
        Duration::from_nanos(b.as_nanos() - a.as_nanos())
    );
    assert_eq!(a.duration_since(b), Duration::ZERO, "saturating");
    assert_eq!(a.checked_duration_since(b), None);
    assert!(
        a.elapsed() >= b.duration_since(a),
        "elapsed is read after b"
    );
    assert_eq!(
        a.checked_add(Duration::from_nanos(7)).unwrap().as_nanos(),
        a.as_nanos() + 7
    );
    assert_eq!(
        a.checked_sub(Duration::from_nanos(7)).unwrap().as_nanos(),
        a.as_nanos() - 7
    );
    assert_eq!(
        Instant::from_nanos(5).checked_sub(Duration::from_nanos(6)),
        None
    );
    assert_eq!(
        Instant::from_nanos(u64::MAX).checked_add(Duration::from_nanos(1)),
        None
    );
    assert_eq!(Instant::from_nanos(a.as_nanos()), a);
    assert_eq!(b - a, b.duration_since(a));

    // Exact both ways with std's Instant, which is the same clock.
    let std_a: std::time::Instant = a.into();
    assert_eq!(Instant::from(std_a), a);
    let std_now = std::time::Instant::now();
    let ours = Instant::from(std_now);
    assert_eq!(std::time::Instant::from(ours), std_now);
    near(
        Duration::from_nanos(ours.as_nanos()),
        kernel(KernelClock::Monotonic),
        "std::time::Instant converted",
    );
    // Beyond an Instant's range, a std instant saturates instead of wrapping.
    let far = std::time::Instant::now() + Duration::from_secs(1 << 62);
    assert_eq!(Instant::from(far), Instant::from_nanos(u64::MAX));
    if let Some(before_origin) = std::time::Instant::now().checked_sub(Duration::from_secs(1 << 40))
    {
        assert_eq!(Instant::from(before_origin), Instant::from_nanos(0));
    }
}

#[test]
fn atomic_instants() {
    let a = now();
    let shared = AtomicInstant::new(a);
    let later = a + Duration::from_secs(1);
    assert_eq!(shared.fetch_max(later, Ordering::AcqRel), a);
    assert_eq!(shared.fetch_max(a, Ordering::AcqRel), later);
    assert_eq!(shared.load(Ordering::Acquire), later);
    assert_eq!(
        shared.compare_exchange(a, a, Ordering::AcqRel, Ordering::Acquire),
        Err(later)
    );
    shared.store(a, Ordering::Release);
    assert_eq!(shared.load(Ordering::Acquire), a);
}

/// The coarse clock is never ahead of a precise read that follows it.
#[test]
fn coarse_is_never_ahead_of_precise() {
    for _ in 0..100_000 {
        let coarse = now_coarse();
        let precise = now();
        assert!(coarse <= precise, "coarse {coarse:?} ahead of {precise:?}");
    }
}

/// Threads hand timestamps to each other; none may read an earlier time than
/// one it has seen.
#[test]
fn now_never_goes_backwards_across_threads() {
    let threads = thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    let latest = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (latest, start) = (latest.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut backward = 0u64;
                for _ in 0..500_000 {
                    let seen = latest.load(Ordering::Acquire);
                    let t = now().as_nanos();
                    backward += (t < seen) as u64;
                    latest.fetch_max(t, Ordering::AcqRel);
                }
                backward
            })
        })
        .collect();
    let backward: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(backward, 0);
}

/// A forked child (one thread, a copy of the parent's clock) reads time.
#[cfg(unix)]
#[test]
fn a_forked_child_reads_time() {
    if let Some(why) = support::no_fork() {
        println!("skipped: cannot fork here ({why})");
        return;
    }
    let before = now();
    // The parent's coarse time, which the child's must not go back from.
    let coarse = now_coarse();
    // SAFETY: the child calls only timehands (whose thread start allocates:
    // glibc's malloc is fork-safe) and clock_gettime, then leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let precise = (0..1000).all(|_| {
            let t = now();
            let gap = Duration::from_nanos(t.as_nanos()).abs_diff(kernel(KernelClock::Monotonic));
            t >= before && gap < LOOSE
        });
        // Coarse reads only: they move on with the kernel's tick
        // (bounded, so that a failure ends).
        let limit = kernel(KernelClock::Monotonic) + Duration::from_secs(5);
        let start = now_coarse();
        let mut coarse_moves = false;
        while !coarse_moves && kernel(KernelClock::Monotonic) < limit {
            coarse_moves = now_coarse() > start;
        }
        let ok = precise && coarse_moves && start >= coarse;
        // SAFETY: leaves the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status}"
    );
}

/// Runs this test binary again, filtered to `test`, with `TIMEHANDS_COUNTER`
/// set: the counter is chosen once per process.
fn child_with_counter(value: &str, test: &str) -> std::process::Output {
    child(test)
        .env("TIMEHANDS_COUNTER", value)
        .output()
        .unwrap()
}

/// This test binary again, filtered to `test`, a child half (ignored unless
/// a test runs it, so that it never counts as a test of its own).
fn child(test: &str) -> Command {
    let mut command = support::this_binary();
    command
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove("TIMEHANDS_COUNTER");
    command
}

/// In a child process: prints what the clock chose, for the parent to read.
#[test]
#[ignore = "a child half: the counter-choice tests run it"]
fn report_choice_in_child() {
    {
        near(
            Duration::from_nanos(now().as_nanos()),
            kernel(KernelClock::Monotonic),
            "child",
        );
        let info = info();
        println!("COUNTER={} FALLBACK={:?}", info.counter, info.fallback);
        for v in info.verdicts {
            println!("VERDICT {} {} {}", v.check, v.passed, v.detail);
        }
    }
}

/// In a child process: a program that reads only `now_unordered` still winds
/// the clock up (and so steers it).
#[test]
#[ignore = "a child half: unordered_reads_wind_the_clock_up runs it"]
fn unordered_reads_wind_up_in_child() {
    {
        // Only unordered reads (`elapsed` would read `now`, which winds up),
        // until ten windups or five seconds, however the child is scheduled.
        let start = now_unordered();
        while info().windups < 10 && now_unordered().duration_since(start) < Duration::from_secs(5)
        {
            now_unordered();
        }
        println!("WINDUPS={}", info().windups);
    }
}

#[test]
fn unordered_reads_wind_the_clock_up() {
    let out = child("unordered_reads_wind_up_in_child").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let windups: u64 = stdout
        .lines()
        .find_map(|l| l.split_once("WINDUPS="))
        .and_then(|(_, n)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in {stdout}"));
    // A windup is due every millisecond of reads.
    assert!(windups >= 10, "{windups} windups");
}

#[test]
fn the_kernel_counter_can_be_forced() {
    let out = child_with_counter("kernel", "report_choice_in_child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let expected = format!(
        "COUNTER={} FALLBACK=Some(\"TIMEHANDS_COUNTER=kernel\")",
        KernelClock::Monotonic.name()
    );
    assert!(stdout.contains(&expected), "{stdout}");
}

#[test]
fn a_bad_counter_name_is_reported_and_ignored() {
    let out = child_with_counter("hpet", "report_choice_in_child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    // Said in the verdicts, not on stderr: a library's read prints nothing.
    assert!(
        stdout.contains("VERDICT TIMEHANDS_COUNTER false \"hpet\" is not"),
        "{stdout}"
    );
    assert!(stderr.is_empty(), "{stderr}");
}

/// The tracer's description: 1 GHz from CLOCK_MONOTONIC's origin, and an
/// offset that takes a timestamp to Unix time.
#[test]
fn the_trace_clock_description_maps_timestamps_to_unix_time() {
    let clock = timehands::clock_description();
    assert_eq!(clock.frequency, 1_000_000_000);
    assert!(clock.offset < 1_000_000_000);
    assert!(!clock.absolute);
    assert_eq!(clock.uuid.len(), 36, "{}", clock.uuid);
    assert_eq!(
        clock.uuid,
        timehands::clock_description().uuid,
        "one UUID per process"
    );
    let unix = Duration::new(clock.offset_s as u64, clock.offset as u32)
        + Duration::from_nanos(now().as_nanos());
    near(unix, kernel(KernelClock::Realtime), "timestamp + offset");
    let ctf = clock.to_ctf();
    for field in [
        "name = timehands_monotonic;",
        "freq = 1000000000;",
        "absolute = FALSE;",
    ] {
        assert!(ctf.contains(field), "{ctf}");
    }
    assert!(
        ctf.contains(&format!("offset_s = {};", clock.offset_s)),
        "{ctf}"
    );
}

/// Coherent coarse reads: never earlier than a coherent precise read that
/// happened before them (on this thread or, handed over, on another), never
/// ahead of a precise read that follows.
#[test]
fn coherent_coarse_reads_never_precede_a_precise_one() {
    use timehands::{now_coarse_coherent, now_coherent};

    for _ in 0..100_000 {
        let precise = now_coherent();
        let coarse = now_coarse_coherent();
        assert!(
            coarse >= precise,
            "coarse {coarse:?} before precise {precise:?}"
        );
        assert!(
            coarse <= now(),
            "coarse {coarse:?} ahead of a later precise read"
        );
    }
    let handed = Arc::new(AtomicInstant::new(Instant::from_nanos(0)));
    let writer = {
        let handed = handed.clone();
        thread::spawn(move || {
            for _ in 0..100_000 {
                handed.store(now_coherent(), Ordering::Release);
            }
        })
    };
    let mut last = now_coarse_coherent();
    for _ in 0..100_000 {
        let seen = handed.load(Ordering::Acquire);
        let coarse = now_coarse_coherent();
        assert!(
            coarse >= seen,
            "coarse {coarse:?} before {seen:?}, seen before it"
        );
        assert!(coarse >= last, "coherent coarse went backwards");
        last = coarse;
    }
    writer.join().unwrap();
}
