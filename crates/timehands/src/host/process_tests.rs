//! The process's clock as programs meet it: forked at each step of its
//! life, forked at random in its first milliseconds and while it steers,
//! stopped and continued (`stop.rs`), read in bursts between idle spells
//! (`idle.rs`), read by every kind of thread (`callers.rs`). Each scenario
//! runs in a fresh process (this test
//! binary again, filtered to [`process_child`]), which forks or is stopped;
//! a forked child checks its clock and reports by its exit status to that
//! process, which reports to the test; the test asserts. No child half
//! counts as a test of its own: it is ignored unless a test runs it. A
//! simulated kernel's slew through a fork (`simulated_kernel/rate_changes.rs`) forks in
//! a process of its own the same way, through [`assert_half_passes`].
//!
//! A forked child's checks ([`check_forked_child`]): an offset of
//! microseconds, not milliseconds, last measured; every read within
//! the bound `getres` states of CLOCK_MONOTONIC read around it and never
//! back; time that moves (it neither stands nor lags); a steering within a
//! second; `info` that returns (an alarm ends a child that hangs); the
//! counter chosen, or the reason it is not.

#[cfg(target_os = "linux")]
mod callers;
#[path = "../../tests/support/emulator.rs"]
mod emulator;
mod idle;
pub(super) mod signals;
mod standing;
mod stop;
pub(super) use emulator::no_fork;
use emulator::this_binary;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::fork_points::pause::{FORKED, FORKER, FORKING, PAUSE_AT, PAUSED};
use super::fork_points::signal::SIGNAL_AT;
use crate::{ClockId, CounterKind, getres, info, now};

/// The child half's test, by its full path.
pub(super) const PROCESS_CHILD: &str = "host::process_tests::process_child";
/// The environment variable that tells the child half what to do.
const PLAN: &str = "TIMEHANDS_TEST_PLAN";
/// The fork points of the clock's life (see `fork_points::point`).
const POINTS: [&str; 6] = [
    "choice: made, not handed over",
    "hand-over: retired, no successor",
    "hand-over: successor set, readers not moved",
    "hand-over: due, readers not moved",
    "steering: rate set",
    "windup: wound up, not steered",
];

/// CLOCK_MONOTONIC in ns, from the kernel.
fn kernel_now() -> u64 {
    crate::os::kernel_nanos(crate::os::KernelClock::Monotonic).expect("Monotonic reads")
}

/// A read of ours checked against CLOCK_MONOTONIC read before and after it,
/// with the bound `getres` stated just before; and against the last read.
pub(super) struct Checker {
    last: u64,
    worst: i64,
}

impl Checker {
    pub(super) fn new() -> Checker {
        Checker { last: 0, worst: 0 }
    }

    /// One bracketed read: its time, or what is wrong with it.
    pub(super) fn read(&mut self) -> Result<u64, String> {
        // The bound at the moment of the read lies between the bounds stated
        // before and after it (a steering or a hand-over may change it).
        let stated = || getres(ClockId::Monotonic).accuracy.as_nanos() as u64;
        let bound = stated();
        let before = kernel_now();
        let ours = now().as_nanos();
        let after = kernel_now();
        let bound = bound.max(stated());
        if ours < self.last {
            return Err(format!("stepped back: {} then {ours}", self.last));
        }
        if ours + bound < before || ours > after + bound {
            let info = info();
            return Err(format!(
                "{ours} read between CLOCK_MONOTONIC {before} and {after}, bound {bound} ns \
                 (after {} steerings, {} windups, {} by readers, {} standing reads; {:?})",
                info.steerings,
                info.windups,
                info.reader_windups,
                info.standing_reads,
                info.counter
            ));
        }
        let off = if ours < before {
            ours as i64 - before as i64
        } else {
            ours.saturating_sub(after) as i64
        };
        if off.abs() > self.worst.abs() {
            self.worst = off;
        }
        self.last = ours;
        Ok(ours)
    }
}

/// What a forked child checks of its clock (see the module docs).
pub(super) fn check_forked_child() -> Result<(), String> {
    // SAFETY: alarm(2) only arms a timer; its SIGALRM ends a child that hangs.
    unsafe { libc::alarm(10) };
    let mut checker = Checker::new();
    // The offset the clock last measured is some microseconds: one of
    // milliseconds is a measurement of reads that stood. (A steering held
    // up after its windup measured the time its reads stood at the hands'
    // promise, stated it as the bound and slewed it away: forked at a
    // windup paused 20 ms, children stated 20-49 ms, ran up to 6 ms ahead
    // and slewed back, see `offset_on_running_clock`.)
    let measured = info().offset_ns;
    if measured.unsigned_abs() > 1_000_000 {
        return Err(format!("an offset of {measured} ns measured; {:?}", info()));
    }
    // Ours at the start and the end, CLOCK_MONOTONIC read inside: ours
    // moved at least as far.
    let start = (checker.read()?, kernel_now());
    while kernel_now() - start.1 < 20_000_000 {
        checker.read()?;
    }
    let end = (kernel_now(), checker.read()?);
    let (moved, elapsed) = (end.1 - start.0, end.0 - start.1);
    if moved + 1_000_000 < elapsed {
        return Err(format!(
            "time stood: {moved} ns in {elapsed} ns; {:?}",
            info()
        ));
    }
    let steerings = info().steerings;
    let limit = kernel_now() + 1_000_000_000;
    while info().steerings == steerings {
        checker.read()?;
        if kernel_now() > limit {
            return Err("never steered again".to_string());
        }
    }
    let info = info();
    if info.counter == CounterKind::Kernel && info.fallback.is_none() {
        return Err("on the kernel's clock with no reason given".to_string());
    }
    Ok(())
}

/// Forks; the child runs `check_forked_child` and leaves with its verdict,
/// the parent returns the child's pid.
fn fork_and_check() -> libc::pid_t {
    fork_and(check_forked_child)
}

/// Forks; the child runs `check` and leaves with its verdict (its reason
/// on stderr), the parent returns the child's pid (see [`verdict`]).
pub(super) fn fork_and(check: impl FnOnce() -> Result<(), String>) -> libc::pid_t {
    // SAFETY: the child calls only timehands, the kernel's clock and
    // allocation (glibc's malloc is fork-safe), then leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match check() {
            Ok(()) => 0,
            Err(why) => {
                eprintln!("FORKED CHILD: {why}");
                1
            }
        };
        // SAFETY: leaves the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Waits for the forked child `pid`, at most 15 s (then kills it): its
/// verdict.
pub(super) fn verdict(pid: libc::pid_t) -> Result<(), String> {
    let limit = Instant::now() + Duration::from_secs(15);
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child, without blocking.
        match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
            0 if Instant::now() < limit => std::thread::sleep(Duration::from_millis(1)),
            0 => {
                // SAFETY: ends our own child, which hangs.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return Err("the forked child hung".to_string());
            }
            _ if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 => return Ok(()),
            _ if libc::WIFSIGNALED(status) => {
                return Err(format!(
                    "the forked child died of signal {} (SIGALRM: it hung)",
                    libc::WTERMSIG(status)
                ));
            }
            _ => return Err(format!("the forked child failed: status {status}")),
        }
    }
}

/// A small generator, seeded from the clock, its seed printed.
struct Lcg(u64);

impl Lcg {
    fn seeded() -> Lcg {
        let seed = kernel_now() ^ std::process::id() as u64;
        println!("seed {seed}");
        Lcg(seed)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) % n
    }
}

/// The child half: runs the plan its environment names, prints what
/// happened, and fails if any forked child's checks failed.
#[test]
#[ignore = "the child half of the process tests, which run it"]
fn process_child() {
    FORKER.with(|f| f.set(true));
    let plan = std::env::var(PLAN).expect("run by a process test");
    let mut words = plan.split(':');
    let result = match words.next() {
        Some("point") => fork_at_point(),
        Some("startup") => fork_at_startup(words.next().expect("a read pattern")),
        Some("warm") => fork_while_steering(count(words.next())),
        Some("stop") => stop::stopped(),
        Some("fresh") => first_100_ms(),
        Some("idle") => idle::idle_between_bursts(),
        #[cfg(target_os = "linux")]
        Some("caller") => callers::caller(words.next().expect("a reader kind")),
        Some("standing") => standing::real_time_read_behind_a_preempted_windup(),
        Some("signal") => signals::reads_in_a_handler_at_the_point(words.next()),
        #[cfg(target_arch = "x86_64")]
        Some("sandbox") => sandboxed(),
        _ => Err(format!("unknown plan {plan}")),
    };
    report(result);
}

/// A process half's last word, which [`assert_half_passes`] reads.
pub(super) fn report(result: Result<(), String>) {
    match result {
        Ok(()) => println!("CHILD OK"),
        Err(why) => panic!("CHILD FAILED: {why}"),
    }
}

fn count(word: Option<&str>) -> u64 {
    word.and_then(|w| w.parse().ok()).expect("a count")
}

/// Reads on a thread of its own (readers wind up and steer) until that
/// reader pauses at the point; forks there, checks.
fn fork_at_point() -> Result<(), String> {
    now();
    std::thread::spawn(|| {
        while !FORKED.load(Ordering::Acquire) {
            now();
        }
    });
    let limit = Instant::now() + Duration::from_secs(5);
    while !PAUSED.load(Ordering::Acquire) {
        if Instant::now() > limit {
            return Err("the point was not reached".to_string());
        }
        std::thread::yield_now();
    }
    FORKING.store(true, Ordering::Release);
    let pid = fork_and_check();
    FORKED.store(true, Ordering::Release);
    verdict(pid)
}

/// A fork from another thread at a random moment in the first 3 ms after
/// the first read, with reads as `pattern` says: `one` read, `two` reads
/// 60 µs apart, or `continuous` reads.
fn fork_at_startup(pattern: &str) -> Result<(), String> {
    let delay = Lcg::seeded().below(3_000_000);
    static FIRST_READ: AtomicBool = AtomicBool::new(false);
    static DONE: AtomicBool = AtomicBool::new(false);
    let forker = std::thread::spawn(move || {
        FORKER.with(|f| f.set(true));
        while !FIRST_READ.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let start = kernel_now();
        while kernel_now() - start < delay {
            std::hint::spin_loop();
        }
        let pid = fork_and_check();
        DONE.store(true, Ordering::Release);
        verdict(pid)
    });
    let first = kernel_now();
    now();
    FIRST_READ.store(true, Ordering::Release);
    match pattern {
        "one" => {}
        "two" => {
            while kernel_now() - first < 60_000 {
                std::hint::spin_loop();
            }
            now();
        }
        "continuous" => {
            while !DONE.load(Ordering::Acquire) {
                now();
            }
        }
        _ => return Err(format!("unknown read pattern {pattern}")),
    }
    println!("forked {delay} ns after the first read");
    forker.join().expect("the forker")
}

/// `forks` forks at random moments of a warm clock (a reader keeps it
/// winding up and steering), each checked.
fn fork_while_steering(forks: u64) -> Result<(), String> {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                now();
            }
        })
    };
    let mut random = Lcg::seeded();
    std::thread::sleep(Duration::from_millis(50));
    let mut result = Ok(());
    for _ in 0..forks {
        std::thread::sleep(Duration::from_micros(random.below(15_000)));
        result = verdict(fork_and_check());
        if result.is_err() {
            break;
        }
    }
    stop.store(true, Ordering::Release);
    reader.join().expect("the reader");
    result
}

/// Sets `handler` for `signal`, to run with no other signal blocked, and on
/// the thread's alternate stack where it has one (see
/// `signals::alternate_stack`).
pub(super) fn on_signal(
    signal: libc::c_int,
    handler: extern "C" fn(libc::c_int),
) -> Result<(), String> {
    // SAFETY: a zeroed sigaction with a handler of the right type and an
    // empty mask is valid; each handler given here touches only clocks and
    // atomics.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Every read of a fresh process's first 100 ms, checked: the startup on
/// the kernel's clock, the move to the counter, the first steerings on a
/// frequency measured over microseconds.
fn first_100_ms() -> Result<(), String> {
    let mut checker = Checker::new();
    let start = kernel_now();
    let mut reads = 0u64;
    while kernel_now() - start < 100_000_000 {
        checker.read()?;
        reads += 1;
    }
    println!("{reads} reads within the bound");
    Ok(())
}

/// Runs the child half with `plan` (and `env`), with its output piped.
pub(super) fn child_half(half: &str, plan: &str, env: &[(&str, &str)]) -> Command {
    let mut command = this_binary();
    command
        .args([
            "--exact",
            half,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PLAN, plan)
        .env_remove(PAUSE_AT)
        .env_remove(SIGNAL_AT)
        .env_remove("TIMEHANDS_COUNTER")
        // A keeper that runs on this machine is not the one a test means:
        // a test that means one names its page.
        .env("TIMEHANDS_PAGE", "/nonexistent/timehands/page");
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// Runs the child half and asserts it (and so its forked child) passed.
fn assert_child_passes(plan: &str, env: &[(&str, &str)]) {
    assert_half_passes(PROCESS_CHILD, plan, env);
}

/// Runs the ignored test `half` (its full path) alone in a process of its
/// own, and asserts that it [`report`]ed a pass; returns what it printed.
pub(super) fn assert_half_passes(half: &str, plan: &str, env: &[(&str, &str)]) -> String {
    let output = child_half(half, plan, env)
        .output()
        .expect("the child half runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("CHILD OK"),
        "{plan} {env:?}: {}\n{stdout}\n{stderr}",
        output.status
    );
    println!("{plan} {env:?}:\n{stdout}");
    stdout.into_owned()
}

/// How many trials a randomized test makes: `default`, or the number in
/// `TIMEHANDS_TEST_TRIALS` (for a long run by hand).
fn trials(default: u64) -> u64 {
    std::env::var("TIMEHANDS_TEST_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A signal whose handler reads every clock, raised at each step of the
/// clock's life by the thread that takes it, in a fresh process each
/// (`signals.rs`): every handler returns, and every read is right.
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn a_signal_handler_reads_every_clock_at_each_step_of_the_clocks_life() {
    for point in signals::POINTS {
        assert_child_passes("signal", &[(SIGNAL_AT, point)]);
    }
}

/// The clock's start, made by one thread's first read, interrupted where
/// it asks the NTP state by a handler whose bounds' step publishes at once
/// (chronyd named by no address: the first step takes the kernel's
/// state). The step adds no bound of a clock not yet started, and the
/// handler returns: it used to wait for the start it interrupted, for
/// ever (a CI run's child hung so, its start slowed by load until a second
/// thread's step was due).
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn a_handler_over_the_clocks_start_steps_the_bounds_without_waiting_for_it() {
    assert_child_passes(
        "signal:first-read-alone",
        &[
            (SIGNAL_AT, "kernel: asking the NTP state"),
            ("TIMEHANDS_CHRONYD", "none"),
        ],
    );
}

/// A fork while the clock's own thread stands at each step of its life:
/// the choice made, a timekeeper retired with no successor yet, the
/// successor built with the readers not yet moved, a steering halfway, a
/// windup not yet steered. Each child reads correct time, is steered
/// again, and its `info` returns.
#[test]
#[cfg_attr(miri, ignore = "forks")]
fn a_fork_at_each_step_of_the_clocks_life_leaves_a_working_clock() {
    if let Some(why) = no_fork() {
        println!("skipped: cannot fork here ({why})");
        return;
    }
    for point in POINTS {
        assert_child_passes("point", &[(PAUSE_AT, point)]);
    }
}

/// A read on a SCHED_FIFO thread that stands behind a windup that a normal
/// thread began on the same CPU, and was taken off it: the read gives the
/// true time at once (see `process_tests/standing.rs`).
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn a_real_time_read_behind_a_preempted_windup_gives_the_true_time() {
    assert_half_passes(PROCESS_CHILD, "standing", &[]);
}

/// Forks at random moments of the first 3 ms, after one read, two reads
/// 60 µs apart, and during continuous reads: the startup choice and the
/// hand-over happen there.
#[test]
#[cfg_attr(miri, ignore = "forks")]
fn forks_in_the_first_milliseconds_leave_working_clocks() {
    if let Some(why) = no_fork() {
        println!("skipped: cannot fork here ({why})");
        return;
    }
    for pattern in ["one", "two", "continuous"] {
        for _ in 0..trials(4) {
            assert_child_passes(&format!("startup:{pattern}"), &[]);
        }
    }
}

/// Forks at random moments of a warm clock's windups and steerings.
#[test]
#[cfg_attr(miri, ignore = "forks")]
fn forks_while_the_clock_steers_leave_working_clocks() {
    if let Some(why) = no_fork() {
        println!("skipped: cannot fork here ({why})");
        return;
    }
    assert_child_passes(&format!("warm:{}", trials(20)), &[]);
}

/// In fresh processes, no read of the first 100 ms is further from
/// CLOCK_MONOTONIC (read before and after it) than `getres` said just
/// before it.
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn the_bound_holds_from_the_first_read() {
    for _ in 0..trials(4) {
        assert_child_passes("fresh", &[]);
    }
}

/// The fork handlers are registered before `main` where the loader can
/// (ELF, Mach-O): a fork while another thread starts the clock finds them.
#[test]
#[cfg_attr(miri, ignore = "runs no program before main")]
fn the_fork_handlers_are_registered_before_main() {
    assert_eq!(
        super::process::registered_before_main(),
        crate::os::posix::FORK_HANDLERS_BEFORE_MAIN
    );
}

/// In a sandbox that refuses threads and `adjtimex`: the clock keeps time
/// (every read checked), asks for no thread, asks for the NTP state once,
/// and says so in `info`; the
/// coarse clocks still move, never ahead of `now`; TAI is Realtime.
#[cfg(target_arch = "x86_64")]
fn sandboxed() -> Result<(), String> {
    use crate::{gettime, now_coarse};
    if let Err(e) = crate::os::refuse_threads_and_ntp() {
        println!("skipped: no sandbox to run in ({e})");
        return Ok(());
    }
    if std::thread::Builder::new().spawn(|| ()).is_ok() {
        return Err("the filter let a thread start".to_string());
    }
    let mut checker = Checker::new();
    let start = checker.read()?;
    let mut coarse = now_coarse();
    while checker.read()? - start < 30_000_000 {
        let next = now_coarse();
        if next < coarse || next > now() {
            return Err(format!("coarse {next:?} after {coarse:?}"));
        }
        coarse = next;
        let tai = gettime(ClockId::Tai);
        let realtime = gettime(ClockId::Realtime);
        if tai > realtime {
            return Err(format!(
                "TAI {tai:?} ahead of Realtime {realtime:?} read after it"
            ));
        }
    }
    if coarse.as_nanos() <= start {
        return Err("the coarse clock stood".to_string());
    }
    let refused = info().refused;
    println!("refused: {refused:?}");
    print_costs();
    // The clock asks for no thread: the sandbox refused it none.
    let asked = |what: &str| refused.iter().filter(|r| r.starts_with(what)).count();
    if asked("the NTP state") != 1 || refused.len() != 1 {
        return Err(format!(
            "the NTP state's refusal kept once, and no other: {refused:?}"
        ));
    }
    Ok(())
}

/// What the reads cost in the sandbox, for a run with `--nocapture`
/// (printed, not asserted: tests assert behaviour, not speed).
#[cfg(target_arch = "x86_64")]
fn print_costs() {
    use crate::{gettime, now_coarse};
    let cost = |read: &dyn Fn() -> u64| {
        let calls = 1_000_000;
        let start = Instant::now();
        let mut sink = 0;
        for _ in 0..calls {
            sink ^= std::hint::black_box(read());
        }
        std::hint::black_box(sink);
        start.elapsed().as_nanos() as f64 / calls as f64
    };
    let kernel_coarse = crate::os::KernelClock::MonotonicCoarse;
    println!(
        "ns per call: {} {:.1}, now_coarse {:.1}, now {:.1}, gettime(Tai) {:.1}, gettime(Realtime) {:.1}",
        kernel_coarse.name(),
        cost(&|| crate::os::kernel_nanos(kernel_coarse).unwrap_or(0)),
        cost(&|| now_coarse().as_nanos()),
        cost(&|| now().as_nanos()),
        cost(&|| gettime(ClockId::Tai).as_nanos() as u64),
        cost(&|| gettime(ClockId::Realtime).as_nanos() as u64),
    );
}

/// Under a seccomp filter that refuses threads and `adjtimex`.
#[test]
#[cfg(target_arch = "x86_64")]
#[cfg_attr(miri, ignore = "installs a seccomp filter")]
fn a_sandbox_that_refuses_threads_and_adjtimex() {
    assert_child_passes("sandbox", &[]);
}
