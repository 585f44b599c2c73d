//! Callbacks that hold their own timers do not keep the service alive:
//! dropping it drops every callback (counted) and, where its alarms are
//! timerfds (Linux, Android), closes them (counted in /proc/self/fd). Alone
//! in its test binary, so that no other test's service opens or closes a
//! timerfd meanwhile.
// wasm32-wasip1 has no threads, so no service to drop.
#![cfg(not(target_os = "wasi"))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use timehands_timer::{Timer, TimerService};

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The process's open timerfds on CLOCK_MONOTONIC, the service's alarms;
/// `None` where the alarms are no descriptors (see the crate's `alarm`
/// module). (The clock's own notice of a step of Realtime is a timerfd on
/// CLOCK_REALTIME, which its thread keeps for the process's life.)
#[cfg(any(target_os = "linux", target_os = "android"))]
fn timerfds() -> Option<usize> {
    let monotonic = format!("clockid: {}", libc::CLOCK_MONOTONIC);
    let fds = std::fs::read_dir("/proc/self/fd").unwrap();
    let timerfds = fds.filter_map(|entry| {
        let entry = entry.ok()?;
        let target = std::fs::read_link(entry.path()).ok()?;
        target
            .to_string_lossy()
            .contains("timerfd")
            .then_some(entry.file_name())
    });
    let on_monotonic = |fd: &std::ffi::OsString| {
        let info = std::path::Path::new("/proc/self/fdinfo").join(fd);
        std::fs::read_to_string(info).is_ok_and(|info| info.lines().any(|line| line == monotonic))
    };
    Some(timerfds.filter(on_monotonic).count())
}

/// Elsewhere the alarms are no descriptors.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn timerfds() -> Option<usize> {
    None
}

#[test]
fn callbacks_that_hold_their_own_timers_are_dropped_with_the_service() {
    let before = timerfds();
    let service = TimerService::new().unwrap();
    if let (Some(before), Some(now)) = (before, timerfds()) {
        assert!(now > before, "the service's alarms are timerfds");
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let later = timehands::now() + Duration::from_secs(3600);
    let soon = timehands::now() + Duration::from_millis(1);
    let mut armed = 0;
    // Periodic timers that have fired (their callbacks lent out and back)
    // and timers not due yet, on both sides: each callback holds its own
    // handle, which holds the service's shared state.
    for first in [soon, later] {
        for hard in [true, false] {
            for periodic in [true, false] {
                let own = Arc::new(OnceLock::<Timer>::new());
                let (held, counted) = (Arc::clone(&own), Counted(Arc::clone(&drops)));
                let callback = move |_| {
                    let _ = (held.get(), &counted);
                };
                let period = Duration::from_millis(1);
                let slack = Duration::ZERO;
                let timer = match (hard, periodic) {
                    (true, true) => service.hard_periodic(first, period, callback).unwrap(),
                    (true, false) => service.hard_at(first, callback),
                    (false, true) => service
                        .soft_periodic(first, period, slack, callback)
                        .unwrap(),
                    (false, false) => service.soft_at(first, slack, callback),
                };
                assert!(own.set(timer).is_ok());
                armed += 1;
            }
        }
    }
    timehands_timer::sleep_until(soon + Duration::from_millis(5));
    drop(service);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        armed,
        "every callback dropped"
    );
    assert_eq!(timerfds(), before, "every timerfd closed");
}
