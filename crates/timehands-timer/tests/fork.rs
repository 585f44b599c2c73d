//! A forked child gets a service of its own: hundreds of forks at random
//! moments while the parent's timers fire and other threads arm and cancel
//! them (so that the parent's locks are held at many forks). Each child arms
//! a hard and a soft timer and waits for both, finds the parent's timer
//! handle naming nothing, reads the statistics and drops the service, then
//! reports by its exit status. The parent asserts: a child that hangs is
//! killed after a generous wait and fails the test, as does one that exits
//! with anything but success or dies of a signal. No timing threshold.
// fork is POSIX: Windows and WASI have none.
#![cfg(unix)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use timehands_timer::{Builder, TimerService, sleep_until};

/// How long a child may take before it counts as hung.
const HANG: Duration = Duration::from_secs(30);

/// What a child reports, as its exit status.
const FIRED: i32 = 0;
const HARD_UNFIRED: i32 = 1;
const SOFT_UNFIRED: i32 = 2;
const PANICKED: i32 = 3;
const PARENTS_TIMER_CANCELLED: i32 = 4;

fn soon(micros: u64) -> timehands::Instant {
    timehands::now() + Duration::from_micros(micros)
}

/// Waits until `flag` is set, for at most `HANG`.
fn wait_for(flag: &AtomicBool) -> bool {
    let until = timehands::now() + HANG;
    while !flag.load(Ordering::Acquire) {
        if timehands::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    true
}

/// The child's part: what it exits with.
fn child(service: TimerService, parents: &timehands_timer::Timer) -> i32 {
    let hard = Arc::new(AtomicBool::new(false));
    let soft = Arc::new(AtomicBool::new(false));
    let (h, s) = (Arc::clone(&hard), Arc::clone(&soft));
    service.hard_at(soon(200), move |_| h.store(true, Ordering::Release));
    service.soft_at(soon(200), Duration::ZERO, move |_| {
        s.store(true, Ordering::Release)
    });
    let status = if parents.cancel() {
        PARENTS_TIMER_CANCELLED
    } else if !wait_for(&hard) {
        HARD_UNFIRED
    } else if !wait_for(&soft) {
        SOFT_UNFIRED
    } else {
        FIRED
    };
    let _ = service.statistics();
    drop(service);
    status
}

/// Waits for child `pid` for at most `HANG`; its exit status, or `None`
/// if it had to be killed or died of a signal.
fn reap(pid: libc::pid_t) -> Option<i32> {
    let until = timehands::now() + HANG;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer; `pid` is our child.
        let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(reaped >= 0, "waitpid: {}", std::io::Error::last_os_error());
        if reaped == pid {
            return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
        }
        if timehands::now() > until {
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_child_forked_at_random_moments_gets_a_working_service_and_never_hangs_or_panics() {
    const FORKS: usize = 100;
    // Parent's load: a fast periodic hard timer, soft timers on two
    // workers, and two threads moving a periodic timer of each kind in a
    // loop (each move takes the side's lock and may move its alarm). The
    // clock starts with the service: the first forks land in its choice of
    // counter and its hand-over.
    let service = Builder::new().build().unwrap();
    let parents = service
        .hard_periodic(soon(0), Duration::from_micros(50), |_| {})
        .unwrap();
    for id in 0..1000u64 {
        service
            .soft_periodic(
                soon(id),
                Duration::from_micros(500 + id),
                Duration::ZERO,
                |_| {},
            )
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let movers: Vec<_> = (0..2)
        .map(|_| {
            let period = Duration::from_micros(300);
            let hard = service.hard_periodic(soon(0), period, |_| {}).unwrap();
            let soft = service
                .soft_periodic(soon(0), period, Duration::ZERO, |_| {})
                .unwrap();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut micros = 0;
                while !stop.load(Ordering::Relaxed) {
                    micros = (micros + 37) % 300;
                    assert!(hard.reschedule(soon(micros)));
                    assert!(soft.reschedule(soon(micros)));
                }
            })
        })
        .collect();
    let mut seed = 7u64;
    let mut outcomes = Vec::with_capacity(FORKS);
    for _ in 0..FORKS {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        sleep_until(soon((seed >> 33) % 500));
        // SAFETY: the child only runs the calls under test and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            // The child has a copy of the parent's memory: the service
            // there is its own to use and drop.
            let status =
                catch_unwind(AssertUnwindSafe(|| child(service, &parents))).unwrap_or(PANICKED);
            // SAFETY: ends the child without running the parent's
            // destructors or the test harness.
            unsafe { libc::_exit(status) };
        }
        outcomes.push(reap(pid));
    }
    stop.store(true, Ordering::Relaxed);
    for mover in movers {
        mover.join().unwrap();
    }
    let failed: Vec<_> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, outcome)| **outcome != Some(FIRED))
        .collect();
    assert!(
        failed.is_empty(),
        "of {FORKS} children, these did not report both timers fired \
         (None: hung and killed, or killed by a signal; {HARD_UNFIRED}: hard \
         timer unfired; {SOFT_UNFIRED}: soft; {PANICKED}: panicked; \
         {PARENTS_TIMER_CANCELLED}: the parent's timer cancelled): {failed:?}"
    );
}
