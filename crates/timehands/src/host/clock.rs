//! The host clock: its state, its timekeepers (the kernel's clock it
//! starts on, the counter it moves to, the kernel's again on a failover),
//! how it is built, and what it keeps of its steering's findings. The steps
//! of its life are rooms of their own: the moves between timekeepers
//! (`handover.rs`), windups (`windup.rs`), the thread that keeps it
//! (`upkeep.rs`), the process's one clock and `fork()` (`process.rs`).

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::choice::kernel_frequency_source;
use super::choice::{Choice, Verdict};
use super::counter::HostCounter;
use super::published::{NOT_STARTED, READER, reader_timekeeper};
use super::stated_bound::StatedBound;
use super::wake::Wake;
use crate::engine::Writes;
use crate::engine::nanos::floor_nanos_signed;
use crate::host::brackets::{offset_on_running_clock, pair};
use crate::host::kernel_clocks::{KernelClock, KernelClocks, NtpState, SystemClocks};
use crate::host::steer::{Bound, Findings, Phase, Steering, tick_ns};
use crate::hw::KernelCounter;
use crate::os::LeapSecond;
use crate::{BinTime, Counter, Timekeeper};

/// How long a hands serves before a read finds a windup due (and how far
/// past its switch point it promises its rate): readers wind up, so this is
/// how often a program that reads all the time pays a windup (about a
/// microsecond: on Linux, an `adjtimex` asks the kernel its rate), and how
/// soon a rate change takes effect.
pub(crate) const WINDUP_INTERVAL: Duration = Duration::from_millis(5);

/// Whether `timekeeper` runs on the kernel's clock (which needs no watchdog).
#[cfg(test)]
pub(super) fn on_kernel_clock(timekeeper: &Timekeeper<HostCounter>) -> bool {
    matches!(timekeeper.counter(), HostCounter::Kernel(_))
}

/// What `info` reports of the counter choice.
#[derive(Clone)]
pub(super) struct Facts {
    pub(super) frequency_source: Cow<'static, str>,
    pub(super) verdicts: Vec<Verdict>,
    pub(super) fallback: Option<String>,
    /// What the operating system refused the clock (a thread, the NTP
    /// state), asked once and remembered.
    pub(super) refused: Vec<String>,
    /// Whether the counter was trusted on its own evidence (see
    /// `choice::Trust`): then the cross-CPU check must pass. Only a TSC
    /// is (the generic timer needs no check), hence the allowance.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(super) own_evidence: bool,
}

/// The timekeepers a clock can go through: the kernel's clock it starts on,
/// the hardware counter it moves to, and the kernel's clock again if that
/// counter goes wrong.
pub(super) const STAGES: usize = 3;

/// [`HostClock::choice`]: the counter is still to be chosen.
pub(super) const TO_CHOOSE: u8 = 0;
/// [`HostClock::choice`]: a thread is choosing it.
pub(super) const CHOOSING: u8 = 1;
/// [`HostClock::choice`]: the counter is chosen (and in use).
pub(super) const CHOSEN: u8 = 2;

/// The windup interval of the timekeeper the process's clock starts on, on
/// the kernel's clock, until the hardware counter takes over: short, so that
/// its promise (at most an interval and a lead ahead), where the hand-over
/// point falls, is near.
pub(super) const STARTUP_INTERVAL: Duration = Duration::from_micros(50);

/// The process-wide clock.
pub(crate) struct HostClock {
    /// The timekeepers in the order they took over (see [`STAGES`]).
    pub(super) stages: [OnceLock<Timekeeper<HostCounter>>; STAGES],
    /// The index of the timekeeper in use, set after it is.
    pub(super) stage: AtomicUsize,
    /// Where the move to the counter `choose` picks stands (see
    /// [`choose_counter`](HostClock::choose_counter)): [`TO_CHOOSE`],
    /// [`CHOOSING`] or [`CHOSEN`] (from the start, for a clock given its
    /// counter).
    pub(super) choice: AtomicU8,
    /// The upkeep thread: its state, the readers' demand, its handle (see
    /// `wake.rs`).
    pub(super) wake: Wake,
    /// The verdict of the cross-CPU check of the TSC, once done (set under
    /// the steering lock, so that a fork never copies it half set).
    pub(super) cross_cpu: OnceLock<Verdict>,
    pub(super) facts: Mutex<Facts>,
    /// The steering state; one steering at a time, by whoever winds up.
    /// Every step of the clock's life that must be seen whole is taken
    /// under it (see `process.rs`).
    pub(super) steering: Mutex<Steering>,
    /// The bound on |ours − CLOCK_MONOTONIC| as it grows from the last
    /// measurement (written under the steering lock, read without a lock).
    pub(super) bound: StatedBound,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC, in ns.
    pub(crate) boottime_offset: AtomicI64,
    /// The last measured offset, kernel − ours, in ns, for `info`.
    pub(crate) last_offset: AtomicI64,
    /// The bound on the error of the Realtime offset as recorded (half its
    /// bracket), in ns: what Realtime's accuracy adds to Monotonic's.
    pub(crate) realtime_uncertainty: AtomicU64,
    /// TAI − Monotonic, in ns: Realtime's offset as given to the
    /// timekeeper plus TAI − UTC as the kernel has it (0 for good once the
    /// kernel refused to say: `adjtimex` filtered by a sandbox, an OS whose
    /// NTP state is not read), in one word, so that a TAI read (Monotonic
    /// plus this) never sees one without the other; kept from the clock's
    /// build on, where Realtime's offset is first measured.
    pub(super) tai: AtomicI64,
    /// Whether readers check the coarse time against the kernel's coarse
    /// clock (see `read::checked_coarse_nanos`), rather than trust the
    /// upkeep thread to keep it: for good once the thread is refused, may
    /// not take a real-time priority, or was held up past a tick.
    pub(super) coarse_checked: AtomicBool,
    /// Whether the kernel refused its NTP state: not asked again.
    pub(super) ntp_refused: AtomicBool,
    /// The leap second the kernel last said it announced (a
    /// [`LeapSecond`] as its index), for `getres`.
    pub(super) leap: AtomicU8,
    /// Windups readers asked for (a read found its hands a windup interval
    /// old, or stood at their promise); one that finds another thread at it
    /// counts too.
    pub(super) reader_windups: AtomicU64,
    /// Reads that stood (see [`Info::standing_reads`](crate::Info)).
    pub(super) standing_reads: AtomicU64,
    /// The kernel's clocks this clock follows.
    pub(crate) kernel: &'static dyn KernelClocks,
    /// Whether this is the process's clock, which publishes its readers'
    /// word and coarse time (see `published.rs`); tests build others.
    pub(super) publishes: bool,
}

impl HostClock {
    /// A clock as the process's starts: on the kernel's CLOCK_MONOTONIC at
    /// first, which costs nothing to choose (CPUID traps to the hypervisor
    /// in a VM, some microseconds a leaf, and the clocksource is a file),
    /// until the upkeep thread moves it to the hardware counter.
    pub(super) fn start() -> HostClock {
        let startup = Choice {
            counter: HostCounter::Kernel(KernelCounter::monotonic()),
            frequency_source: kernel_frequency_source(),
            verdicts: Vec::new(),
            fallback: None,
            anchor: None,
            uncertainty_ppb: Some(0),
            own_evidence: None,
        };
        HostClock::build(startup, STARTUP_INTERVAL, &SystemClocks)
    }

    /// A clock on a test's `counter`, following `kernel`'s clocks (leaked,
    /// as the process's clock is static), with a frequency known to
    /// `uncertainty_ppb`.
    #[cfg(test)]
    pub(crate) fn on_test_counter(
        counter: std::sync::Arc<dyn Counter + Send + Sync>,
        kernel: &'static dyn KernelClocks,
        uncertainty_ppb: u64,
    ) -> &'static HostClock {
        let choice = Choice {
            counter: HostCounter::Test(counter),
            frequency_source: "the test".into(),
            verdicts: Vec::new(),
            fallback: None,
            anchor: None,
            uncertainty_ppb: Some(uncertainty_ppb),
            own_evidence: None,
        };
        HostClock::new(choice, kernel)
    }

    /// A clock on the counter `choice` made, which it keeps (but for a
    /// failover).
    #[cfg(test)]
    pub(super) fn new(choice: Choice, kernel: &'static dyn KernelClocks) -> &'static HostClock {
        let clock = HostClock::build(choice, WINDUP_INTERVAL, kernel);
        clock.choice.store(CHOSEN, Ordering::Release);
        Box::leak(Box::new(clock))
    }

    /// The clock on `choice`'s counter with windups every `interval`,
    /// following `kernel`'s clocks.
    pub(super) fn build(
        mut choice: Choice,
        interval: Duration,
        kernel: &'static dyn KernelClocks,
    ) -> HostClock {
        // The clock starts at CLOCK_MONOTONIC's time at a counter reading
        // paired with it, so that building the timekeeper (page faults on a
        // first touch cost microseconds here) is not an offset.
        let start = pair(kernel, || choice.counter.read());
        // On the kernel's own clock, the counter is CLOCK_MONOTONIC: the
        // clock starts on it exactly, as the reads the kernel answered while
        // it started did (see `read::kernel_read`), so that none of those
        // is later than a read of the clock after them.
        let on_kernel = matches!(choice.counter, HostCounter::Kernel(_));
        let before =
            BinTime::from_nanos(if on_kernel { start.count } else { start.kernel } as i128);
        let timekeeper = build_timekeeper(choice.counter, before, Some(start.count), interval)
            .unwrap_or_else(|refused| {
                // A hardware counter the engine refuses (firmware that left
                // CNTFRQ_EL0 at 0, say): the kernel's clock always works.
                choice.fallback = Some(format!("the hardware counter was refused: {refused}"));
                choice.uncertainty_ppb = Some(0);
                choice.anchor = None;
                kernel_timekeeper(before, None)
            });
        let steering = Steering::new(
            timekeeper.counter().frequency(),
            choice.uncertainty_ppb,
            choice.anchor,
        );
        let ppb = steering.rate_bound_ppb();
        let clock = HostClock {
            steering: Mutex::new(steering),
            stages: [OnceLock::from(timekeeper), OnceLock::new(), OnceLock::new()],
            stage: AtomicUsize::new(0),
            choice: AtomicU8::new(TO_CHOOSE),
            wake: Wake::new(),
            cross_cpu: OnceLock::new(),
            facts: Mutex::new(Facts {
                frequency_source: choice.frequency_source,
                verdicts: choice.verdicts,
                fallback: choice.fallback,
                refused: Vec::new(),
                own_evidence: choice.own_evidence.is_some(),
            }),
            bound: StatedBound::new(Bound {
                ns: 0,
                ppb,
                since: 0,
            }),
            boottime_offset: AtomicI64::new(0),
            last_offset: AtomicI64::new(0),
            realtime_uncertainty: AtomicU64::new(0),
            tai: AtomicI64::new(0),
            coarse_checked: AtomicBool::new(false),
            ntp_refused: AtomicBool::new(false),
            leap: AtomicU8::new(0),
            reader_windups: AtomicU64::new(0),
            standing_reads: AtomicU64::new(0),
            kernel,
            publishes: false,
        };
        let offsets = clock.steering().follow_offsets(kernel);
        clock.keep(&mut clock.timekeeper().writes(), offsets);
        // An error bound from the start (some hundreds of ns of brackets),
        // not a zero that nothing measured: the measurement even if its
        // reads may have stood (its bound then states the stand).
        let (offset, width) = offset_on_running_clock(
            clock.timekeeper(),
            || {
                clock
                    .timekeeper()
                    .writes()
                    .windup_following(|| kernel.reference());
            },
            kernel,
            KernelClock::Monotonic,
            3,
        )
        .unwrap_or_else(|stood| stood);
        clock.keep_phase(Phase {
            offset: offset as i64,
            unrun: 0,
            width,
            tick: tick_ns(clock.timekeeper()),
            ppb,
        });
        clock
    }

    /// The timekeeper in use.
    pub(crate) fn timekeeper(&self) -> &Timekeeper<HostCounter> {
        let stage = self.stage.load(Ordering::Acquire);
        // Each stage is set before the index names it.
        self.stages[stage].get().expect("the stage in use is set")
    }

    /// What `info` reports of the counter choice, whoever panicked holding it.
    pub(super) fn facts(&self) -> std::sync::MutexGuard<'_, Facts> {
        self.facts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bound on |ours − CLOCK_MONOTONIC| now, in ns, once the kernel
    /// was asked whether it changed its rate since the last windup (unless
    /// another thread steers: it asks, and states the bound a moment on). A
    /// change only a measurement finds is left to the windups, whose
    /// baseline it needs. Nothing here waits (a signal handler may ask, on
    /// a thread it interrupted in a windup): where a windup holds the
    /// writer lock, a change the kernel says is not followed now but
    /// counted in the bound stated.
    pub(crate) fn accuracy_nanos(&self) -> u64 {
        let Some(mut steering) = self.try_steering() else {
            return self.stated_bound();
        };
        let ntp = self.kernel_ntp();
        let said_rate = ntp.as_ref().and_then(|ntp| ntp.rate_ppb);
        match self.timekeeper().try_writes() {
            Some(mut writes) => {
                self.follow_rate_change(&mut steering, &mut writes, ntp.as_ref(), false);
                drop(writes);
                self.stated_bound()
            }
            None => {
                let now = self.timekeeper().uptime_nanos();
                let bound = self.bound.load();
                let kernel_now = self.kernel.nanos(KernelClock::Monotonic);
                match steering.unfollowed_change(said_rate, kernel_now) {
                    Some(change) => bound.after(change, now).at(now),
                    None => bound.at(now),
                }
            }
        }
    }

    /// The bound as last stated, in ns now.
    pub(super) fn stated_bound(&self) -> u64 {
        self.bound.load().at(self.timekeeper().uptime_nanos())
    }

    /// The Monotonic time CLOCK_MONOTONIC vouches for at `kernel` (ns), a
    /// read of it: that less the stated bound, and the two ns a read of
    /// ours and one of the kernel's each round down (as `getres` states),
    /// so that no `now()` after it reads earlier. What a read or the coarse
    /// time falls back on where a windup is held up elsewhere.
    pub(super) fn vouched(&self, kernel: u64) -> u64 {
        kernel.saturating_sub(self.stated_bound().saturating_add(2))
    }

    /// Keeps the kernel's offsets that `findings` say moved (Realtime's
    /// through `writes`, the writer lock's).
    pub(super) fn keep(&self, writes: &mut Writes<'_, HostCounter>, findings: Findings) {
        if let Some(realtime) = findings.realtime {
            writes.set_boottime(BinTime::from_nanos(realtime.ns as i128));
            self.realtime_uncertainty
                .store(realtime.width.div_ceil(2), Ordering::Relaxed);
            // A leap second moves Realtime and TAI − UTC together: follow
            // both in one store, so that TAI does not step.
            self.follow_tai(realtime.ns);
        }
        if let Some(boottime) = findings.boottime {
            self.boottime_offset.store(boottime, Ordering::Relaxed);
        }
    }

    /// Keeps a measured phase, and the error bound it gives from now on (the
    /// offset plus half its bracket, growing at the rate's uncertainty), for
    /// `info` and `getres`.
    pub(super) fn keep_phase(&self, phase: Phase) {
        self.last_offset.store(phase.offset, Ordering::Relaxed);
        self.bound
            .store(phase.bound(self.timekeeper().uptime_nanos()));
    }

    /// The steering, whoever panicked holding it (the steering keeps no
    /// invariant a panic could break halfway).
    pub(super) fn steering(&self) -> std::sync::MutexGuard<'_, Steering> {
        self.steering.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The steering, unless another thread is at it (whoever panicked
    /// holding it: a panic under the lock must not end steering, nor the
    /// watchdog).
    pub(super) fn try_steering(&self) -> Option<std::sync::MutexGuard<'_, Steering>> {
        match self.steering.try_lock() {
            Ok(steering) => Some(steering),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The timekeeper the readers' word names (through it, so that a reader
    /// that sees a value published from it and then reads `now()` reads the
    /// same timekeeper or a later one).
    pub(super) fn readers_timekeeper(&self) -> &Timekeeper<HostCounter> {
        match READER.load(Ordering::Acquire) {
            NOT_STARTED => self.timekeeper(),
            word => reader_timekeeper(word),
        }
    }

    /// Follows TAI, with `realtime_ns` the Realtime − Monotonic offset the
    /// timekeeper has, and TAI − UTC, which the kernel keeps in whole
    /// seconds (an NTP daemon sets it; 0 otherwise), from the kernel's NTP
    /// state (see [`kernel_ntp`](HostClock::kernel_ntp)).
    pub(super) fn follow_tai(&self, realtime_ns: i64) {
        let ntp = self.kernel_ntp();
        self.keep_tai(realtime_ns, ntp.map_or(0, |ntp| ntp.tai_offset_s));
    }

    /// Keeps TAI − Monotonic: `realtime_ns`, Realtime − Monotonic as the
    /// timekeeper has it, plus `tai_offset_s`, TAI − UTC.
    /// A new value within the Realtime offset's measurement of the old is
    /// no move of TAI's (a leap second moves Realtime and TAI − UTC by a
    /// second each, remeasured): the old stays, so TAI neither steps nor
    /// jitters back.
    pub(super) fn keep_tai(&self, realtime_ns: i64, tai_offset_s: i32) {
        let tai = realtime_ns.saturating_add(i64::from(tai_offset_s) * 1_000_000_000);
        let width = 2 * self.realtime_uncertainty.load(Ordering::Relaxed) as i64 + 2;
        // 0 until the build keeps the first (Realtime − Monotonic is the
        // Unix time of the boot, never 0).
        let kept = self.tai.load(Ordering::Relaxed);
        if kept == 0 || kept.abs_diff(tai) > width as u64 {
            self.tai.store(tai, Ordering::Relaxed);
        }
    }

    /// Realtime − Monotonic as the timekeeper in use has it, in ns.
    pub(super) fn realtime_offset_ns(&self) -> i64 {
        floor_nanos_signed(self.timekeeper().boottime()).unwrap_or(0)
    }

    /// The kernel's NTP state. A kernel that refuses (`adjtimex` filtered by
    /// a sandbox, an OS without an NTP state) is asked once: TAI − UTC is 0
    /// from then on, as the kernel's CLOCK_TAI is where nothing set it, and
    /// `info` says so ([`ntp_refusal`](HostClock::ntp_refusal)). Nothing
    /// here allocates or waits: a read's windup asks.
    pub(super) fn kernel_ntp(&self) -> Option<NtpState> {
        if self.ntp_refused.load(Ordering::Relaxed) {
            return None;
        }
        super::fork_points::point("kernel: asking the NTP state");
        match self.kernel.ntp() {
            Ok(ntp) => {
                self.leap.store(ntp.leap as u8, Ordering::Relaxed);
                // TAI − UTC in step with the Realtime the steering measures.
                let tai_offset_s = self.kernel.tai_minus_utc().unwrap_or(ntp.tai_offset_s);
                Some(NtpState {
                    tai_offset_s,
                    ..ntp
                })
            }
            Err(_) => {
                self.ntp_refused.store(true, Ordering::Relaxed);
                None
            }
        }
    }

    /// Whether readers check the coarse time themselves (see
    /// [`HostClock::coarse_checked`]).
    #[inline]
    pub(super) fn coarse_checked(&self) -> bool {
        self.coarse_checked.load(Ordering::Acquire)
    }

    /// The leap second the kernel said it announced when last asked.
    pub(super) fn leap(&self) -> LeapSecond {
        match self.leap.load(Ordering::Relaxed) {
            1 => LeapSecond::Insert,
            2 => LeapSecond::Delete,
            3 => LeapSecond::InProgress,
            _ => LeapSecond::None,
        }
    }

    /// What `info` says of a refused NTP state: the refusal, asked again
    /// (the kernel refuses the same way each time).
    pub(super) fn ntp_refusal(&self) -> Option<String> {
        if !self.ntp_refused.load(Ordering::Relaxed) {
            return None;
        }
        let e = self.kernel.ntp().err()?;
        Some(format!(
            "the NTP state: {e}; TAI − UTC is taken as 0, as Linux's CLOCK_TAI is unless an NTP daemon sets it"
        ))
    }

    /// Remembers what the operating system refused the clock, for `info`.
    pub(super) fn refused(&self, what: String) {
        self.facts().refused.push(what);
    }

    /// TAI − Monotonic in ns (see [`HostClock::tai`]).
    #[inline]
    pub(crate) fn tai(&self) -> i64 {
        self.tai.load(Ordering::Relaxed)
    }
}

/// A timekeeper for the host clock on `counter`, winding up every
/// `interval`, starting at `uptime` at the counter reading `count` (now, if
/// `None`).
pub(super) fn build_timekeeper(
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
pub(super) fn kernel_timekeeper(uptime: BinTime, count: Option<u64>) -> Timekeeper<HostCounter> {
    build_timekeeper(
        HostCounter::Kernel(KernelCounter::monotonic()),
        uptime,
        count,
        WINDUP_INTERVAL,
    )
    .expect("a 1 GHz, 64-bit counter with a 5 ms windup interval is valid")
}
