//! The host clock: its state, its timekeepers (the kernel's clock it
//! starts on, the counter it moves to, the kernel's again on a failover),
//! how it is built, and what it keeps of its steering's findings. The steps
//! of its life are rooms of their own: the moves between timekeepers
//! (`handover.rs`), windups and the choice they make (`windup.rs`), the
//! process's one clock and `fork()` (`process.rs`).
//!
//! No thread keeps it: every step of its life is taken by whichever read
//! finds it due (a windup, a steering, the counter's choice, a failover),
//! as the kernel's tick takes them, so every step is one a signal handler
//! may take: it waits for no lock (each is tried), allocates nothing
//! (what `info` reports is kept in fixed-size text, `text.rs`), and starts
//! no thread.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use super::choice::kernel_frequency_source;
use super::choice::{Choice, KeptVerdicts, Verdict};
use super::coarse_limit::coarse_slack_until;
use super::counter::HostCounter;
use super::life::{Facts, Life};
use super::published::{COARSE, READER, own_timekeeper};
use super::stated_bound::StatedBound;
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

/// How long after its last windup the clock counts as stale to a coarse
/// read, or `getres`, which then wind it up: two windup intervals, past
/// the promise of its hands, where a precise read would have stood.
pub(super) const STALE: Duration = Duration::from_millis(2 * WINDUP_INTERVAL.as_millis() as u64);

/// Whether `timekeeper` runs on the kernel's clock (which needs no watchdog).
#[cfg(test)]
pub(super) fn on_kernel_clock(timekeeper: &Timekeeper<HostCounter>) -> bool {
    matches!(timekeeper.counter(), HostCounter::Kernel(_))
}

/// The timekeepers a clock can go through: the kernel's clock it starts on,
/// the kernel's again where the TSC waits for the cross-CPU check (see
/// [`check_across_cpus`](crate::check_across_cpus)), the hardware counter
/// it moves to, and the kernel's clock again if that counter goes wrong.
pub(super) const STAGES: usize = 4;

/// [`HostClock::choice`]: the counter is still to be chosen.
pub(super) const TO_CHOOSE: u8 = 0;
/// [`HostClock::choice`]: the chosen counter is being measured, or waits
/// for its point to take over ([`Life`]).
pub(super) const SETTLING: u8 = 1;
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
    /// `windup.rs`): [`TO_CHOOSE`], [`SETTLING`] or [`CHOSEN`] (from the
    /// start, for a clock given its counter).
    pub(super) choice: AtomicU8,
    /// The verdict of the cross-CPU check of the TSC, once a program asked
    /// for it (set under the steering lock, so that a fork never copies it
    /// half set).
    pub(super) cross_cpu: OnceLock<Verdict>,
    pub(super) life: Mutex<Life>,
    /// The steering state; one steering at a time, by whoever winds up.
    /// Every step of the clock's life that must be seen whole is taken
    /// under it (see `process.rs`).
    pub(super) steering: Mutex<Steering>,
    /// The bound on |ours − CLOCK_MONOTONIC| as it grows from the last
    /// measurement (written under the steering lock, read without a lock).
    pub(super) bound: StatedBound,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC, in ns.
    pub(crate) boottime_offset: AtomicI64,
    /// The bound on its error as recorded (half its bracket), in ns: what
    /// Boottime's accuracy adds to Monotonic's.
    pub(crate) boottime_uncertainty: AtomicU64,
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
    /// word and until when coarse reads may trust the kernel's coarse
    /// clock (see `published.rs`); tests build others.
    pub(super) publishes: bool,
}

impl HostClock {
    /// A clock as the process's starts: on the kernel's CLOCK_MONOTONIC at
    /// first, which costs nothing to choose (CPUID traps to the hypervisor
    /// in a VM, some microseconds a leaf, and the clocksource is a file),
    /// until a windup moves it to the hardware counter.
    pub(super) fn start() -> HostClock {
        let startup = Choice {
            counter: HostCounter::Kernel(KernelCounter::monotonic()),
            frequency_source: kernel_frequency_source(),
            verdicts: KeptVerdicts::default(),
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
            verdicts: KeptVerdicts::default(),
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
        let timekeeper =
            build_timekeeper(choice.counter.clone(), before, Some(start.count), interval)
                .unwrap_or_else(|refused| {
                    // A hardware counter the engine refuses (firmware that left
                    // CNTFRQ_EL0 at 0, say): the kernel's clock always works.
                    choice.fallback = Some(super::text::text!(
                        "the hardware counter was refused: {refused}"
                    ));
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
            stages: [
                OnceLock::from(timekeeper),
                OnceLock::new(),
                OnceLock::new(),
                OnceLock::new(),
            ],
            stage: AtomicUsize::new(0),
            choice: AtomicU8::new(TO_CHOOSE),
            cross_cpu: OnceLock::new(),
            life: Mutex::new(Life {
                facts: Facts::of(&choice),
                settling: None,
                pending: None,
                awaits_check: false,
            }),
            bound: StatedBound::new(Bound {
                ns: 0,
                ppb,
                since: 0,
            }),
            boottime_offset: AtomicI64::new(0),
            boottime_uncertainty: AtomicU64::new(0),
            last_offset: AtomicI64::new(0),
            realtime_uncertainty: AtomicU64::new(0),
            tai: AtomicI64::new(0),
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

    /// What the steps of the clock's life keep, whoever panicked holding
    /// it: to be taken under the steering lock only (see [`Life`]).
    pub(super) fn life(&self) -> MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `info` reports of the counter choice, as the steps of the
    /// clock's life left it (under the steering lock, which this waits for:
    /// not for reads).
    pub(super) fn facts(&self) -> Facts {
        let _steering = self.steering();
        self.life().facts
    }

    /// States `bound` as the error bound from now on, and until when coarse
    /// reads may trust the kernel's coarse clock under it (published first,
    /// so that no coarse read trusts it past what the new bound allows).
    pub(super) fn state_bound(&self, bound: Bound) {
        self.publish_coarse_limit(&bound);
        self.bound.store(bound);
    }

    /// Publishes until when a coarse read may take the kernel's coarse
    /// time less the slack: while `bound` allows it, and no later than
    /// [`STALE`] past the last windup, so that a coarse read past that
    /// goes the long way, which winds up (a program that reads no precise
    /// time is steered all the same, and a counter that stopped is found).
    /// A limit brought forward first stops the common way, then leaves the
    /// floor of the long way where the common way may have got to: no
    /// coarse read after it is earlier than one before. Under the steering
    /// lock, so that publications come in order.
    pub(super) fn publish_coarse_limit(&self, bound: &Bound) {
        if !self.publishes {
            return;
        }
        let readers = self.readers_timekeeper();
        let windup = floor_nanos_signed(readers.uptime_coarse()).unwrap_or(0);
        let stale = (windup as u64).saturating_add(STALE.as_nanos() as u64);
        // Realtime's coarse read adds the error of its offset.
        let realtime = Bound {
            ns: bound
                .ns
                .saturating_add(self.realtime_uncertainty.load(Ordering::Relaxed)),
            ..*bound
        };
        let limit = coarse_slack_until(&realtime).min(stale);
        COARSE.publish(limit, readers.realtime_offset_nanos(), || {
            self.kernel.nanos(KernelClock::MonotonicCoarse)
        });
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
            self.boottime_uncertainty
                .store(boottime.width.div_ceil(2), Ordering::Relaxed);
            self.boottime_offset.store(boottime.ns, Ordering::Relaxed);
        }
    }

    /// Keeps a measured phase, and the error bound it gives from now on (the
    /// offset plus half its bracket, growing at the rate's uncertainty), for
    /// `info` and `getres`.
    pub(super) fn keep_phase(&self, phase: Phase) {
        self.last_offset.store(phase.offset, Ordering::Relaxed);
        self.state_bound(phase.bound(self.timekeeper().uptime_nanos()));
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
        own_timekeeper(READER.load(Ordering::Acquire)).unwrap_or_else(|| self.timekeeper())
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
                self.leap.store(ntp.leap.code(), Ordering::Relaxed);
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

    /// The leap second the kernel said it announced when last asked.
    pub(super) fn leap(&self) -> LeapSecond {
        LeapSecond::from_code(u64::from(self.leap.load(Ordering::Relaxed)))
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
