//! The hard side's unit test: the lock's priority inheritance (the sides'
//! requests are tested in `side`).

use std::sync::{Arc, mpsc};
use std::time::Duration;

use crate::Scheduling;
use crate::expiry::Armed;
use timehands::Clock;

/// The calling thread's priority as the kernel runs it now (field 18 of
/// its stat: -1 - rt_priority for a real-time priority, boosted or not).
fn effective_priority() -> i64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // The command name, in parentheses, may hold spaces: count after it.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[15].parse().unwrap()
}

/// The hard lock is taken only by expiry runs and by the rare calls that
/// look at the whole queue (`Debug`, dropping the service): one of those
/// on a normal thread, preempted while it holds the lock, must not hold
/// the hard thread up for longer than its critical section.
#[test]
fn a_thread_holding_the_hard_lock_runs_at_the_waiting_expiry_threads_priority() {
    const PRIORITY: i32 = 50;
    // The service's hard side, with an expiry thread of the test's own.
    let shared = crate::Builder::new().shared(Clock::new(), false).unwrap();
    let side = &shared.hard;
    let (tx, fired) = mpsc::channel();
    side.arm(Armed {
        deadline: timehands::now().as_nanos(),
        slack: 0,
        period: None,
        callback: Box::new(move |_| {
            let _ = tx.send(());
        }),
    });
    // This (normal-priority) thread holds the lock the expiry thread
    // needs for the due timer (as `Debug` or a drop would).
    let held = side.state.lock();
    let normal = effective_priority();
    let (scheduled, scheduling) = mpsc::channel();
    let expiry = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            let _ = scheduled.send(crate::sched::request_fifo(PRIORITY));
            shared.hard.run();
        })
    };
    match scheduling.recv().unwrap() {
        Scheduling::Fifo { .. } => {}
        Scheduling::Normal { reason } => {
            eprintln!("skipped: the expiry thread may not have SCHED_FIFO ({reason})");
            drop(held);
            side.stop();
            expiry.join().unwrap();
            return;
        }
    }
    // Once the expiry thread blocks on the lock, the kernel lends its
    // priority to the holder (a plain mutex never would: this would
    // time out).
    let until = timehands::now() + Duration::from_secs(60);
    while effective_priority() != -1 - i64::from(PRIORITY) {
        assert!(
            timehands::now() < until,
            "the holder was not boosted: it runs at {}",
            effective_priority()
        );
        std::thread::yield_now();
    }
    drop(held);
    assert_eq!(effective_priority(), normal, "the boost ends with the lock");
    fired.recv_timeout(Duration::from_secs(60)).unwrap();
    side.stop();
    expiry.join().unwrap();
}
