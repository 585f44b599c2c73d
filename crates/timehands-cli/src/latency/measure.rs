//! One measuring thread: cyclictest's loop.
//!
//! The thread takes its CPU, its scheduling policy and priority (and, when
//! asked, the smallest timer slack), then sleeps to deadlines one interval
//! apart and records, after each wakeup, how late it runs. How it waits is a
//! [`Waiter`]: `clock_nanosleep` with TIMER_ABSTIME ([`Nanosleep`]), as
//! cyclictest waits by default; a relative sleep ([`RelativeSleep`], `-r` and
//! `-s`); a POSIX interval timer ([`PosixTimer`], `-x`); or a hard timer of
//! the timer service ([`ServiceTimer`], `--service`), so that all are measured
//! by the same loop and printed the same way.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use timehands::Instant;
use timehands_timer::TimerService;

use super::clock::{self, Clock, NANOS_PER_SEC};
use super::deadline::Deadline;
use super::realtime::{self, Policy};
use super::stats::{Summary, ThreadStats, Unit};

/// How a measuring thread waits for its next deadline.
pub trait Waiter {
    /// Returns at or after `deadline` (on the plan's clock), or early with
    /// [`io::ErrorKind::Interrupted`] when a signal arrives.
    fn wait_until(&mut self, deadline: Instant) -> io::Result<()>;

    /// Whether the waiter sleeps one interval from the moment it is called
    /// rather than to the deadline: the loop then sets the deadline to now
    /// plus the interval before each wait.
    fn relative(&self) -> bool {
        false
    }
}

/// `clock_nanosleep(clock, TIMER_ABSTIME)`, cyclictest's default.
pub struct Nanosleep(pub Clock);

impl Waiter for Nanosleep {
    fn wait_until(&mut self, deadline: Instant) -> io::Result<()> {
        self.0.sleep_until(deadline)
    }
}

/// A sleep of one interval from now: `clock_nanosleep` without
/// TIMER_ABSTIME (cyclictest's `-r`), or the plain `nanosleep` system call
/// (`-s`).
pub struct RelativeSleep {
    /// The clock to sleep on (`nanosleep` sleeps on CLOCK_MONOTONIC).
    pub clock: Clock,
    /// The interval, ns.
    pub interval_ns: u64,
    /// `nanosleep(2)` rather than `clock_nanosleep(2)`.
    pub system_call: bool,
}

impl Waiter for RelativeSleep {
    fn wait_until(&mut self, _: Instant) -> io::Result<()> {
        if !self.system_call {
            return self.clock.sleep_for(self.interval_ns);
        }
        let ts = clock::timespec(self.interval_ns);
        // SAFETY: `ts` is a valid timespec; the remainder pointer may be null.
        match unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    fn relative(&self) -> bool {
        true
    }
}

/// A POSIX interval timer (`timer_create`, cyclictest's `-x`): armed once at
/// the first deadline with the interval as its period, it sends the thread a
/// signal at each expiry, which the thread waits for with `sigwait`. The
/// signal is blocked in every thread (see [`block_timer_signal`]), so that it
/// only ever ends a `sigwait`.
pub struct PosixTimer {
    clock: Clock,
    interval_ns: u64,
    timer: Option<libc::timer_t>,
}

/// The signal of [`PosixTimer`]'s expiries, cyclictest's.
const TIMER_SIGNAL: libc::c_int = libc::SIGALRM;

/// Blocks [`TIMER_SIGNAL`] in the calling thread and the threads it starts
/// from now on.
pub fn block_timer_signal() {
    // SAFETY: an all-zero sigset_t is a valid set for sigemptyset to clear;
    // pthread_sigmask takes valid set pointers (the old set may be null).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, TIMER_SIGNAL);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

impl PosixTimer {
    /// A timer on `clock` with a period of `interval_ns`, armed at the first
    /// wait.
    pub fn new(clock: Clock, interval_ns: u64) -> PosixTimer {
        PosixTimer {
            clock,
            interval_ns,
            timer: None,
        }
    }

    /// Creates the timer, aimed at the calling thread, first firing at
    /// `first`.
    fn arm(&self, first: Instant) -> io::Result<libc::timer_t> {
        // SAFETY: an all-zero sigevent is valid; the fields set below are the
        // ones SIGEV_THREAD_ID reads.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = TIMER_SIGNAL;
        // SAFETY: gettid takes no arguments and cannot fail.
        event.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: `event` and `timer` are valid for the call.
        if unsafe { libc::timer_create(self.clock.id(), &mut event, &mut timer) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let spec = libc::itimerspec {
            it_interval: clock::timespec(self.interval_ns),
            it_value: clock::timespec(first.as_nanos()),
        };
        // SAFETY: `timer` was just created; `spec` is valid; the old value may
        // be null.
        if unsafe { libc::timer_settime(timer, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut()) }
            != 0
        {
            let err = io::Error::last_os_error();
            // SAFETY: `timer` is a live timer of this process.
            unsafe { libc::timer_delete(timer) };
            return Err(err);
        }
        Ok(timer)
    }
}

impl Waiter for PosixTimer {
    fn wait_until(&mut self, deadline: Instant) -> io::Result<()> {
        if self.timer.is_none() {
            self.timer = Some(self.arm(deadline)?);
        }
        // SAFETY: an all-zero sigset_t is valid for sigemptyset; sigwait
        // writes the signal number into `signal`.
        let ret = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, TIMER_SIGNAL);
            let mut signal = 0;
            libc::sigwait(&set, &mut signal)
        };
        match ret {
            0 => Ok(()),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

impl Drop for PosixTimer {
    fn drop(&mut self) {
        if let Some(timer) = self.timer {
            // SAFETY: `timer` is a live timer of this process, deleted once.
            unsafe { libc::timer_delete(timer) };
        }
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
    /// The CPU it is pinned to.
    pub cpu: usize,
    /// Its real-time priority; 0 leaves it SCHED_OTHER.
    pub priority: u8,
    /// Its real-time policy (used with a priority above 0).
    pub policy: Policy,
    /// The clock it sleeps on and measures with.
    pub clock: Clock,
    /// Set the thread's timer slack to the least, 1 ns (`--least-slack`);
    /// otherwise it is left as the thread has it.
    pub least_slack: bool,
    /// Count the SMIs (System Management Interrupts) of its CPU (`--smi`).
    pub smi: bool,
}

/// When every thread stops, besides an interrupt, and in what unit it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wakeups per thread; 0 for no limit.
    pub loops: u64,
    /// Time per thread from its start.
    pub duration: Option<Duration>,
    /// cyclictest's histogram bound in units, if one is kept.
    pub bound: Option<usize>,
    /// The unit of the figures.
    pub unit: Unit,
}

/// One latency as `-v` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The thread's number.
    pub thread: usize,
    /// The wakeup's number, from 0.
    pub cycle: u64,
    /// Its latency, in the run's unit.
    pub value: u64,
    /// SMIs counted during the period (`--smi`).
    pub smis: u64,
}

/// A latency above `-b`'s threshold: which thread saw it first, and how large
/// it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Break {
    /// The thread's kernel id.
    pub tid: i32,
    /// The latency, in the run's unit.
    pub value: u64,
}

/// cyclictest's `-b`: the first latency above `above` stops every thread, is
/// kept, and with `--tracemark` is written to the kernel's trace buffer, which
/// then stops tracing, so that the trace ends on the event.
pub struct BreakTrace {
    /// The threshold, in the run's unit.
    pub above: u64,
    /// The first latency above it.
    pub hit: Mutex<Option<Break>>,
    /// Where `--tracemark` writes.
    pub marker: Option<realtime::TraceMarker>,
}

impl BreakTrace {
    fn check(&self, tid: i32, value: u64, stop: &AtomicBool) {
        if value <= self.above {
            return;
        }
        stop.store(true, Ordering::Relaxed);
        let mut hit = self.hit.lock().unwrap_or_else(PoisonError::into_inner);
        if hit.is_none() {
            *hit = Some(Break { tid, value });
            if let Some(marker) = &self.marker {
                marker.mark_and_stop(&format!("hit latency threshold ({value} > {})", self.above));
            }
        }
    }
}

/// One latency above `--spike`'s trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spike {
    /// The thread's number.
    pub thread: usize,
    /// The latency, in the run's unit.
    pub value: u64,
    /// When the thread woke, µs on its clock.
    pub at_us: u64,
}

/// cyclictest's `--spike`: the latencies above `above`, the first `kept` of
/// them with their time, and how many there were.
pub struct Spikes {
    /// The trigger, in the run's unit.
    pub above: u64,
    /// How many are kept (`--spike-nodes`).
    pub kept: usize,
    /// The kept spikes and the count of all.
    pub seen: Mutex<(Vec<Spike>, u64)>,
}

impl Spikes {
    fn check(&self, spike: Spike) {
        if spike.value <= self.above {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.0.len() < self.kept {
            seen.0.push(spike);
        }
        seen.1 += 1;
    }
}

/// A common start for the threads (cyclictest's `-A` and `--secaligned`):
/// thread 0 reads the clock once all threads are ready, and each starts from
/// there, shifted by `offset_ns` (times its number with `-A`).
pub struct Align {
    /// Every measuring thread waits here.
    pub barrier: Barrier,
    /// The start thread 0 read.
    pub start: Mutex<Option<u64>>,
    /// The offset, ns.
    pub offset_ns: u64,
    /// `--secaligned`: the start is the next full second.
    pub to_second: bool,
}

impl Align {
    fn start(&self, index: usize, clock: Clock) -> Instant {
        self.barrier.wait();
        if index == 0 {
            let now = clock.now().as_nanos();
            let start = if self.to_second {
                // The next second, or the one after when the next is too
                // close to be reached, as cyclictest does.
                let seconds = now / NANOS_PER_SEC
                    + if now % NANOS_PER_SEC > 900_000_000 {
                        2
                    } else {
                        1
                    };
                seconds * NANOS_PER_SEC
            } else {
                now
            };
            *self.start.lock().unwrap_or_else(PoisonError::into_inner) = Some(start);
        }
        self.barrier.wait();
        let start = self
            .start
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(0);
        let shift = if self.to_second { 1 } else { index as u64 };
        Instant::from_nanos(start + self.offset_ns * shift)
    }
}

/// What the threads of a run share besides their plans.
pub struct Shared<'a> {
    /// Raised to stop every thread.
    pub stop: &'a AtomicBool,
    /// `-v`: every latency goes here.
    pub samples: Option<Sender<Sample>>,
    /// `-b`.
    pub break_trace: Option<BreakTrace>,
    /// `--spike`.
    pub spikes: Option<Spikes>,
    /// `-A` and `--secaligned`.
    pub align: Option<Align>,
}

/// The SMI count of a CPU, from its MSR 0x34 (Intel): what cyclictest's
/// `--smi` reads.
pub struct SmiCounter {
    msr: File,
}

/// Intel's MSR_SMI_COUNT.
const MSR_SMI_COUNT: u64 = 0x34;

impl SmiCounter {
    /// Opens the MSR device of `cpu` and reads it once, or says why it
    /// cannot (no msr module, not root, no such MSR).
    pub fn open(cpu: usize) -> anyhow::Result<SmiCounter> {
        let path = format!("/dev/cpu/{cpu}/msr");
        let counter = SmiCounter {
            msr: File::open(&path).with_context(|| {
                format!("--smi: cannot open {path} (load the msr module, run as root)")
            })?,
        };
        counter
            .read()
            .with_context(|| format!("--smi: cannot read the SMI count (MSR 0x34) from {path}"))?;
        Ok(counter)
    }

    /// The count now.
    pub fn read(&self) -> io::Result<u64> {
        let mut value = [0u8; 8];
        self.msr.read_exact_at(&mut value, MSR_SMI_COUNT)?;
        Ok(u64::from_ne_bytes(value) & 0xFFFF_FFFF)
    }
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
    tid: AtomicI32,
    cycles: AtomicU64,
    min: AtomicU64,
    act: AtomicU64,
    avg: AtomicU64,
    max: AtomicU64,
    smis: AtomicU64,
}

impl Progress {
    fn publish(&self, s: Summary) {
        self.cycles.store(s.cycles, Ordering::Relaxed);
        self.min.store(s.min, Ordering::Relaxed);
        self.act.store(s.act, Ordering::Relaxed);
        self.avg.store(s.avg, Ordering::Relaxed);
        self.max.store(s.max, Ordering::Relaxed);
        self.smis.store(s.smis, Ordering::Relaxed);
    }

    /// The thread's kernel id, once it is set up.
    pub fn tid(&self) -> i32 {
        self.tid.load(Ordering::Relaxed)
    }

    /// The figures last published.
    pub fn read(&self) -> Summary {
        Summary {
            cycles: self.cycles.load(Ordering::Relaxed),
            min: self.min.load(Ordering::Relaxed),
            act: self.act.load(Ordering::Relaxed),
            avg: self.avg.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
            smis: self.smis.load(Ordering::Relaxed),
        }
    }
}

/// Sets the calling thread up as `plan` says; with `--smi`, opens the SMI
/// counter of its CPU.
fn set_up(plan: &ThreadPlan) -> anyhow::Result<(Setup, Option<SmiCounter>)> {
    realtime::pin_to(plan.cpu)?;
    if plan.priority > 0 {
        realtime::set_realtime(plan.policy, plan.priority)?;
    }
    if plan.least_slack {
        realtime::set_min_timer_slack();
    }
    let smi = plan.smi.then(|| SmiCounter::open(plan.cpu)).transpose()?;
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    Ok((
        Setup {
            tid,
            timer_slack_ns: realtime::timer_slack(),
        },
        smi,
    ))
}

/// Runs one measuring thread to its limits or until `shared.stop` is raised,
/// and returns what it recorded; `None` when it could not set itself up (the
/// reason went to `ready`).
pub fn run(
    plan: &ThreadPlan,
    limits: Limits,
    waiter: &mut impl Waiter,
    shared: &Shared,
    progress: &Progress,
    ready: &Sender<(usize, anyhow::Result<Setup>)>,
) -> anyhow::Result<Option<ThreadStats>> {
    let (setup, smi) = match set_up(plan) {
        Ok((setup, smi)) => (Ok(setup), smi),
        Err(e) => (Err(e), None),
    };
    let tid = setup.as_ref().map_or(0, |s| s.tid);
    progress.tid.store(tid, Ordering::Relaxed);
    let failed = setup.is_err();
    // The receiver outlives every thread; a send cannot fail.
    let _ = ready.send((plan.index, setup));
    // A thread that failed still meets the others at the start, so that none
    // waits for it forever (the run is stopped then).
    let clock = plan.clock;
    let start = match &shared.align {
        Some(align) => align.start(plan.index, clock),
        None => clock.now(),
    };
    if failed {
        return Ok(None);
    }
    let stop = shared.stop;
    let mut stats = ThreadStats::new(limits.bound, limits.unit);
    let mut smi_before = smi.as_ref().map(SmiCounter::read).transpose()?.unwrap_or(0);
    let end = limits
        .duration
        .map(|d| start.as_nanos().saturating_add(d.as_nanos() as u64));
    let mut deadline = Deadline::first_after(start, plan.interval_us * 1000);
    while !stop.load(Ordering::Relaxed) {
        if waiter.relative() {
            deadline.restart_from(clock.now());
        }
        match waiter.wait_until(deadline.next()) {
            Ok(()) => {}
            // A signal: look at the flag, then sleep on to the same deadline.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow::Error::new(e).context("waiting for a deadline")),
        }
        let woke = clock.now();
        let smis = match &smi {
            Some(counter) => {
                let now = counter.read().context("--smi: reading the SMI count")?;
                let smis = now.wrapping_sub(smi_before) & 0xFFFF_FFFF;
                smi_before = now;
                smis
            }
            None => 0,
        };
        let cycle = stats.summary().cycles;
        stats.record(deadline.lateness(woke));
        stats.add_smis(smis);
        stats.add_missed(deadline.advance_past(woke));
        let value = stats.summary().act;
        if let Some(samples) = &shared.samples {
            // The receiver outlives every thread.
            let _ = samples.send(Sample {
                thread: plan.index,
                cycle,
                value,
                smis,
            });
        }
        if let Some(spikes) = &shared.spikes {
            spikes.check(Spike {
                thread: plan.index,
                value,
                at_us: woke.as_nanos() / 1000,
            });
        }
        if let Some(break_trace) = &shared.break_trace {
            break_trace.check(tid, value, stop);
        }
        progress.publish(stats.summary());
        if stats.summary().cycles == limits.loops {
            // As cyclictest: the first thread to make its loops ends the run.
            stop.store(true, Ordering::Relaxed);
            break;
        }
        if end.is_some_and(|end| woke.as_nanos() >= end) {
            break;
        }
    }
    Ok(Some(stats))
}
