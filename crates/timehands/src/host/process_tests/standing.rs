//! A real-time reader whose read stands at its hands' promise while a
//! normal thread, taken off the CPU, holds the engine's writer lock in the
//! middle of a windup (see [`real_time_read_behind_a_preempted_windup`]).

use std::sync::mpsc;
use std::time::Duration;

use super::{Checker, kernel_now};
use crate::host::process::clock;
use crate::now;
use crate::sys::{self, Policy};

/// How long the normal thread holds the writer lock, from when it took it.
const HELD_NS: u64 = 25_000_000;
/// How long the real-time thread then keeps the CPU before it reads: past
/// the hands' promise (two windup intervals), so that the read stands.
const STAND_NS: u64 = 15_000_000;

/// On one CPU: a normal thread takes the writer lock and works on for
/// [`HELD_NS`], as a windup taken off the CPU would; this thread, at
/// SCHED_FIFO, keeps the CPU until its read stands, then reads. The read
/// must give the true time without the holder: it cannot wait for it (a
/// read in a signal handler would wait for its own thread), and one that
/// only yielded (as a real-time reader once did) never let it run, and
/// returned the time it stood at, milliseconds behind.
/// Skipped, with the reason, where the process may not have SCHED_FIFO.
pub(super) fn real_time_read_behind_a_preempted_windup() -> Result<(), String> {
    let cpu = *sys::allowed_cpus()
        .map_err(|e| format!("no CPU set: {e}"))?
        .first()
        .ok_or("no CPU allowed")?;
    // Before the first read, so that the clock's own thread is pinned too.
    sys::pin_to_cpu(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
    let mut checker = Checker::new();
    checker.read()?;
    let (taken, holding) = mpsc::channel();
    let holder = std::thread::spawn(move || {
        // The clock's own thread may be winding up: the lock is free again
        // within microseconds.
        let limit = kernel_now() + 1_000_000_000;
        let writes = std::iter::repeat_with(|| clock().timekeeper().try_writes())
            .find(|writes| writes.is_some() || kernel_now() > limit)
            .flatten();
        let start = kernel_now();
        let _ = taken.send(writes.is_some());
        while kernel_now() - start < HELD_NS {
            std::hint::spin_loop();
        }
        drop(writes);
    });
    if !holding.recv().map_err(|_| "the holder died")? {
        return Err("the writer lock was held for a second".to_string());
    }
    let start = kernel_now();
    if let Err(refused) = sys::set_scheduling(Policy::Fifo, 10) {
        holder.join().map_err(|_| "the holder panicked")?;
        println!("skipped: no SCHED_FIFO here ({refused})");
        return Ok(());
    }
    while kernel_now() - start < STAND_NS {
        std::hint::spin_loop();
    }
    let standing = clock()
        .standing_reads
        .load(std::sync::atomic::Ordering::Relaxed);
    let read = checker.read();
    let stood = clock()
        .standing_reads
        .load(std::sync::atomic::Ordering::Relaxed)
        > standing;
    holder.join().map_err(|_| "the holder panicked")?;
    read?;
    if !stood {
        return Err("the read did not stand: nothing was tested".to_string());
    }
    // Later reads, with the CPU shared again, are right too.
    std::thread::sleep(Duration::from_millis(1));
    now();
    checker.read()?;
    println!("a real-time read behind a preempted windup gave the true time");
    Ok(())
}
