//! The upkeep thread: the one thread the clock starts, at the first windup a
//! reader makes (never before `main`, never at the first read).
//!
//! It moves the clock to the hardware counter (the choice, off the readers'
//! path), checks the TSC across CPUs, and from then on winds up every
//! [`UPKEEP_PERIOD`], half a windup interval: so that a windup falls due
//! only when the thread is late by that much, and readers, who would
//! otherwise wind up (and steer) on their own time, find one due rarely
//! ([`Info::reader_windups`](crate::Info::reader_windups) counts them). Its
//! windups steer, and so run the watchdog, in a program whose readers would
//! never notice a counter that stopped; and they keep the coarse time ready
//! in one word.
//!
//! A sandbox may refuse the thread (a seccomp filter on `clone`): the
//! refusal is kept, reported by [`info`](crate::info()), and never tried
//! again. The clock then works without it: readers wind up, and the coarse
//! clocks, which nothing would keep fresh, read the counter as `now()` does.
//! A `fork()`ed child has no thread: the next windup starts one.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::choice::{CROSS_CPU_CHECK, Verdict};
use super::clock::{HostClock, WINDUP_INTERVAL};

/// [`HostClock::upkeep`]: not started (or forgotten in a forked child).
pub(super) const IDLE: u8 = 0;
/// [`HostClock::upkeep`]: a thread asks the OS for it.
pub(super) const SPAWNING: u8 = 1;
/// [`HostClock::upkeep`]: the thread runs (it says so itself).
pub(super) const RUNNING: u8 = 2;
/// [`HostClock::upkeep`]: the operating system refused the thread.
pub(super) const REFUSED: u8 = 3;

/// How often the upkeep thread winds up: half the windup interval, so that
/// a sleep that overshoots by less than that still winds up before readers
/// find a windup due.
pub(super) const UPKEEP_PERIOD: Duration =
    Duration::from_micros(WINDUP_INTERVAL.as_micros() as u64 / 2);

impl HostClock {
    /// Starts the upkeep thread, once; a refusal is remembered, and the
    /// thread is not asked for again.
    pub(super) fn start_upkeep(&'static self) {
        if self.upkeep.load(Ordering::Relaxed) != IDLE
            || self
                .upkeep
                .compare_exchange(IDLE, SPAWNING, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("timehands-upkeep".to_string())
            .spawn(move || self.upkeep());
        if let Err(e) = spawned {
            // No coarse value was published (only a running thread's
            // windups publish), and none will be: coarse reads go the long
            // way, to the counter.
            self.upkeep.store(REFUSED, Ordering::Release);
            self.refused(format!(
                "a thread ({e}): readers wind up, and the coarse clocks read the counter"
            ));
            let steering = self.steering();
            let _ = self.cross_cpu.set(Verdict {
                check: CROSS_CPU_CHECK,
                passed: false,
                detail: format!("not run: no thread for it ({e})"),
            });
            drop(steering);
        }
    }

    /// Whether the upkeep thread runs (and so keeps the coarse time fresh).
    pub(super) fn upkeep_runs(&self) -> bool {
        self.upkeep.load(Ordering::Acquire) == RUNNING
    }

    /// Whether the operating system refused the upkeep thread.
    pub(super) fn upkeep_refused(&self) -> bool {
        self.upkeep.load(Ordering::Acquire) == REFUSED
    }

    /// In a `fork()`ed child: the thread did not come along (nor one being
    /// asked for); the next windup starts one. A refusal stays (the child is
    /// in the same sandbox).
    pub(super) fn forget_upkeep(&self) {
        if self.upkeep.load(Ordering::Relaxed) != REFUSED {
            self.upkeep.store(IDLE, Ordering::Relaxed);
        }
    }

    /// The thread's life: it says it runs (from then on windups publish the
    /// coarse time, which it keeps fresh), then the choice, the cross-CPU
    /// check, and windups.
    fn upkeep(&'static self) {
        let _ =
            self.upkeep
                .compare_exchange(SPAWNING, RUNNING, Ordering::AcqRel, Ordering::Relaxed);
        self.choose_counter();
        self.check_across_cpus();
        loop {
            std::thread::sleep(UPKEEP_PERIOD);
            self.windup();
        }
    }

    /// On the TSC, once: each CPU's TSC against the first CPU's (see
    /// [`CROSS_CPU_HANDOFFS`](super::choice::CROSS_CPU_HANDOFFS)); TSCs that
    /// two CPUs read apart are retired for the kernel's counter. The verdict
    /// is kept under the steering lock, with the failover it calls for.
    fn check_across_cpus(&self) {
        #[cfg(target_arch = "x86_64")]
        if matches!(
            self.timekeeper().counter(),
            super::counter::HostCounter::Tsc(_)
        ) && self.cross_cpu.get().is_none()
        {
            use crate::Counter;
            let (verdict, why) =
                super::choice::cross_cpu_verdict(self.timekeeper().counter().frequency());
            let mut steering = self.steering();
            if let Some(why) = why {
                self.fail_over(&mut steering, why);
            }
            let _ = self.cross_cpu.set(verdict);
        }
    }
}
