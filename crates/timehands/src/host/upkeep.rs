//! The upkeep thread: the one thread the clock starts, at the first windup a
//! reader makes or the first coarse read (never before `main`, never at the
//! first precise read), and which runs only while the clock is read.
//!
//! Keeping time costs what the reading needs. Precise reads keep the clock
//! up themselves: a read that finds its hands a windup interval old winds up
//! (and steers every [`STEER_INTERVAL`](super::steer::STEER_INTERVAL), or at
//! once after a change of the kernel's rate), some hundred times a second
//! for a program that reads all the time, at a cost of about a microsecond
//! each; a program that reads now and then
//! winds up now and then. The thread does what no reader can:
//!
//! - it moves the clock to the hardware counter (the choice, off the
//!   readers' path) and checks the TSC across CPUs;
//! - while coarse clocks are read, it winds up every [`COARSE_TICK`] and
//!   keeps the coarse time ready in one word: a coarse read reads no counter,
//!   so it can neither find a windup due nor wind up;
//! - while precise reads come, it looks every [`WATCH`] whether they still
//!   do, and when they stopped it winds up once more before it parks: that
//!   windup's steering asks the watchdog about a counter that stopped, which
//!   no reader can notice (its reads never fall due).
//!
//! Its timed sleeps end early at a step of Realtime where the OS gives
//! notice of one (Linux's timerfd): the thread winds up then, so that
//! Realtime follows a `settimeofday` at once while reads come, rather than
//! at the next windup. Then it parks ([`wake.rs`](super::wake)): no wakeup,
//! no CPU, for as long as nothing is read, however long the process lives
//! (a step then wakes nobody: the first read finds a windup due and follows
//! it). The first read that needs it again wakes it. To see whether coarse
//! reads go on, the thread takes the coarse time away every [`PROBE`] (the
//! next coarse read then goes the long way once, and says so); it stops
//! ticking when a probe finds no coarse read within [`HOLD`].
//!
//! A sandbox may refuse the thread (a seccomp filter on `clone`): the
//! refusal is kept, reported by [`info`](crate::info()), and never tried
//! again. The clock then works without it: readers wind up, and the coarse
//! clocks are the timekeeper's, wound up by a precise read where the
//! kernel's coarse clock says they are stale. A `fork()`ed child has no
//! thread: the next read that needs one starts it.
//!
//! One case escapes: a counter that stops within a windup interval after
//! the thread parks (its reads never fall due, and nothing wakes the
//! thread) is caught only by the next coarse read or a windup that a read
//! past the promise makes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::choice::{CROSS_CPU_CHECK, Verdict};
use super::clock::HostClock;
use super::kernel_clocks::KernelClock;
use super::published::COARSE_TICK;
use super::wake::{Demand, Need};
use super::windup::Winder;

/// How often the thread looks whether precise reads still come (a coarse
/// read wakes it sooner).
pub(super) const WATCH: Duration = Duration::from_millis(250);
/// How often the thread takes the coarse time away to see whether it is
/// still read.
pub(super) const PROBE: Duration = Duration::from_millis(250);
/// How long after the last demand seen the thread keeps at it.
pub(super) const HOLD: Duration = Duration::from_millis(500);
/// The SCHED_FIFO priority the thread keeps the coarse time at: the
/// highest on Linux, so that no thread but one at that priority holds it
/// up (a tick's work is a windup, a microsecond or two every
/// [`COARSE_TICK`]). Where the OS's range stops lower, or the process may
/// not take it, readers check the coarse time themselves.
const KEEPER_PRIORITY: i32 = 99;
/// Wakeups between two readings of the thread's CPU time (a system call).
const WAKEUPS_A_CPU_READING: u64 = 64;

/// What the thread does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Wind up a [`COARSE_TICK`] from now, and keep the coarse time; with
    /// `probe`, take it away first, to see whether it is still read.
    Tick { probe: bool },
    /// Look again a [`WATCH`] from now: precise reads come, and wind up.
    Watch,
    /// Nothing was read for [`HOLD`]: wind up once more, and park.
    Park,
}

/// The thread's plan: when demand of each kind was last seen.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    seen: Demand,
    precise_until: Instant,
    coarse_until: Instant,
    probed: Instant,
}

impl Plan {
    /// A plan at `now`, with the demand so far: the read that started the
    /// thread counts as demand.
    pub(super) fn new(now: Instant, seen: Demand) -> Plan {
        Plan {
            seen,
            precise_until: now + HOLD,
            coarse_until: now,
            probed: now,
        }
    }

    /// What to do next at `now`, with the demand so far.
    pub(super) fn next(&mut self, now: Instant, demand: Demand) -> Next {
        if demand.0 != self.seen.0 {
            self.precise_until = now + HOLD;
        }
        if demand.1 != self.seen.1 {
            self.coarse_until = now + HOLD;
        }
        self.seen = demand;
        if now < self.coarse_until {
            let probe = now.duration_since(self.probed) >= PROBE;
            if probe {
                self.probed = now;
            }
            Next::Tick { probe }
        } else if now < self.precise_until {
            Next::Watch
        } else {
            Next::Park
        }
    }

    /// The demand the plan has seen.
    pub(super) fn seen(&self) -> Demand {
        self.seen
    }
}

/// What the thread knows of its keeping the coarse time.
#[derive(Default)]
struct Keeper {
    /// Whether it runs at [`KEEPER_PRIORITY`].
    real_time: bool,
    /// When it last published the coarse time, while it ticks.
    published: Option<Instant>,
}

impl HostClock {
    /// A read needs the upkeep thread: counts the demand, wakes the thread,
    /// or starts it the first time, where the read can tell it runs outside
    /// a signal handler (starting a thread allocates, and takes the C
    /// library's locks): a read in a handler leaves the start to the next
    /// read outside one. A refusal is remembered, and the thread is not
    /// asked for again.
    pub(super) fn need_upkeep(&'static self, need: Need) {
        if !self.wake.need(need, crate::os::outside_signal_handler) {
            return;
        }
        super::fork_points::point("upkeep: starting the thread");
        let spawned = std::thread::Builder::new()
            .name("timehands-upkeep".to_string())
            .spawn(move || self.upkeep());
        if let Err(e) = spawned {
            self.wake.refused();
            self.coarse_checked.store(true, Ordering::Release);
            self.refused(format!(
                "a thread ({e}): readers wind up, and the coarse clocks are wound up by a precise read where {} says they are stale",
                KernelClock::MonotonicCoarse.name()
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

    /// What a reader does when the clock is due: winds it up (and steers,
    /// when a steering is due), and says that precise reads come, which
    /// starts or wakes the upkeep thread when it is not running (see
    /// `upkeep.rs`). Out of line, so that readers do not carry its frame.
    #[cold]
    #[inline(never)]
    pub(super) fn windup_from_reader(&'static self) {
        self.reader_windups.fetch_add(1, Ordering::Relaxed);
        self.windup_by(Winder::Reader);
        self.need_upkeep(Need::Precise);
    }

    /// The thread's life: it says it runs, then the choice, the cross-CPU
    /// check, and windups while the clock is read.
    fn upkeep(&'static self) {
        self.wake.started(crate::os::RealtimeNotice::new().ok());
        self.choose_counter();
        self.check_across_cpus();
        // The demand that started the thread counts.
        let mut plan = Plan::new(Instant::now(), (0, 0));
        let mut keeper = Keeper::default();
        for wakeup in 0u64.. {
            let cpu = wakeup % WAKEUPS_A_CPU_READING == 0;
            self.wake
                .woke(cpu.then(crate::os::thread_cpu_nanos).and_then(Result::ok));
            match plan.next(Instant::now(), self.wake.demand()) {
                Next::Tick { .. } if !self.keeps_coarse_time(&mut keeper) => {
                    // Readers check the coarse time themselves: nothing
                    // to tick for, and they no longer say they read it.
                    self.stop_ticking(&mut keeper);
                    self.wake.sleep(WATCH);
                }
                Next::Tick { probe } => {
                    // Wound up and published before the sleep: a coarse
                    // read that finds the thread ticking trusts it. Its
                    // windups steer as readers' do (every 10 ms):
                    // precise readers find no windup due while it ticks.
                    self.wake.set_ticking(true);
                    self.windup();
                    self.publish_coarse_time();
                    keeper.published = Some(Instant::now());
                    if probe {
                        self.take_coarse_time_away();
                    }
                    // A step of Realtime ends it, followed at once.
                    if self.wake.sleep(COARSE_TICK) {
                        self.follow_step();
                    }
                }
                Next::Watch => {
                    self.stop_ticking(&mut keeper);
                    // A coarse read wakes it early (see `Wake::need`); a
                    // step of Realtime too, followed at once by a windup
                    // (readers' Realtime is its offset).
                    if self.wake.sleep(WATCH) {
                        self.follow_step();
                    }
                }
                Next::Park => {
                    self.stop_ticking(&mut keeper);
                    self.windup();
                    self.wake.woke(crate::os::thread_cpu_nanos().ok());
                    self.wake.park(plan.seen());
                    plan = Plan::new(Instant::now(), plan.seen());
                }
            }
        }
    }

    /// The thread stops keeping the coarse time: the next coarse read goes
    /// the long way, which winds up.
    fn stop_ticking(&self, keeper: &mut Keeper) {
        keeper.published = None;
        if self.wake.ticking() {
            self.wake.set_ticking(false);
            self.take_coarse_time_away();
        }
    }

    /// Whether this thread keeps the coarse time at its next tick: it does
    /// at the highest real-time priority the process may take (asked for
    /// once, the first time it ticks), as the kernel's timer interrupt
    /// keeps its own coarse clock, on a machine no hypervisor runs (one
    /// stops a vCPU for milliseconds while the others run on: 2.6 to 9.9 ms
    /// on the guests here, and the kernel's coarse clock, which any CPU's
    /// tick moves, goes on), and as long as it was never held up half a
    /// tick. Else readers check the coarse time themselves, for good (see
    /// [`HostClock::coarse_checked`]): a thread that can be held up cannot
    /// keep a bound.
    fn keeps_coarse_time(&self, keeper: &mut Keeper) -> bool {
        if self.coarse_checked() {
            return false;
        }
        if !keeper.real_time {
            keeper.real_time = !crate::hw::under_hypervisor()
                && crate::os::set_scheduling(crate::os::Policy::Fifo, KEEPER_PRIORITY).is_ok();
        }
        // Half a tick late at most: the coarse time then lags under two
        // ticks, as `getres` states.
        let late = keeper
            .published
            .is_some_and(|at| at.elapsed() > COARSE_TICK + COARSE_TICK / 2);
        if keeper.real_time && !late {
            return true;
        }
        self.coarse_checked.store(true, Ordering::Release);
        false
    }

    /// On the TSC, once: each CPU's TSC against the first CPU's (see
    /// [`CROSS_CPU_HANDOFFS`](super::choice::CROSS_CPU_HANDOFFS)); TSCs that
    /// two CPUs read apart are retired for the kernel's counter, and so is
    /// one trusted on its own evidence that the check could not pass (see
    /// [`cross_cpu_failover`](super::choice::cross_cpu_failover)). The verdict
    /// is kept under the steering lock, with the failover it calls for.
    fn check_across_cpus(&'static self) {
        #[cfg(target_arch = "x86_64")]
        if matches!(
            self.timekeeper().counter(),
            super::counter::HostCounter::Tsc(_)
        ) && self.cross_cpu.get().is_none()
        {
            use crate::Counter;
            let (verdict, why) =
                super::choice::cross_cpu_verdict(self.timekeeper().counter().frequency());
            let own_evidence = self.facts().own_evidence;
            let why = super::choice::cross_cpu_failover(&verdict, why, own_evidence);
            let mut steering = self.steering();
            if let Some(why) = why {
                self.fail_over(&mut steering, &why);
            }
            let _ = self.cross_cpu.set(verdict);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan ticks while coarse reads come, probing every PROBE; watches
    /// while precise reads come; and parks HOLD after the last of either.
    #[test]
    fn the_plan_follows_the_demand() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut plan = Plan::new(start, (1, 0));
        assert_eq!(plan.next(at(0), (1, 0)), Next::Watch);
        assert_eq!(plan.next(at(250), (5, 0)), Next::Watch);
        // No precise read since 250 ms: parks at 750.
        assert_eq!(plan.next(at(500), (5, 0)), Next::Watch);
        assert_eq!(plan.next(at(750), (5, 0)), Next::Park);
        // A coarse read: ticks, and probes a PROBE after the last probe.
        let mut plan = Plan::new(at(1000), (5, 0));
        assert_eq!(plan.next(at(1000), (5, 1)), Next::Tick { probe: false });
        assert_eq!(plan.next(at(1100), (5, 1)), Next::Tick { probe: false });
        assert_eq!(plan.next(at(1250), (5, 1)), Next::Tick { probe: true });
        assert_eq!(plan.next(at(1254), (5, 2)), Next::Tick { probe: false });
        // The probe at 1500 finds no coarse read: ticking ends at 1754, and
        // with precise demand gone since 1000, the plan parks.
        assert_eq!(plan.next(at(1500), (5, 2)), Next::Tick { probe: true });
        assert_eq!(plan.next(at(1754), (5, 2)), Next::Park);
    }
}
