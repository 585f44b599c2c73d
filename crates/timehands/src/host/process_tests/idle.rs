//! A program that reads in bursts between idle spells, as users meet it:
//! nothing of the clock runs while nothing is read (it has no thread), and
//! the first read after a spell reads true time, with forks and a stop
//! during a spell (see [`idle_between_bursts`]).

use std::time::Duration;

use super::stop::stop_child_half;
use super::{Checker, fork_and_check, kernel_now, no_fork, verdict};
use crate::now;

/// Reads, checked (precise and coarse), for `ms` milliseconds.
fn burst(checker: &mut Checker, ms: u64) -> Result<(), String> {
    let start = kernel_now();
    let mut coarse = crate::now_coarse();
    while kernel_now() - start < ms * 1_000_000 {
        let ours = checker.read()?;
        let next = crate::now_coarse();
        if next < coarse || next.as_nanos() > now().as_nanos() {
            return Err(format!("coarse {next:?} after {coarse:?}, precise {ours}"));
        }
        coarse = next;
    }
    Ok(())
}

/// The threads of this process, where the OS lists them (`/proc`).
fn threads() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/task").ok()?.count())
}

/// A program that reads in bursts between idle spells, as users meet it:
/// every read checked, the first after each idle spell too (10 ms, 1 s,
/// 2 s); the process has no thread more after reading than before; eight
/// threads that read at once after a spell all
/// read true time; a fork during a spell, and one while a read ends it,
/// leave working clocks; and (the test stops the process during the last
/// idle spell, after printing `IDLE`) a stop during a spell resumes within
/// the bound.
pub(super) fn idle_between_bursts() -> Result<(), String> {
    let before = threads();
    let mut checker = Checker::new();
    burst(&mut checker, 30)?;
    for gap_ms in [10, 1_000] {
        std::thread::sleep(Duration::from_millis(gap_ms));
        burst(&mut checker, 5)?;
    }
    std::thread::sleep(Duration::from_millis(1_000));
    if threads() != before {
        return Err(format!(
            "{:?} threads after reading, {before:?} before",
            threads()
        ));
    }
    burst(&mut checker, 5)?;
    // Eight threads read at once after a spell.
    std::thread::sleep(Duration::from_millis(1_500));
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut checker = Checker::new();
                burst(&mut checker, 5)
            })
        })
        .collect();
    for reader in readers {
        reader.join().expect("a reader")?;
    }
    // A fork during a spell, and one while a read ends it.
    std::thread::sleep(Duration::from_millis(1_500));
    verdict(fork_and_check())?;
    std::thread::sleep(Duration::from_millis(1_500));
    let waker = std::thread::spawn(now);
    let forked = verdict(fork_and_check());
    waker.join().expect("the waking read");
    forked?;
    // The test stops the process during this spell.
    burst(&mut checker, 5)?;
    std::thread::sleep(Duration::from_millis(1_000));
    println!("IDLE");
    std::thread::sleep(Duration::from_millis(1_500));
    burst(&mut checker, 20)?;
    Ok(())
}

/// Bursts of reads between idle spells: see [`idle_between_bursts`]. The
/// process is stopped for 300 ms during a spell.
#[test]
#[cfg_attr(miri, ignore = "forks and stops a process")]
fn reads_between_idle_spells_a_park_a_fork_and_a_stop() {
    if let Some(why) = no_fork() {
        println!("skipped: cannot fork here ({why})");
        return;
    }
    stop_child_half("idle", "IDLE", 500, 300);
}
