//! One measuring thread: cyclictest's loop.
//!
//! The thread takes its CPU, its priority and the smallest timer slack, then
//! sleeps to absolute deadlines one interval apart and records, after each
//! wakeup, how late it runs. How it waits is a [`Waiter`]: `clock_nanosleep`
//! with TIMER_ABSTIME ([`Nanosleep`]), as cyclictest waits, or a hard timer of
//! the timer service ([`ServiceTimer`], `--service`), so that both are
//! measured by the same loop and printed the same way.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use timehands::Instant;
use timehands_timer::TimerService;

use super::clock;
use super::deadline::Deadline;
use super::realtime;
use super::stats::{Summary, ThreadStats};

/// How a measuring thread waits for its next deadline.
pub trait Waiter {
    /// Returns at or after `deadline` (CLOCK_MONOTONIC), or early with
    /// [`io::ErrorKind::Interrupted`] when a signal arrives.
    fn wait_until(&mut self, deadline: Instant) -> io::Result<()>;
}

/// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, cyclictest's default.
pub struct Nanosleep;

impl Waiter for Nanosleep {
    fn wait_until(&mut self, deadline: Instant) -> io::Result<()> {
        clock::sleep_until(deadline)
    }
}

/// A hard timer of the timehands timer service: the service's expiry thread
/// runs the timer's callback at the deadline, and the callback wakes the
/// measuring thread. What is measured is that whole path: the service's
/// wakeup and expiry, and the hand-off to the waiting thread (a futex wake),
/// which is what a program waiting on a hard timer sees.
pub struct ServiceTimer<'a> {
    service: &'a TimerService,
    fired: Arc<AtomicBool>,
}

impl<'a> ServiceTimer<'a> {
    /// A waiter on `service`'s hard timers.
    pub fn new(service: &'a TimerService) -> ServiceTimer<'a> {
        ServiceTimer {
            service,
            fired: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl Waiter for ServiceTimer<'_> {
    fn wait_until(&mut self, deadline: Instant) -> io::Result<()> {
        self.fired.store(false, Ordering::Relaxed);
        let (fired, waiter) = (self.fired.clone(), std::thread::current());
        self.service.hard_at(deadline, move |_| {
            fired.store(true, Ordering::Release);
            waiter.unpark();
        });
        // A park may return early (spuriously, or for an old unpark): the
        // flag says whether this deadline's timer has fired.
        while !self.fired.load(Ordering::Acquire) {
            std::thread::park();
        }
        Ok(())
    }
}

/// What one thread is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPlan {
    /// The thread's number, from 0.
    pub index: usize,
    /// Its period in µs.
    pub interval_us: u64,
    /// The CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    /// Its SCHED_FIFO priority; 0 leaves it SCHED_OTHER.
    pub priority: u8,
}

/// When every thread stops, besides an interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wakeups per thread; 0 for no limit.
    pub loops: u64,
    /// Time per thread from its start.
    pub duration: Option<Duration>,
    /// cyclictest's histogram bound in µs, if one is kept.
    pub bound_us: Option<usize>,
}

/// What a thread reports once it has set itself up, before it measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// Its kernel thread id, as cyclictest prints it.
    pub tid: i32,
    /// The timer slack it runs with, in ns.
    pub timer_slack_ns: u64,
}

/// The line figures of a running thread, for the live display. Relaxed
/// atomics: a display that is one wakeup behind is fine.
#[derive(Debug, Default)]
pub struct Progress {
    cycles: AtomicU64,
    min_us: AtomicU64,
    act_us: AtomicU64,
    avg_us: AtomicU64,
    max_us: AtomicU64,
}

impl Progress {
    fn publish(&self, s: Summary) {
        self.cycles.store(s.cycles, Ordering::Relaxed);
        self.min_us.store(s.min_us, Ordering::Relaxed);
        self.act_us.store(s.act_us, Ordering::Relaxed);
        self.avg_us.store(s.avg_us, Ordering::Relaxed);
        self.max_us.store(s.max_us, Ordering::Relaxed);
    }

    /// The figures last published.
    pub fn read(&self) -> Summary {
        Summary {
            cycles: self.cycles.load(Ordering::Relaxed),
            min_us: self.min_us.load(Ordering::Relaxed),
            act_us: self.act_us.load(Ordering::Relaxed),
            avg_us: self.avg_us.load(Ordering::Relaxed),
            max_us: self.max_us.load(Ordering::Relaxed),
        }
    }
}

/// Sets the calling thread up as `plan` says.
fn set_up(plan: &ThreadPlan) -> anyhow::Result<Setup> {
    if let Some(cpu) = plan.cpu {
        realtime::pin_to(cpu)?;
    }
    if plan.priority > 0 {
        realtime::set_fifo(plan.priority)?;
    }
    let timer_slack_ns = realtime::set_min_timer_slack();
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    Ok(Setup {
        tid,
        timer_slack_ns,
    })
}

/// Runs one measuring thread to its limits or until `stop` is raised, and
/// returns what it recorded; `None` when it could not set itself up (the
/// reason went to `ready`).
pub fn run(
    plan: &ThreadPlan,
    limits: Limits,
    waiter: &mut impl Waiter,
    stop: &AtomicBool,
    progress: &Progress,
    ready: &Sender<(usize, anyhow::Result<Setup>)>,
) -> anyhow::Result<Option<ThreadStats>> {
    let setup = set_up(plan);
    let failed = setup.is_err();
    // The receiver outlives every thread; a send cannot fail.
    let _ = ready.send((plan.index, setup));
    if failed {
        return Ok(None);
    }
    let mut stats = ThreadStats::new(limits.bound_us);
    let start = clock::now();
    let end = limits
        .duration
        .map(|d| start.as_nanos().saturating_add(d.as_nanos() as u64));
    let mut deadline = Deadline::first_after(start, plan.interval_us * 1000);
    while !stop.load(Ordering::Relaxed) {
        match waiter.wait_until(deadline.next()) {
            Ok(()) => {}
            // A signal: look at the flag, then sleep on to the same deadline.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow::Error::new(e).context("waiting for a deadline")),
        }
        let woke = clock::now();
        stats.record(deadline.lateness(woke));
        stats.add_missed(deadline.advance_past(woke));
        progress.publish(stats.summary());
        let cycles = stats.summary().cycles;
        if cycles == limits.loops || end.is_some_and(|end| woke.as_nanos() >= end) {
            break;
        }
    }
    Ok(Some(stats))
}
