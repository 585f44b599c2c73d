//! The process-wide clock: the engine on the best counter this machine has,
//! steered to the kernel's clocks.
//!
//! # Choosing the counter
//!
//! The first read (never anything before `main`) starts the clock on the
//! kernel's CLOCK_MONOTONIC itself: nothing to choose, so the first read costs
//! tens of microseconds, with CLOCK_MONOTONIC's own offset (none) and error
//! bound from the start. The choice costs more than that in a VM, where every
//! CPUID traps to the hypervisor (some microseconds a leaf) and the kernel's
//! clocksource is a file to read; so it is made at the first windup, on the
//! watchdog's thread (below), or by [`info`] if it asks first: on x86_64 the
//! TSC, when CPUID says it is invariant and the kernel itself keeps time with
//! it (its clocksource is `tsc`, which Linux grants only to a TSC it found
//! synchronized across CPUs); on aarch64 the generic timer's CNTVCT_EL0;
//! otherwise, or when `TIMEHANDS_COUNTER=kernel`, the kernel's clock stays, so
//! the clock is correct everywhere and fast where it can be.
//! `TIMEHANDS_COUNTER=tsc` takes the TSC whatever the checks say. [`info`]
//! tells what was chosen and why.
//!
//! The move is a retirement ([`Timekeeper::retire`]) of the timekeeper on the
//! kernel's clock for one on the chosen counter that starts where it stops.
//! The thread waits until that point falls due before it moves the readers,
//! so time neither steps back nor runs ahead of CLOCK_MONOTONIC; the first
//! timekeeper winds up every [`STARTUP_INTERVAL`], so that the point is near.
//!
//! A check of our own follows on the TSC: the same thread measures each CPU's
//! TSC against the first CPU's (`tsc_sync`, as Linux does at boot); TSCs found
//! apart are dropped for the kernel's clock, as the watchdog drops a counter
//! (below), and the verdict joins the others in [`info`].
//!
//! # How a read finds the clock
//!
//! `now()` loads one word ([`READER`]): the address of the timekeeper in use
//! and, in its low bits, how to read its counter (`rdtscp`, `lfence; rdtsc`,
//! or the counter's own read), so that a read tests nothing else before the
//! counter read. Then the engine's first nanosecond segment of the current
//! hands gives the time with one multiply-add (see [`Timekeeper::nanos_at`]).
//! The word is 0 until the clock starts, and changes when a timekeeper takes
//! over from another.
//!
//! # Staying with the kernel
//!
//! The clock has CLOCK_MONOTONIC's origin from its first read, and the steering
//! of `steer.rs` keeps it there: at windups it compares itself with the kernel
//! through tight brackets and slews its phase and trims its rate, never
//! stepping. Realtime and Boottime are Monotonic plus the kernel's own offsets
//! (REALTIME − MONOTONIC, BOOTTIME − MONOTONIC), re-read at each windup, so
//! they follow `settimeofday` and suspend within one windup interval.
//!
//! # When the counter goes wrong
//!
//! Each steering also asks the watchdog (`watchdog.rs`) whether the counter
//! still advances as CLOCK_MONOTONIC_RAW (plus any suspend) says. One that went
//! backwards, stopped or strayed in rate is retired ([`Timekeeper::retire`])
//! for a timekeeper on the kernel's CLOCK_MONOTONIC that starts where the
//! retired one stopped, so time never steps back (but for reads behind the
//! base, which the engine clamps to it: a counter that went back shows as time
//! standing at the last windup, a step back of at most the reads made since);
//! [`info`] reports the fallback and its reason. Readers find windups due
//! after a counter went back too, and a thread started at the first windup
//! (the cross-CPU check's, on the TSC) winds up every
//! [`WATCHDOG_INTERVAL`], so that a counter that stopped, which no reader can
//! notice, is caught as well.
//!
//! A suspend is not a failure: an invariant TSC counts on through s2idle,
//! where CLOCK_MONOTONIC stops, and the watchdog's reference counts the
//! suspend in. The host's timekeepers [follow](crate::Builder::follows_reference)
//! CLOCK_MONOTONIC: no read extrapolates the counter past the current
//! timehands' promise (two windup intervals at most), and the windup the
//! first reader after a resume makes (see [`Timekeeper::windup_following`])
//! resumes the time from CLOCK_MONOTONIC, read after the counter, plus an
//! interval, rather than an hour ahead of it. The steering slews that last
//! interval away. The steering's rate baseline starts again after a suspend,
//! so that the counts of the suspend are not taken for a frequency. A TSC
//! that restarts from 0 (S3 on some machines) reads behind its base: time
//! stands at the last windup until the watchdog fails over.
//!
//! # Who winds up
//!
//! Nobody needs to: a reader that finds the timehands a windup interval old
//! winds up (the others carry on; one wins the writer lock). A reader that
//! finds them past their promise stood there: it winds up (or waits for the
//! thread that does) and reads again. A thread is started
//! only for the coarse clocks, which read no counter and so would never notice:
//! the first coarse read starts it, and it winds up every interval. Each windup
//! leaves the coarse time ready for [`now_coarse`] in one word
//! ([`COARSE_NANOS`]), and the whole seconds of each clock as hints for
//! [`gettime`], which then splits nanoseconds into seconds without a
//! division.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::engine::Due;
use crate::engine::nanos::floor_nanos;
use crate::hw::{self, KernelCounter};
use crate::instant::Instant;
use crate::kernel_clocks::{KernelClock, KernelClocks, SystemClocks};
use crate::steer::{Pair, Steering};
use crate::{BinTime, Counter, Timekeeper};

/// How often the clock winds up (and steers, at most).
pub(crate) const WINDUP_INTERVAL: Duration = Duration::from_millis(1);

/// The counters the host clock can run on.
pub(crate) enum HostCounter {
    /// The x86_64 time-stamp counter.
    #[cfg(target_arch = "x86_64")]
    Tsc(hw::Tsc),
    /// The aarch64 generic timer.
    #[cfg(target_arch = "aarch64")]
    Cntvct(hw::Cntvct),
    /// The kernel's CLOCK_MONOTONIC, read through the vDSO.
    Kernel(KernelCounter),
    /// A test's counter: one that misbehaves, or runs through a suspend.
    #[cfg(test)]
    Test(std::sync::Arc<dyn Counter + Send + Sync>),
}

impl Counter for HostCounter {
    #[inline]
    fn read(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.read(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.read(),
            HostCounter::Kernel(c) => c.read(),
            #[cfg(test)]
            HostCounter::Test(c) => c.read(),
        }
    }
    #[inline]
    fn read_unordered(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.read_unordered(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.read_unordered(),
            HostCounter::Kernel(c) => c.read(),
            #[cfg(test)]
            HostCounter::Test(c) => c.read(),
        }
    }
    #[inline]
    fn order_after_read(&self) {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.order_after_read(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.order_after_read(),
            HostCounter::Kernel(c) => c.order_after_read(),
            #[cfg(test)]
            HostCounter::Test(c) => c.order_after_read(),
        }
    }
    fn frequency(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.frequency(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.frequency(),
            HostCounter::Kernel(c) => c.frequency(),
            #[cfg(test)]
            HostCounter::Test(c) => c.frequency(),
        }
    }
    fn name(&self) -> &str {
        match self {
            #[cfg(target_arch = "x86_64")]
            HostCounter::Tsc(c) => c.name(),
            #[cfg(target_arch = "aarch64")]
            HostCounter::Cntvct(c) => c.name(),
            HostCounter::Kernel(c) => c.name(),
            #[cfg(test)]
            HostCounter::Test(c) => c.name(),
        }
    }
}

/// One check that went into choosing the counter.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Verdict {
    /// What was checked.
    pub check: &'static str,
    /// Whether the counter passed it.
    pub passed: bool,
    /// What was found.
    pub detail: String,
}

/// The counter chosen at startup, with its frequency and the reasons.
struct Choice {
    counter: HostCounter,
    frequency_source: String,
    verdicts: Vec<Verdict>,
    fallback: Option<String>,
    /// A pair of the counter and CLOCK_MONOTONIC from the start of startup,
    /// where one was taken: the steering's first baseline.
    anchor: Option<Pair>,
    /// How sure the frequency is, where it was measured (or is exact).
    uncertainty_ppb: Option<u64>,
}

/// Picks the counter: see the module docs.
fn choose() -> Choice {
    let mut verdicts = Vec::new();
    let forced = match std::env::var("TIMEHANDS_COUNTER") {
        Ok(v) if v == "tsc" || v == "kernel" => Some(v),
        Ok(v) => {
            // A library cannot refuse to tell the time: say so once, and choose
            // as if the variable were not set.
            eprintln!(
                "timehands: TIMEHANDS_COUNTER={v:?} is not a counter (use \"tsc\" or \"kernel\"); choosing automatically"
            );
            verdicts.push(Verdict {
                check: "TIMEHANDS_COUNTER",
                passed: false,
                detail: format!("{v:?} is not \"tsc\" or \"kernel\": ignored"),
            });
            None
        }
        Err(_) => None,
    };
    let kernel = |reason: String, verdicts: Vec<Verdict>| Choice {
        counter: HostCounter::Kernel(KernelCounter::monotonic()),
        frequency_source: KERNEL_FREQUENCY_SOURCE.to_string(),
        verdicts,
        fallback: Some(reason),
        anchor: None,
        // CLOCK_MONOTONIC counts nanoseconds by definition.
        uncertainty_ppb: Some(0),
    };
    if forced.as_deref() == Some("kernel") {
        return kernel("TIMEHANDS_COUNTER=kernel".to_string(), verdicts);
    }
    hardware(forced.is_some(), verdicts)
        .unwrap_or_else(|(reason, verdicts)| kernel(reason, verdicts))
}

/// The TSC, if it may keep time (or `forced`); else why not.
#[cfg(target_arch = "x86_64")]
fn hardware(forced: bool, mut verdicts: Vec<Verdict>) -> Result<Choice, (String, Vec<Verdict>)> {
    // The TSC against the kernel from here to the end of the checks: the
    // frequency measurement, if CPUID states none, and the steering's anchor.
    let anchor = crate::steer::pair(&SystemClocks, crate::steer::read_tsc);
    let facts = hw::TscFacts::read();
    verdicts.push(Verdict {
        check: "invariant TSC (CPUID 0x80000007)",
        passed: facts.invariant,
        detail: format!(
            "{} {}",
            facts.vendor,
            if facts.invariant {
                "says invariant"
            } else {
                "does not say invariant"
            }
        ),
    });
    let source = hw::kernel_clocksource();
    let kernel_uses_tsc = source.as_deref() == Some("tsc");
    verdicts.push(Verdict {
        check: "kernel clocksource",
        passed: kernel_uses_tsc,
        detail: source.unwrap_or_else(|| "unreadable".to_string()),
    });
    let trusted = facts.invariant && kernel_uses_tsc;
    if !(forced || trusted) {
        return Err((
            "the TSC is not trusted here (see the verdicts)".to_string(),
            verdicts,
        ));
    }
    let (hz, uncertainty_ppb, frequency_source) = match facts.stated_frequency() {
        Some(stated) if !stated.is_nominal() => {
            (stated.hz, None, format!("CPUID {:?}", stated.source))
        }
        _ => {
            let measured =
                crate::steer::startup_frequency(&SystemClocks, &anchor, crate::steer::read_tsc);
            (
                measured.hz,
                Some(measured.uncertainty_ppb),
                "measured against CLOCK_MONOTONIC at startup".to_string(),
            )
        }
    };
    if forced {
        verdicts.push(Verdict {
            check: "TIMEHANDS_COUNTER",
            passed: true,
            detail: "tsc: forced".to_string(),
        });
    }
    Ok(Choice {
        counter: HostCounter::Tsc(hw::Tsc::new(hz)),
        frequency_source,
        verdicts,
        fallback: None,
        anchor: Some(anchor),
        uncertainty_ppb,
    })
}

/// The generic timer: architected, synchronized and of known frequency.
#[cfg(target_arch = "aarch64")]
fn hardware(_forced: bool, mut verdicts: Vec<Verdict>) -> Result<Choice, (String, Vec<Verdict>)> {
    let counter = hw::Cntvct::new();
    verdicts.push(Verdict {
        check: "CNTFRQ_EL0",
        passed: true,
        detail: format!("{} Hz", counter.frequency()),
    });
    Ok(Choice {
        counter: HostCounter::Cntvct(counter),
        frequency_source: "CNTFRQ_EL0".to_string(),
        verdicts,
        fallback: None,
        anchor: None,
        // Firmware states CNTFRQ_EL0; the steering measures it.
        uncertainty_ppb: None,
    })
}

/// No hardware counter is supported on this architecture.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn hardware(_forced: bool, verdicts: Vec<Verdict>) -> Result<Choice, (String, Vec<Verdict>)> {
    Err((
        "no hardware counter is supported on this architecture".to_string(),
        verdicts,
    ))
}

/// Where the frequency of the kernel's clock comes from, as `info` says.
const KERNEL_FREQUENCY_SOURCE: &str = "CLOCK_MONOTONIC counts nanoseconds";

/// Whether `engine` runs on the kernel's clock (which needs no watchdog).
fn on_kernel_clock(engine: &Timekeeper<HostCounter>) -> bool {
    matches!(engine.counter(), HostCounter::Kernel(_))
}

/// What `info` reports of the counter choice.
#[derive(Clone)]
struct Facts {
    frequency_source: String,
    verdicts: Vec<Verdict>,
    fallback: Option<String>,
}

/// The timekeepers a clock can go through: the kernel's clock it starts on,
/// the hardware counter it moves to, and the kernel's clock again if that
/// counter goes wrong.
const STAGES: usize = 3;

/// [`HostClock::choice`]: the counter is still to be chosen.
const TO_CHOOSE: u8 = 0;
/// [`HostClock::choice`]: a thread is choosing it.
const CHOOSING: u8 = 1;
/// [`HostClock::choice`]: the counter is chosen (and in use).
const CHOSEN: u8 = 2;

/// How many times (50 µs apart) a thread waits for another's counter choice.
const CHOICE_WAITS: u32 = 2_000;

/// Puts a choice that is being made back to be made, unless forgotten: a
/// choice that panicked is made again, rather than waited for for ever.
struct ChoiceUndo<'a>(&'a AtomicU8);

impl Drop for ChoiceUndo<'_> {
    fn drop(&mut self) {
        self.0.store(TO_CHOOSE, Ordering::Release);
    }
}

/// The windup interval of the timekeeper the process's clock starts on, on
/// the kernel's clock, until the hardware counter takes over: short, so that
/// its promise (at most an interval and a lead ahead), where the hand-over
/// point falls, is near.
const STARTUP_INTERVAL: Duration = Duration::from_micros(50);

/// [`HostClock::tai_offset`] before it is read: not read at startup, which
/// must stay cheap, as few programs read TAI.
const TAI_UNREAD: i64 = i64::MIN;

/// The process-wide clock.
pub(crate) struct HostClock {
    /// The timekeepers in the order they took over (see [`STAGES`]).
    stages: [OnceLock<Timekeeper<HostCounter>>; STAGES],
    /// The index of the timekeeper in use, set after it is.
    stage: AtomicUsize,
    /// Where the move to the counter `choose` picks stands (see
    /// [`choose_counter`](HostClock::choose_counter)): [`TO_CHOOSE`],
    /// [`CHOOSING`] or [`CHOSEN`] (from the start, for a clock given its
    /// counter).
    choice: AtomicU8,
    /// Whether the watchdog's thread was started.
    watchdog_started: AtomicBool,
    /// The verdict of the cross-CPU check of the TSC, once done.
    cross_cpu: OnceLock<Verdict>,
    facts: Mutex<Facts>,
    /// The steering state; one steering at a time, by whoever winds up.
    steering: Mutex<Steering>,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC, in ns.
    pub(crate) boottime_offset: AtomicI64,
    /// The current bound on |ours − CLOCK_MONOTONIC|, in ns.
    pub(crate) accuracy: AtomicU64,
    /// The last measured offset, kernel − ours, in ns, for `info`.
    pub(crate) last_offset: AtomicI64,
    /// The bound on the error of the Realtime offset as recorded (half its
    /// bracket), in ns: what Realtime's accuracy adds to Monotonic's.
    pub(crate) realtime_uncertainty: AtomicU64,
    /// TAI − UTC, in seconds, as the kernel has it; [`TAI_UNREAD`] until
    /// the first read of TAI or the first steering.
    tai_offset: AtomicI64,
    upkeep_started: AtomicBool,
    /// The kernel's clocks this clock follows.
    pub(crate) kernel: &'static dyn KernelClocks,
}

impl HostClock {
    /// The process's clock: on the kernel's CLOCK_MONOTONIC at first, which
    /// costs nothing to choose (CPUID traps to the hypervisor in a VM, some
    /// microseconds a leaf, and the clocksource is a file), until the
    /// watchdog's thread moves it to the hardware counter.
    fn start() -> HostClock {
        // SAFETY: registers a handler that runs in the child after fork(); it
        // only stores to atomics, which is safe there. A failure (no memory)
        // leaves a child without restarted threads, as before.
        unsafe { libc::pthread_atfork(None, None, Some(forget_threads_in_child)) };
        let startup = Choice {
            counter: HostCounter::Kernel(KernelCounter::monotonic()),
            frequency_source: KERNEL_FREQUENCY_SOURCE.to_string(),
            verdicts: Vec::new(),
            fallback: None,
            anchor: None,
            uncertainty_ppb: Some(0),
        };
        HostClock::build(startup, STARTUP_INTERVAL, &SystemClocks)
    }

    /// A clock on a test's `counter`, following `kernel`'s clocks (leaked,
    /// as the process's clock is static).
    #[cfg(test)]
    pub(crate) fn on_test_counter(
        counter: std::sync::Arc<dyn Counter + Send + Sync>,
        kernel: &'static dyn KernelClocks,
    ) -> &'static HostClock {
        let choice = Choice {
            counter: HostCounter::Test(counter),
            frequency_source: "the test".to_string(),
            verdicts: Vec::new(),
            fallback: None,
            anchor: None,
            uncertainty_ppb: Some(0),
        };
        Box::leak(Box::new(HostClock::new(choice, kernel)))
    }

    /// A clock on the counter `choice` made, which it keeps (but for a
    /// failover).
    #[cfg(test)]
    fn new(choice: Choice, kernel: &'static dyn KernelClocks) -> HostClock {
        let clock = HostClock::build(choice, WINDUP_INTERVAL, kernel);
        clock.choice.store(CHOSEN, Ordering::Release);
        clock
    }

    /// The clock on `choice`'s counter with windups every `interval`,
    /// following `kernel`'s clocks.
    fn build(
        mut choice: Choice,
        interval: Duration,
        kernel: &'static dyn KernelClocks,
    ) -> HostClock {
        // The clock starts at CLOCK_MONOTONIC's time at a counter reading
        // paired with it, so that building the timekeeper (page faults on a
        // first touch cost microseconds here) is not an offset.
        let start = crate::steer::pair(kernel, || choice.counter.read());
        let before = BinTime::from_nanos(start.kernel as i128);
        let engine = timekeeper(choice.counter, before, Some(start.count), interval)
            .unwrap_or_else(|refused| {
                // A hardware counter the engine refuses (firmware that left
                // CNTFRQ_EL0 at 0, say): the kernel's clock always works.
                choice.fallback = Some(format!("the hardware counter was refused: {refused}"));
                choice.uncertainty_ppb = Some(0);
                choice.anchor = None;
                kernel_timekeeper(before, None)
            });
        let clock = HostClock {
            steering: Mutex::new(Steering::new(
                engine.counter().frequency(),
                choice.uncertainty_ppb,
                choice.anchor,
            )),
            stages: [OnceLock::from(engine), OnceLock::new(), OnceLock::new()],
            stage: AtomicUsize::new(0),
            choice: AtomicU8::new(TO_CHOOSE),
            watchdog_started: AtomicBool::new(false),
            cross_cpu: OnceLock::new(),
            facts: Mutex::new(Facts {
                frequency_source: choice.frequency_source,
                verdicts: choice.verdicts,
                fallback: choice.fallback,
            }),
            boottime_offset: AtomicI64::new(0),
            accuracy: AtomicU64::new(0),
            last_offset: AtomicI64::new(0),
            realtime_uncertainty: AtomicU64::new(0),
            tai_offset: AtomicI64::new(TAI_UNREAD),
            upkeep_started: AtomicBool::new(false),
            kernel,
        };
        clock.steering().follow_offsets(&clock);
        // An error bound from the start (some hundreds of ns of brackets),
        // not a zero that nothing measured.
        crate::steer::measure_phase(clock.engine(), &clock);
        clock
    }

    /// The timekeeper in use.
    pub(crate) fn engine(&self) -> &Timekeeper<HostCounter> {
        let stage = self.stage.load(Ordering::Acquire);
        // Each stage is set before the index names it.
        self.stages[stage].get().expect("the stage in use is set")
    }

    /// Moves the clock, once, from the kernel's clock it starts on to the
    /// counter `choose` picks (the TSC, CNTVCT_EL0; or stays, with the reason
    /// in `info`). Off the first read, which must stay cheap: the watchdog's
    /// thread does it when it starts (at the first windup), or `info` and the
    /// trace description when asked first. A call while another thread
    /// chooses waits for it (not with a lock: a `fork()`ed child, which has
    /// no such thread, starts the choice again).
    pub(crate) fn choose_counter(&self) {
        // Another thread's choice is waited for, but not for ever: one that
        // cannot finish (its thread gone in a fork()ed child, blocked on a
        // lock that thread held) leaves the clock as it is.
        for _ in 0..CHOICE_WAITS {
            match self.choice.compare_exchange(
                TO_CHOOSE,
                CHOOSING,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(CHOSEN) => return,
                Err(_) => std::thread::sleep(Duration::from_micros(50)),
            }
        }
        if self.choice.load(Ordering::Acquire) != CHOOSING {
            return;
        }
        // A panic below (a bug) leaves the choice to be made again.
        let undo = ChoiceUndo(&self.choice);
        let choice = choose();
        let hz = choice.counter.frequency();
        let kept = Facts {
            frequency_source: choice.frequency_source,
            verdicts: choice.verdicts,
            fallback: choice.fallback,
        };
        let mut steering = self.steering();
        // The kernel's clock too is handed over, to a timekeeper that winds
        // up every WINDUP_INTERVAL rather than the startup one's interval.
        let facts = match self.hand_over(choice.counter, true) {
            Ok(_) => {
                *steering = Steering::new(hz, choice.uncertainty_ppb, choice.anchor);
                kept
            }
            // A hardware counter the engine refuses (firmware that left
            // CNTFRQ_EL0 at 0, say): the kernel's clock.
            Err(refused) => {
                self.hand_over(HostCounter::Kernel(KernelCounter::monotonic()), true)
                    .expect("a 1 GHz, 64-bit counter with a 1 ms windup interval is valid");
                *steering = Steering::new(1_000_000_000, Some(0), None);
                Facts {
                    frequency_source: KERNEL_FREQUENCY_SOURCE.to_string(),
                    fallback: Some(format!("the hardware counter was refused: {refused}")),
                    ..kept
                }
            }
        };
        steering.follow_offsets(self);
        *self.facts() = facts;
        std::mem::forget(undo);
        self.choice.store(CHOSEN, Ordering::Release);
    }

    /// What `info` reports of the counter choice, whoever panicked holding it.
    fn facts(&self) -> std::sync::MutexGuard<'_, Facts> {
        self.facts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Retires the timekeeper in use for one on `counter` that starts where
    /// it stopped, and moves the readers to it; returns that uptime. The
    /// retire point lies up to two windup intervals ahead of now (see
    /// [`Timekeeper::retire`]): the successor starts at the count where it
    /// falls due, and stands at it until then, rather than running ahead of
    /// CLOCK_MONOTONIC by as much. With `wait`, the readers move only then
    /// (a spin of at most two intervals, for a thread that can afford it): until then they read the retired timekeeper, which is
    /// right up to that point, so that no read is ahead of CLOCK_MONOTONIC.
    /// Called with the steering lock held. Nothing changes if the engine
    /// refuses `counter`, or past the last stage.
    fn hand_over(&self, counter: HostCounter, wait: bool) -> Result<BinTime, crate::Error> {
        let stage = self.stage.load(Ordering::Acquire);
        if stage + 1 == STAGES {
            return Ok(self.engine().uptime());
        }
        // The engine's checks of the counter, before anything is retired.
        Timekeeper::builder(&counter)
            .windup_interval(WINDUP_INTERVAL)
            .build()?;
        let current = self.engine();
        let retired_at = current.retire();
        let ahead = retired_at.saturating_sub(current.uptime());
        let ahead_counts =
            (ahead.as_nanos().max(0) as u128 * counter.frequency() as u128).div_ceil(1_000_000_000);
        let due = counter.read().wrapping_add(ahead_counts as u64) & counter.mask();
        let successor = timekeeper(counter, retired_at, Some(due), WINDUP_INTERVAL)
            .expect("the counter passed the engine's checks above");
        // Realtime carries on: the retired timekeeper's offset, until the
        // steering re-reads the kernel's.
        successor.set_boottime(
            current
                .realtime_coarse()
                .saturating_sub(current.uptime_coarse()),
        );
        if wait {
            let counter = successor.counter();
            while counter.read().wrapping_sub(due) & counter.mask() > counter.mask() / 2 {
                std::hint::spin_loop();
            }
        }
        let _ = self.stages[stage + 1].set(successor);
        // Readers of the process's clock move to the successor before
        // anything (a coarse value) of it is published.
        if let Some(successor) = self
            .as_process_clock()
            .and_then(|clock| clock.stages[stage + 1].get())
        {
            READER.store(reader_word(successor), Ordering::Release);
        }
        self.stage.store(stage + 1, Ordering::Release);
        Ok(retired_at)
    }

    /// Retires the hardware counter's timekeeper for one on CLOCK_MONOTONIC,
    /// because of `why`. Called with the steering lock held (by the
    /// steering's watchdog, or by the cross-CPU check); does nothing on the
    /// kernel's clock.
    pub(crate) fn fail_over(&self, why: String) {
        if matches!(self.engine().counter(), HostCounter::Kernel(_)) {
            return;
        }
        let retired_at = self
            .hand_over(HostCounter::Kernel(KernelCounter::monotonic()), false)
            .expect("a 1 GHz, 64-bit counter with a 1 ms windup interval is valid");
        let mut facts = self.facts();
        facts.frequency_source = KERNEL_FREQUENCY_SOURCE.to_string();
        facts.fallback = Some(format!(
            "{why}: CLOCK_MONOTONIC took over at {retired_at} s"
        ));
    }

    /// Starts, once, the watchdog's thread: not at startup, which must stay
    /// cheap, but at the first windup a reader makes. It first moves the
    /// clock to the hardware counter ([`choose_counter`]); on the TSC it then
    /// runs the cross-CPU check (see [`CROSS_CPU_HANDOFFS`]): TSCs that two
    /// CPUs read apart are retired for the kernel's counter. Then it winds up
    /// every [`WATCHDOG_INTERVAL`], so that the watchdog runs in a program
    /// whose readers cannot notice that the counter stopped (their reads
    /// never find a windup due). It ends on the kernel's clock.
    ///
    /// [`choose_counter`]: HostClock::choose_counter
    fn start_watchdog(&'static self) {
        if self.watchdog_started.load(Ordering::Relaxed)
            || self.watchdog_started.swap(true, Ordering::Relaxed)
            || (self.choice.load(Ordering::Acquire) == CHOSEN && on_kernel_clock(self.engine()))
        {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("timehands-watchdog".to_string())
            .spawn(move || {
                self.choose_counter();
                #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
                if matches!(self.engine().counter(), HostCounter::Tsc(_)) {
                    let (verdict, why) = cross_cpu_verdict(self.engine().counter().frequency());
                    if let Some(why) = why {
                        self.steering().fail_over(self, why);
                    }
                    let _ = self.cross_cpu.set(verdict);
                }
                while !on_kernel_clock(self.engine()) {
                    std::thread::sleep(WATCHDOG_INTERVAL);
                    self.maintain();
                }
            });
        if let Err(e) = spawned {
            // No thread: the clock stays on the kernel's clock (info() may
            // still move it), and the watchdog runs with the readers' windups.
            let _ = self.cross_cpu.set(Verdict {
                check: CROSS_CPU_CHECK,
                passed: false,
                detail: format!("not run: no thread for it ({e})"),
            });
        }
    }

    /// The steering, whoever panicked holding it (the steering keeps no
    /// invariant a panic could break halfway).
    fn steering(&self) -> std::sync::MutexGuard<'_, Steering> {
        self.steering.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a reader (or the upkeep thread) does when the clock is due: winds
    /// it up, and starts the watchdog's thread the first time. Out of line, so
    /// that readers do not carry its frame.
    #[cold]
    #[inline(never)]
    fn wind_up(&'static self) {
        self.maintain();
        self.start_watchdog();
    }

    /// Winds up, then steers when a steering is due (its changes take
    /// effect from the next windup on); returns at once if another thread is
    /// at it. The windup comes first so that the steering measures a clock
    /// that stands nowhere (reads past the promise stand until a windup).
    pub(crate) fn maintain(&self) {
        // CLOCK_MONOTONIC is our uptime's reference: a counter that ran
        // through a suspend that it did not count resumes from it.
        self.engine().windup_following(|| {
            BinTime::from_nanos(self.kernel.nanos(KernelClock::Monotonic) as i128)
        });
        let steering = match self.steering.try_lock() {
            Ok(steering) => Some(steering),
            // A panic under the lock must not end steering (and the watchdog).
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(mut steering) = steering {
            steering.steer(self);
        }
        if self.as_process_clock().is_none() {
            return;
        }
        // Through the readers' word, so that a reader that sees a value below
        // and then reads `now()` reads the same timekeeper or a later one.
        let engine = match READER.load(Ordering::Acquire) {
            NOT_STARTED => self.engine(),
            word => reader_engine(word),
        };
        if self.upkeep_started.load(Ordering::Relaxed) {
            COARSE_NANOS.fetch_max(floor_nanos(engine.uptime_coarse()), Ordering::Release);
        }
        // The engine's reads, which never wind up (this is a windup).
        let [monotonic, realtime] = &SECOND_HINTS;
        monotonic.store(engine.uptime_nanos() / 1_000_000_000, Ordering::Relaxed);
        realtime.store(engine.realtime_nanos() / 1_000_000_000, Ordering::Relaxed);
    }

    /// Follows TAI − UTC, which the kernel keeps in whole seconds (an NTP
    /// daemon sets it; 0 otherwise).
    pub(crate) fn follow_tai(&self) {
        if let Ok(ntp) = self.kernel.ntp() {
            self.tai_offset
                .store(ntp.tai_offset_s as i64, Ordering::Relaxed);
        }
    }

    /// TAI − UTC in seconds, read from the kernel the first time (0 if
    /// `adjtimex` fails, as CLOCK_TAI is Realtime then).
    pub(crate) fn tai_offset(&self) -> i64 {
        if self.tai_offset.load(Ordering::Relaxed) == TAI_UNREAD {
            self.follow_tai();
        }
        match self.tai_offset.load(Ordering::Relaxed) {
            TAI_UNREAD => 0,
            seconds => seconds,
        }
    }

    /// This clock, if it is the process's one (tests build others).
    fn as_process_clock(&self) -> Option<&'static HostClock> {
        CLOCK.get().filter(|clock| std::ptr::eq(*clock, self))
    }

    fn start_upkeep(&'static self) {
        if self.upkeep_started.swap(true, Ordering::Relaxed) {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("timehands-upkeep".to_string())
            .spawn(move || {
                loop {
                    std::thread::sleep(WINDUP_INTERVAL);
                    self.wind_up();
                }
            });
        if spawned.is_err() {
            // No thread, no upkeep: the coarse clocks then advance with the
            // windups that precise readers do. Let a later coarse read try
            // again (and not read a value no windup keeps any more).
            self.upkeep_started.store(false, Ordering::Relaxed);
            COARSE_NANOS.store(0, Ordering::Release);
        }
    }
}

/// What the cross-CPU check is called in the verdicts.
const CROSS_CPU_CHECK: &str = "cross-CPU TSC check";

/// How often the watchdog's thread winds up (and so steers, and so checks
/// the counter), whatever the readers do.
const WATCHDOG_INTERVAL: Duration = Duration::from_millis(100);

/// Hand-offs per CPU pair in the cross-CPU check: some milliseconds a pair,
/// on a thread of its own, with bounds about a round trip wide.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
const CROSS_CPU_HANDOFFS: u64 = 2_000;

/// Each CPU's TSC against the first CPU's, as Linux checks at boot: the
/// verdict, and why to fail over if the TSCs disagree.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn cross_cpu_verdict(hz: u64) -> (Verdict, Option<String>) {
    take_process_affinity();
    verdict_of(crate::tsc_sync::measure_against_first(
        CROSS_CPU_HANDOFFS,
        hz,
    ))
}

/// Gives the calling thread the affinity of the process's main thread: a
/// check on it then covers the CPUs the process was given (`taskset`, a
/// cpuset), not only those of the reader whose windup started the thread.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn take_process_affinity() {
    // SAFETY: `cpu_set_t` is plain bits, for which all zeros is a valid (empty)
    // set; both calls are given its size and write within it. A failure (a
    // machine with more CPUs than a `cpu_set_t` holds) leaves the affinity as
    // it was.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(libc::getpid(), size, &mut set) == 0 {
            libc::sched_setaffinity(0, size, &set);
        }
    }
}

/// The verdict of a cross-CPU measurement, and why to fail over if it found
/// two CPUs apart.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn verdict_of(
    measured: Result<crate::tsc_sync::Report, crate::tsc_sync::SyncError>,
) -> (Verdict, Option<String>) {
    let report = match measured {
        Ok(report) => report,
        Err(e) => {
            let verdict = Verdict {
                check: CROSS_CPU_CHECK,
                passed: false,
                detail: format!("not run: {e}"),
            };
            return (verdict, None);
        }
    };
    if report.pairs.is_empty() {
        let verdict = Verdict {
            check: CROSS_CPU_CHECK,
            passed: false,
            detail: "not run: the process may run on one CPU only".to_string(),
        };
        return (verdict, None);
    }
    let apart = report.pairs.iter().find(|pair| !pair.synchronized());
    let widest = report
        .pairs
        .iter()
        .map(|pair| pair.hi_ns - pair.lo_ns)
        .fold(0.0, f64::max);
    let detail = match apart {
        None => format!(
            "{} CPU pairs agree, bounds at most {widest:.0} ns wide",
            report.pairs.len()
        ),
        Some(pair) => format!(
            "CPUs {:?} are [{:.0}, {:.0}] ns apart",
            pair.cpus, pair.lo_ns, pair.hi_ns
        ),
    };
    let why = apart.map(|_| format!("the {CROSS_CPU_CHECK} found {detail}"));
    let verdict = Verdict {
        check: CROSS_CPU_CHECK,
        passed: apart.is_none(),
        detail,
    };
    (verdict, why)
}

/// A timekeeper for the host clock on `counter`, winding up every
/// `interval`, starting at `uptime` at the counter reading `count` (now, if
/// `None`).
fn timekeeper(
    counter: HostCounter,
    uptime: BinTime,
    count: Option<u64>,
    interval: Duration,
) -> Result<Timekeeper<HostCounter>, crate::Error> {
    let builder = Timekeeper::builder(counter)
        .windup_interval(interval)
        .start_at(uptime)
        .follows_reference(true);
    match count {
        Some(count) => builder.start_count(count),
        None => builder,
    }
    .build()
}

/// A timekeeper on the kernel's CLOCK_MONOTONIC, starting at `uptime` at the
/// kernel's time `count` (now, if `None`).
fn kernel_timekeeper(uptime: BinTime, count: Option<u64>) -> Timekeeper<HostCounter> {
    timekeeper(
        HostCounter::Kernel(KernelCounter::monotonic()),
        uptime,
        count,
        WINDUP_INTERVAL,
    )
    .expect("a 1 GHz, 64-bit counter with a 1 ms windup interval is valid")
}

/// The clock, started at its first use.
#[inline]
pub(crate) fn clock() -> &'static HostClock {
    CLOCK.get_or_init(HostClock::start)
}

/// The process's clock, once started.
static CLOCK: OnceLock<HostClock> = OnceLock::new();

/// In a `fork()`ed child, which has none of the parent's threads: the next
/// coarse read and the next windup start the upkeep and watchdog threads anew.
extern "C" fn forget_threads_in_child() {
    if let Some(clock) = CLOCK.get() {
        clock.upkeep_started.store(false, Ordering::Relaxed);
        clock.watchdog_started.store(false, Ordering::Relaxed);
        // A choice the parent was making is made again, by the child; a
        // hand-over it was in the middle of is taken as far as the readers'
        // word had gone.
        let _ = clock.choice.compare_exchange(
            CHOOSING,
            TO_CHOOSE,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        let word = READER.load(Ordering::Relaxed);
        if word != NOT_STARTED {
            let readers = reader_engine(word);
            if let Some(stage) = clock
                .stages
                .iter()
                .position(|stage| stage.get().is_some_and(|s| std::ptr::eq(s, readers)))
            {
                clock.stage.store(stage, Ordering::Relaxed);
            }
        }
        for engine in clock.stages.iter().filter_map(OnceLock::get) {
            // SAFETY: this runs in the child before it returns from fork(),
            // the only thread it has: none is in a writer.
            unsafe { engine.release_writer_after_fork() };
        }
        // Stale until the upkeep thread runs again: the next coarse read
        // goes the long way, and starts it.
        COARSE_NANOS.store(0, Ordering::Relaxed);
    }
}

/// The process's clock as readers find it, in one word: the address of the
/// timekeeper in use (one of its [`STAGES`]),
/// and in the low bits (the timekeeper is 64-byte aligned) how to read its
/// counter, decided once, so that a read neither tests whether the clock has
/// started nor matches on the kind of counter. 0 until the clock starts.
static READER: AtomicUsize = AtomicUsize::new(0);
/// The low bits of [`READER`]: how the counter is read.
const HOW: usize = 0b11;
/// Not started: the first read starts the clock.
const NOT_STARTED: usize = 0;
/// Through [`HostCounter`]'s own read (the kernel's clock, CNTVCT_EL0).
const COUNTER_READ: usize = 1;
/// The TSC, with `rdtscp`.
#[cfg(target_arch = "x86_64")]
const RDTSCP: usize = 2;
/// The TSC, with `lfence; rdtsc`.
#[cfg(target_arch = "x86_64")]
const LFENCE_RDTSC: usize = 3;
const _: () = assert!(std::mem::align_of::<Timekeeper<HostCounter>>() > HOW);

/// The readers' word for `engine`, a timekeeper of the process's clock.
fn reader_word(engine: &'static Timekeeper<HostCounter>) -> usize {
    let how = match engine.counter() {
        #[cfg(target_arch = "x86_64")]
        HostCounter::Tsc(tsc) => match tsc.ordered_read() {
            hw::OrderedRead::Rdtscp => RDTSCP,
            hw::OrderedRead::LfenceRdtsc => LFENCE_RDTSC,
        },
        _ => COUNTER_READ,
    };
    std::ptr::from_ref(engine) as usize | how
}

/// The timekeeper a readers' word other than 0 names.
#[inline(always)]
fn reader_engine(word: usize) -> &'static Timekeeper<HostCounter> {
    debug_assert!(word & HOW != NOT_STARTED);
    // SAFETY: a word other than 0 is made by `reader_word` from a
    // `&'static` timekeeper of the process's clock (one of its stages,
    // inside the `CLOCK` static, never moved or dropped).
    unsafe { &*((word & !HOW) as *const Timekeeper<HostCounter>) }
}

/// Nanoseconds on CLOCK_MONOTONIC (with `REALTIME`, on CLOCK_REALTIME) from
/// an ordered counter read (or, without `ORDERED`, an unordered one), winding
/// the clock up when the read finds it due.
#[inline(always)]
fn read_nanos<const REALTIME: bool, const ORDERED: bool>() -> u64 {
    match read_nanos_fast::<REALTIME, ORDERED, true>() {
        Ok(ns) => ns,
        Err(Some((engine, count))) => read_nanos_slow::<REALTIME, ORDERED>(engine, count),
        Err(None) => start_and_read::<REALTIME, ORDERED>(),
    }
}

/// What a read that the common case does not cover passes on: the
/// timekeeper and the counter reading, or `None` before the clock starts.
type LongWay = Option<(&'static Timekeeper<HostCounter>, u64)>;

/// The common case of [`read_nanos`], once the clock runs: one load of the
/// readers' word, the counter read it names, and the engine's segment of the
/// current hands (see [`Timekeeper::nanos_at`]). It never waits, winds up or
/// panics. Without `COUNTER_CALL` it calls nothing at all: a counter read by
/// a call (the kernel's clock) goes the long way, so that a caller that
/// needs no registers saved around a call saves none.
#[inline(always)]
fn read_nanos_fast<const REALTIME: bool, const ORDERED: bool, const COUNTER_CALL: bool>()
-> Result<u64, LongWay> {
    let word = READER.load(Ordering::Acquire);
    let how = word & HOW;
    if how == NOT_STARTED || (!COUNTER_CALL && how == COUNTER_READ) {
        return Err(None);
    }
    let engine = reader_engine(word);
    let count = match how {
        #[cfg(target_arch = "x86_64")]
        RDTSCP | LFENCE_RDTSC if !ORDERED => hw::rdtsc(),
        // SAFETY: the word says RDTSCP only for a TSC read with rdtscp,
        // which its constructor found the CPU has.
        #[cfg(target_arch = "x86_64")]
        RDTSCP => unsafe { hw::read_tsc_ordered(hw::OrderedRead::Rdtscp) },
        // SAFETY: `lfence; rdtsc` runs on every x86_64 CPU.
        #[cfg(target_arch = "x86_64")]
        LFENCE_RDTSC => unsafe { hw::read_tsc_ordered(hw::OrderedRead::LfenceRdtsc) },
        _ => sample::<ORDERED>(engine.counter()),
    };
    engine
        .nanos_at::<REALTIME>(count)
        .ok_or(Some((engine, count)))
}

/// The counter's read, ordered or not.
#[inline(always)]
fn sample<const ORDERED: bool>(counter: &HostCounter) -> u64 {
    if ORDERED {
        counter.read()
    } else {
        counter.read_unordered()
    }
}

/// A read at `count` that the current hands' first segment does not cover:
/// the engine's long way (re-reading the counter through [`HostCounter`],
/// the same counter), and the windup it may find due.
#[cold]
#[inline(never)]
fn read_nanos_slow<const REALTIME: bool, const ORDERED: bool>(
    engine: &Timekeeper<HostCounter>,
    count: u64,
) -> u64 {
    let (ns, due) = engine.nanos_and_due_slow::<REALTIME>(count, sample::<ORDERED>);
    match due {
        Due::No => ns,
        Due::Yes => {
            clock().wind_up();
            ns
        }
        Due::Standing => read_after_windup::<REALTIME, ORDERED>(ns),
    }
}

/// How many times a read that stood at its hands' promise winds up (or
/// finds another thread winding up) and reads again, before it returns the
/// time it stood at.
const STANDING_READS: u32 = 1_000;

/// A read that stood at its hands' promise, `stood`: no windup for two
/// intervals, so the counter may have run through a suspend that
/// CLOCK_MONOTONIC did not count (see [`Timekeeper::windup_following`]).
/// The windup decides; the read after it gives the time. A thread that
/// finds another winding up waits for it (yielding), but not for ever: a
/// `fork()`ed child whose parent was winding up keeps the time it stood at.
#[cold]
#[inline(never)]
fn read_after_windup<const REALTIME: bool, const ORDERED: bool>(stood: u64) -> u64 {
    let clock = clock();
    for _ in 0..STANDING_READS {
        clock.wind_up();
        let engine = reader_engine(READER.load(Ordering::Acquire));
        let count = sample::<ORDERED>(engine.counter());
        if let Some(ns) = engine.nanos_at::<REALTIME>(count) {
            return ns;
        }
        let (ns, due) = engine.nanos_and_due_slow::<REALTIME>(count, sample::<ORDERED>);
        if due != Due::Standing {
            return ns;
        }
        std::thread::yield_now();
    }
    stood
}

/// The first read: starts the clock, publishes the readers' word (unless a
/// failover already did), and reads.
#[cold]
#[inline(never)]
fn start_and_read<const REALTIME: bool, const ORDERED: bool>() -> u64 {
    let clock = clock();
    let _ = READER.compare_exchange(
        0,
        reader_word(clock.engine()),
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    read_nanos::<REALTIME, ORDERED>()
}

/// Now, on CLOCK_MONOTONIC: the fastest correct clock this machine has. Never
/// goes backwards, on one thread or across threads.
///
/// ```
/// let a = timehands::now();
/// let b = timehands::now();
/// assert!(b >= a);
/// ```
#[inline]
pub fn now() -> Instant {
    Instant::from_nanos(read_nanos::<false, true>())
}

/// Now, from an unordered counter read: cheaper than [`now`], monotonic on one
/// thread, but a thread that has seen another thread's time may read an
/// earlier one. For timing intervals on one thread only.
#[inline]
pub fn now_unordered() -> Instant {
    Instant::from_nanos(read_nanos::<false, false>())
}

/// [`now_coarse`]'s value: the clock's coarse uptime in nanoseconds, kept
/// ready at each windup (the largest so far: several threads wind up) once
/// the upkeep thread runs, so that a coarse read is one load. 0 until then,
/// and in a `fork()`ed child until it runs again: the long way, which starts
/// it.
static COARSE_NANOS: AtomicU64 = AtomicU64::new(0);

/// The time of the last windup: no counter read at all, at most a windup
/// interval ([`getres`] says how much) behind [`now`], never ahead of it.
/// The first call starts the thread that keeps it fresh.
#[inline]
pub fn now_coarse() -> Instant {
    match COARSE_NANOS.load(Ordering::Acquire) {
        0 => now_coarse_starting(),
        ns => Instant::from_nanos(ns),
    }
}

/// A coarse read before the upkeep thread runs: starts it, and reads the
/// timekeeper's own coarse clock (which [`COARSE_NANOS`] copies).
#[cold]
#[inline(never)]
fn now_coarse_starting() -> Instant {
    let clock = clock();
    clock.start_upkeep();
    Instant::from_nanos(floor_nanos(clock.engine().uptime_coarse()))
}

/// The latest time [`now_coherent`] handed out, in ns: the floor of
/// [`now_coarse_coherent`].
static COHERENT_FLOOR: AtomicU64 = AtomicU64::new(0);

/// [`now`], remembered so that a [`now_coarse_coherent`] that happens after
/// it is never earlier (the multigrain timestamps of Linux 6.13: the coarse
/// clock stays cheap until someone has seen a finer time). Costs a shared
/// atomic maximum on top of `now()`: use it where that coherence matters, such
/// as timestamps that coarse ones are compared with, not for every read.
///
/// ```
/// let precise = timehands::now_coherent();
/// assert!(timehands::now_coarse_coherent() >= precise);
/// ```
pub fn now_coherent() -> Instant {
    let t = now();
    COHERENT_FLOOR.fetch_max(t.as_nanos(), Ordering::Release);
    t
}

/// [`now_coarse`], but never earlier than a [`now_coherent`] read that
/// happened before it; like `now_coarse`, never ahead of a [`now`] that
/// follows, and never decreasing.
#[inline]
pub fn now_coarse_coherent() -> Instant {
    let coarse = now_coarse();
    coarse.max(Instant::from_nanos(COHERENT_FLOOR.load(Ordering::Acquire)))
}

/// The clocks of `clock_gettime(2)` that timehands serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClockId {
    /// Unix time, following the kernel's steps (`settimeofday`).
    Realtime,
    /// Time since boot, not counting suspend: [`now`].
    Monotonic,
    /// Time since boot, counting suspend.
    Boottime,
    /// The kernel's CLOCK_MONOTONIC_RAW (not slewed by NTP), read from the kernel.
    MonotonicRaw,
    /// Realtime at the last windup.
    RealtimeCoarse,
    /// Monotonic at the last windup: [`now_coarse`].
    MonotonicCoarse,
    /// Whole seconds of Realtime.
    Second,
    /// International Atomic Time: Realtime plus the kernel's TAI − UTC
    /// offset (CLOCK_TAI), followed as an NTP daemon sets it (0 where none
    /// does, as the kernel's).
    Tai,
}

impl ClockId {
    /// Every clock id.
    pub const ALL: [ClockId; 8] = [
        ClockId::Realtime,
        ClockId::Monotonic,
        ClockId::Boottime,
        ClockId::MonotonicRaw,
        ClockId::RealtimeCoarse,
        ClockId::MonotonicCoarse,
        ClockId::Second,
        ClockId::Tai,
    ];
}

/// The time on clock `id`, since that clock's origin (the kernel's origin for
/// the clock of that name). A precise read winds the clock up when it finds
/// it due, as [`now`] does; the first coarse read starts the thread that
/// keeps the coarse clocks fresh.
// Always inlined: with a constant id (the common call) it is that clock's
// read alone, as cheap as `now()` and an add.
#[inline(always)]
pub fn gettime(id: ClockId) -> Duration {
    match id {
        ClockId::Monotonic => split_near(read_nanos::<false, true>(), &SECOND_HINTS[0]),
        ClockId::Realtime => split_near(read_nanos::<true, true>(), &SECOND_HINTS[1]),
        other => Duration::from_nanos(gettime_nanos_other(other)),
    }
}

/// [`gettime`] when one instruction's read is all it takes: the clock has
/// started, runs on a counter read by an instruction (the TSC), the current
/// timehands cover this moment, and `id` is [`Monotonic`](ClockId::Monotonic)
/// or [`Realtime`](ClockId::Realtime). `None` otherwise, and [`gettime`]
/// does the rest (starts the clock, winds it up, takes the long way). It
/// never waits, winds up, allocates, calls or panics: for a caller that must
/// not, such as a C function that may not unwind, a signal handler or a
/// tracer's probe.
///
/// ```
/// use timehands::{ClockId, gettime, try_gettime};
///
/// let t = try_gettime(ClockId::Monotonic).unwrap_or_else(|| gettime(ClockId::Monotonic));
/// assert!(t > std::time::Duration::ZERO);
/// ```
#[inline(always)]
pub fn try_gettime(id: ClockId) -> Option<Duration> {
    match id {
        ClockId::Monotonic => {
            let ns = read_nanos_fast::<false, true, false>().ok()?;
            Some(split_near(ns, &SECOND_HINTS[0]))
        }
        ClockId::Realtime => {
            let ns = read_nanos_fast::<true, true, false>().ok()?;
            Some(split_near(ns, &SECOND_HINTS[1]))
        }
        _ => None,
    }
}

/// Whole seconds of a recent read of CLOCK_MONOTONIC and of CLOCK_REALTIME,
/// refreshed at windups: hints that let [`gettime`] split nanoseconds into
/// seconds with a subtraction rather than a division. Any value is correct
/// (a wrong one only sends the split the long way); each is at most
/// `u64::MAX / 10^9`, so that its nanoseconds fit a `u64`.
static SECOND_HINTS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// `ns` as a `Duration`, split at the second `hint` names when `ns` falls in
/// that second or the next (a predicted branch and a subtraction), by a
/// division otherwise.
#[inline(always)]
fn split_near(ns: u64, hint: &AtomicU64) -> Duration {
    const NANOS_PER_SEC: u64 = 1_000_000_000;
    let second = hint.load(Ordering::Relaxed);
    // No overflow: hints are at most u64::MAX / 10^9.
    match ns.checked_sub(second * NANOS_PER_SEC) {
        Some(within) if within < NANOS_PER_SEC => Duration::new(second, within as u32),
        Some(within) if within < 2 * NANOS_PER_SEC => {
            Duration::new(second + 1, (within - NANOS_PER_SEC) as u32)
        }
        _ => Duration::from_nanos(ns),
    }
}

/// The nanoseconds of the clocks other than Monotonic and Realtime.
#[inline(never)]
fn gettime_nanos_other(id: ClockId) -> u64 {
    let clock = clock();
    match id {
        ClockId::Monotonic => read_nanos::<false, true>(),
        ClockId::Realtime => read_nanos::<true, true>(),
        ClockId::Second => read_nanos::<true, true>() / 1_000_000_000 * 1_000_000_000,
        ClockId::Boottime => read_nanos::<false, true>()
            .saturating_add_signed(clock.boottime_offset.load(Ordering::Relaxed)),
        ClockId::MonotonicRaw => clock.kernel.nanos(KernelClock::MonotonicRaw),
        ClockId::Tai => {
            read_nanos::<true, true>().saturating_add_signed(clock.tai_offset() * 1_000_000_000)
        }
        ClockId::MonotonicCoarse => now_coarse().as_nanos(),
        ClockId::RealtimeCoarse => {
            clock.start_upkeep();
            floor_nanos(clock.engine().realtime_coarse())
        }
    }
}

/// What a clock can tell apart, and how far it can be from the kernel's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The smallest step the clock takes.
    pub resolution: Duration,
    /// The current bound on its error against the kernel's clock of that name.
    pub accuracy: Duration,
}

/// The resolution and the current accuracy bound of clock `id`.
pub fn getres(id: ClockId) -> Resolution {
    let clock = clock();
    let hz = clock.engine().counter().frequency().max(1);
    let tick = Duration::from_nanos(1_000_000_000u64.div_ceil(hz));
    let accuracy = Duration::from_nanos(clock.accuracy.load(Ordering::Relaxed));
    // Realtime's offset from Monotonic was measured too.
    let realtime_accuracy =
        accuracy + Duration::from_nanos(clock.realtime_uncertainty.load(Ordering::Relaxed));
    match id {
        ClockId::Monotonic | ClockId::Boottime => Resolution {
            resolution: tick,
            accuracy,
        },
        ClockId::Realtime | ClockId::Tai => Resolution {
            resolution: tick,
            accuracy: realtime_accuracy,
        },
        ClockId::MonotonicRaw => Resolution {
            resolution: Duration::from_nanos(1),
            accuracy: Duration::ZERO,
        },
        ClockId::MonotonicCoarse => Resolution {
            resolution: WINDUP_INTERVAL,
            accuracy: accuracy + WINDUP_INTERVAL,
        },
        ClockId::RealtimeCoarse => Resolution {
            resolution: WINDUP_INTERVAL,
            accuracy: realtime_accuracy + WINDUP_INTERVAL,
        },
        ClockId::Second => Resolution {
            resolution: Duration::from_secs(1),
            accuracy: realtime_accuracy + Duration::from_secs(1),
        },
    }
}

/// What the clock runs on and how well it is doing. With the `serde` feature
/// it serializes under these names, the accuracy as `accuracy_ns`.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Info {
    /// The counter's name (`TSC`, `CNTVCT_EL0`, `CLOCK_MONOTONIC`).
    pub counter: String,
    /// The counter's frequency, as refined so far, in Hz.
    pub frequency_hz: u64,
    /// Where the first frequency came from.
    pub frequency_source: String,
    /// How sure the frequency is, in parts per billion: the brackets of its
    /// last measurement over the counts between them. `None` for a frequency
    /// only stated (by CPUID) and not yet measured.
    pub frequency_uncertainty_ppb: Option<u64>,
    /// How far the steering has moved the frequency from the first one, in
    /// parts per billion.
    pub frequency_correction_ppb: i64,
    /// The checks that chose the counter.
    pub verdicts: Vec<Verdict>,
    /// Why the kernel clock is used instead of a hardware counter, if it is.
    pub fallback: Option<String>,
    /// Hands published so far.
    pub windups: u64,
    /// The last measured offset, CLOCK_MONOTONIC minus ours, in ns.
    pub offset_ns: i64,
    /// The current error bound against CLOCK_MONOTONIC.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "accuracy_ns", serialize_with = "nanos_of")
    )]
    pub accuracy: Duration,
    /// The bounds on real time against UTC ([`realtime_bounds`](crate::realtime_bounds)),
    /// or why there are none (the kernel is not synchronized). In JSON, the
    /// bounds, or `{"error": "..."}`.
    #[cfg_attr(feature = "serde", serde(serialize_with = "bounds_or_error"))]
    pub realtime_bounds: Result<crate::RealtimeBounds, crate::Error>,
}

/// A duration serialized as whole nanoseconds.
#[cfg(feature = "serde")]
fn nanos_of<S: serde::Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u128(d.as_nanos())
}

/// The bounds, or `{"error": message}`.
#[cfg(feature = "serde")]
fn bounds_or_error<S: serde::Serializer>(
    bounds: &Result<crate::RealtimeBounds, crate::Error>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    use serde::ser::SerializeMap;
    match bounds {
        Ok(bounds) => bounds.serialize(serializer),
        Err(e) => {
            let mut map = serializer.serialize_map(Some(1))?;
            map.serialize_entry("error", &e.to_string())?;
            map.end()
        }
    }
}

/// What the clock runs on, why, and how far it is from the kernel.
pub fn info() -> Info {
    let clock = clock();
    clock.choose_counter();
    let Facts {
        frequency_source,
        verdicts,
        fallback,
    } = clock.facts().clone();
    let steering = clock.steering();
    Info {
        counter: clock.engine().counter().name().to_string(),
        frequency_hz: steering.frequency_hz(),
        frequency_source,
        frequency_uncertainty_ppb: steering.uncertainty_ppb(),
        frequency_correction_ppb: steering.correction_ppb(),
        verdicts: verdicts
            .into_iter()
            .chain(clock.cross_cpu.get().cloned())
            .collect(),
        fallback,
        windups: clock
            .stages
            .iter()
            .filter_map(OnceLock::get)
            .map(|engine| engine.stats().windups)
            .sum(),
        offset_ns: clock.last_offset.load(Ordering::Relaxed),
        accuracy: Duration::from_nanos(clock.accuracy.load(Ordering::Relaxed)),
        realtime_bounds: crate::realtime_bounds(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::thread::JoinHandle;

    use super::*;
    use crate::kernel_clocks::kernel_nanos;

    /// CLOCK_MONOTONIC's nanoseconds as a 1 GHz counter, which the test can
    /// make jump or stop.
    #[derive(Clone, Default)]
    pub(crate) struct Faulty {
        jump: Arc<AtomicU64>,
        stopped_at: Arc<AtomicU64>,
    }

    impl Counter for Faulty {
        fn read(&self) -> u64 {
            match self.stopped_at.load(Ordering::Relaxed) {
                0 => kernel_nanos(libc::CLOCK_MONOTONIC) + self.jump.load(Ordering::Relaxed),
                stopped => stopped,
            }
        }
        fn frequency(&self) -> u64 {
            1_000_000_000
        }
        fn name(&self) -> &str {
            "faulty"
        }
    }

    /// What a reader saw: its last time, and every step back (from, to).
    struct Seen {
        last: BinTime,
        steps_back: Vec<(BinTime, BinTime)>,
    }

    /// Any hint splits nanoseconds right: the hint's second and the next go
    /// the short way, every other one (a stale hint, a step of realtime) the
    /// long way.
    #[test]
    fn seconds_split_right_whatever_the_hint() {
        let hint = AtomicU64::new(0);
        for ns in [0, 999_999_999, 1_000_000_000, 5_123_456_789, u64::MAX] {
            for second in [0, 4, 5, 6, 7, 1_000, u64::MAX / 1_000_000_000] {
                hint.store(second, Ordering::Relaxed);
                assert_eq!(
                    split_near(ns, &hint),
                    Duration::from_nanos(ns),
                    "{ns} near {second}"
                );
            }
        }
    }

    /// A thread that reads `clock` as `now()` does, winding it up when due
    /// (and so starting the watchdog's thread), until `stop`.
    fn read_until(clock: &'static HostClock, stop: Arc<AtomicBool>) -> JoinHandle<Seen> {
        std::thread::spawn(move || {
            let mut seen = Seen {
                last: BinTime::ZERO,
                steps_back: Vec::new(),
            };
            while !stop.load(Ordering::Relaxed) {
                let (now, due) = clock.engine().uptime_and_due();
                if now < seen.last {
                    seen.steps_back.push((seen.last, now));
                }
                seen.last = now;
                if due {
                    clock.wind_up();
                }
            }
            seen
        })
    }

    /// A clock started as the process's is starts on the kernel's clock
    /// (nothing to choose at the first read) and moves to the counter
    /// `choose` picks at its first windup, on the watchdog's thread, with no
    /// step back for a reader reading through it.
    #[test]
    #[cfg_attr(miri, ignore = "reads the CPU's counter and the kernel's clocks")]
    fn the_clock_starts_on_the_kernel_clock_and_moves_to_the_chosen_counter() {
        let clock: &'static HostClock = Box::leak(Box::new(HostClock::start()));
        assert!(on_kernel_clock(clock.engine()));
        assert_eq!(clock.choice.load(Ordering::Acquire), TO_CHOOSE);
        let stop = Arc::new(AtomicBool::new(false));
        let reader = read_until(clock, stop.clone());
        // The loop bound only keeps a broken hand-over from hanging the test.
        for _ in 0..5000 {
            if clock.choice.load(Ordering::Acquire) == CHOSEN {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(5));
        stop.store(true, Ordering::Relaxed);
        let seen = reader.join().expect("the reader ran");
        assert_eq!(seen.steps_back, []);
        let chosen = choose();
        assert_eq!(
            clock.engine().counter().name(),
            chosen.counter.name(),
            "{:?}",
            clock.facts().fallback
        );
        if !on_kernel_clock(clock.engine()) {
            assert_eq!(
                clock.stages[0].get().map(Timekeeper::windup),
                Some(crate::Windup::Retired)
            );
        }
        assert!(clock.engine().uptime() >= seen.last);
    }

    /// A host clock on `counter`, read by a thread that winds it up as
    /// `now()` does (and so starts the watchdog's thread), until the watchdog
    /// fails it over after `fault`: no windup but the readers' and that
    /// thread's. Returns the clock (leaked, as the process's clock is static)
    /// and what the reader saw.
    fn fail_over_after(counter: Faulty, fault: impl FnOnce(&Faulty)) -> (&'static HostClock, Seen) {
        let clock = HostClock::on_test_counter(Arc::new(counter.clone()), &SystemClocks);
        let stop = Arc::new(AtomicBool::new(false));
        let reader = read_until(clock, stop.clone());
        // Some steerings of a counter that keeps time, enough for the
        // watchdog to know its rate: no failover.
        std::thread::sleep(Duration::from_millis(60));
        assert!(
            clock.facts().fallback.is_none(),
            "{:?}",
            clock.facts().fallback
        );
        fault(&counter);
        // The loop bound only keeps a broken watchdog from hanging the test.
        for _ in 0..5000 {
            if clock.facts().fallback.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(5));
        stop.store(true, Ordering::Relaxed);
        let seen = reader.join().expect("the reader ran");
        (clock, seen)
    }

    /// With `serde`, `info()` is the JSON document tools print: the fields by
    /// name, the accuracy in nanoseconds, the verdicts as objects.
    #[cfg(feature = "serde")]
    #[test]
    #[cfg_attr(miri, ignore = "reads the CPU's counter and the kernel's clocks")]
    fn info_serializes_by_name() {
        let doc = serde_json::to_value(info()).expect("serializes");
        assert_eq!(doc["counter"], info().counter);
        assert!(doc["accuracy_ns"].is_u64(), "{doc}");
        assert!(doc["frequency_hz"].as_u64().is_some_and(|hz| hz > 0));
        let verdicts = doc["verdicts"].as_array().expect("an array");
        for v in verdicts {
            assert!(v["check"].is_string() && v["passed"].is_boolean() && v["detail"].is_string());
        }
    }

    /// A suspend (the Boottime offset grew) restarts the rate's baseline:
    /// counts that ran on while CLOCK_MONOTONIC stood still are no frequency.
    /// Offsets that did not move keep it.
    #[test]
    #[cfg_attr(miri, ignore = "reads the kernel's clocks")]
    fn a_suspend_restarts_the_rate_baseline() {
        let counter = Faulty::default();
        let start = crate::steer::Pair::new(counter.read(), kernel_nanos(libc::CLOCK_MONOTONIC), 0);
        let clock = HostClock::new(
            Choice {
                counter: HostCounter::Test(Arc::new(counter)),
                frequency_source: "the test".to_string(),
                verdicts: Vec::new(),
                fallback: None,
                anchor: Some(start),
                uncertainty_ppb: Some(0),
            },
            &SystemClocks,
        );
        let mut steering = clock.steering();
        steering.follow_offsets(&clock);
        assert!(steering.has_rate_anchor());
        steering.pretend_suspended(1_000_000_000);
        steering.follow_offsets(&clock);
        assert!(!steering.has_rate_anchor());
    }

    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn cross_cpu_verdicts() {
        use crate::tsc_sync::{PairBounds, Report, SyncError};
        let pair = |lo: i64, hi: i64| PairBounds {
            cpus: (0, 3),
            lo,
            hi,
            lo_ns: lo as f64 / 2.0,
            hi_ns: hi as f64 / 2.0,
            min_round_trip: (hi - lo) as u64,
            min_round_trip_ns: (hi - lo) as f64 / 2.0,
            handoffs: 2_000,
            backward: 0,
        };
        let (verdict, why) = verdict_of(Ok(Report {
            pairs: vec![pair(-300, 500)],
        }));
        assert!(verdict.passed && why.is_none(), "{verdict:?}");
        assert_eq!(
            verdict.detail,
            "1 CPU pairs agree, bounds at most 400 ns wide"
        );

        let (verdict, why) = verdict_of(Ok(Report {
            pairs: vec![pair(-300, 500), pair(2_000, 2_800)],
        }));
        assert!(!verdict.passed);
        assert_eq!(verdict.detail, "CPUs (0, 3) are [1000, 1400] ns apart");
        assert_eq!(
            why.as_deref(),
            Some("the cross-CPU TSC check found CPUs (0, 3) are [1000, 1400] ns apart")
        );

        // Not measured: no verdict against the TSC, and no failover.
        let (verdict, why) = verdict_of(Err(SyncError::Frequency));
        assert!(!verdict.passed && verdict.detail.starts_with("not run: "));
        assert!(why.is_none());
        let (verdict, why) = verdict_of(Ok(Report { pairs: Vec::new() }));
        assert!(!verdict.passed && verdict.detail.starts_with("not run: "));
        assert!(why.is_none());
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the kernel's clocks and sleeps")]
    fn a_counter_that_jumps_is_replaced_by_the_kernel_clock_without_a_step_back() {
        let (clock, seen) = fail_over_after(Faulty::default(), |c| {
            c.jump.store(1_000_000_000, Ordering::Relaxed)
        });
        let why = clock
            .facts()
            .fallback
            .clone()
            .expect("the watchdog failed over");
        assert!(why.contains("ppm"), "{why}");
        assert_eq!(clock.engine().counter().name(), "CLOCK_MONOTONIC");
        assert_eq!(seen.steps_back, []);
        assert!(clock.engine().uptime() >= seen.last);
        assert_eq!(
            clock.stages[0].get().map(Timekeeper::windup),
            Some(crate::Windup::Retired)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads the kernel's clocks and sleeps")]
    fn a_counter_that_stops_is_replaced_by_the_kernel_clock_without_a_step_back() {
        let (clock, seen) = fail_over_after(Faulty::default(), |c| {
            // Stopped a little ahead of now, so that no read the reader is
            // making meanwhile is past it (which would be a step back).
            c.stopped_at.store(
                kernel_nanos(libc::CLOCK_MONOTONIC) + 1_000_000,
                Ordering::Relaxed,
            )
        });
        assert_eq!(seen.steps_back, []);
        let why = clock
            .facts()
            .fallback
            .clone()
            .expect("the watchdog failed over");
        // The steering interval in which it stopped shows a counter far too
        // slow; the next ones a stopped one: either is caught.
        assert!(why.contains("stopped") || why.contains("ppm"), "{why}");
        // The kernel's clock moves on where the stopped counter could not.
        let before = clock.engine().uptime();
        std::thread::sleep(Duration::from_millis(2));
        clock.maintain();
        assert!(clock.engine().uptime() > before.max(seen.last));
    }

    /// Reads behind the base clamp to the base (the engine's defence against a
    /// few cycles of skew), which here is one step back: to the time of the
    /// last windup. There time stands until the watchdog fails over, and the
    /// kernel's clock carries on from it.
    #[test]
    #[cfg_attr(miri, ignore = "reads the kernel's clocks and sleeps")]
    fn a_counter_that_goes_backwards_is_replaced_by_the_kernel_clock() {
        let (clock, seen) = fail_over_after(Faulty::default(), |c| {
            // Stopped a second in the past: behind every earlier read.
            c.stopped_at.store(
                kernel_nanos(libc::CLOCK_MONOTONIC) - 1_000_000_000,
                Ordering::Relaxed,
            )
        });
        let why = clock
            .facts()
            .fallback
            .clone()
            .expect("the watchdog failed over");
        assert!(why.contains("backwards"), "{why}");
        assert!(seen.steps_back.len() <= 1, "{:?}", seen.steps_back);
        assert!(clock.engine().uptime() >= seen.last);
    }
}
