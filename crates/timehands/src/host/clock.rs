//! The host clock's life: its timekeepers (the kernel's clock it starts on,
//! the counter it moves to, the kernel's again on a failover), the moves
//! between them, its windups and what its steering found.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::choice::Verdict;
use super::choice::{Choice, choose, kernel_frequency_source, settle};
use super::counter::HostCounter;
use super::fork;
use super::published::{
    COARSE_NANOS, NOT_STARTED, READER, REALTIME_COARSE, SECOND_HINTS, reader_timekeeper,
    reader_word, realtime_coarse_word,
};
use super::wake::{Need, Wake};
use crate::engine::nanos::floor_nanos;
use crate::host::brackets::{offset_to_kernel, pair};
use crate::host::kernel_clocks::{KernelClock, KernelClocks, SystemClocks};
use crate::host::steer::{Bound, Findings, Phase, Steering};
use crate::hw::KernelCounter;
use crate::{BinTime, Counter, Timekeeper};

/// How long a hands serves before a read finds a windup due (and how far
/// past its switch point it promises its rate): readers wind up, so this is
/// how often a program that reads all the time pays a windup (some hundred
/// nanoseconds), and how soon a rate change the steering makes takes effect.
pub(crate) const WINDUP_INTERVAL: Duration = Duration::from_millis(5);

/// Whether `timekeeper` runs on the kernel's clock (which needs no watchdog).
#[cfg(test)]
pub(super) fn on_kernel_clock(timekeeper: &Timekeeper<HostCounter>) -> bool {
    matches!(timekeeper.counter(), HostCounter::Kernel(_))
}

/// What `info` reports of the counter choice.
#[derive(Clone)]
pub(super) struct Facts {
    pub(super) frequency_source: String,
    pub(super) verdicts: Vec<Verdict>,
    pub(super) fallback: Option<String>,
    /// What the operating system refused the clock (a thread, the NTP
    /// state), asked once and remembered.
    pub(super) refused: Vec<String>,
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

/// How many times (50 µs apart) a thread waits for another's counter choice.
pub(super) const CHOICE_WAITS: u32 = 2_000;

/// Puts a choice that is being made back to be made, unless forgotten: a
/// choice that panicked is made again, rather than waited for for ever.
pub(super) struct ChoiceUndo<'a>(&'a AtomicU8);

impl Drop for ChoiceUndo<'_> {
    fn drop(&mut self) {
        self.0.store(TO_CHOOSE, Ordering::Release);
    }
}

/// The windup interval of the timekeeper the process's clock starts on, on
/// the kernel's clock, until the hardware counter takes over: short, so that
/// its promise (at most an interval and a lead ahead), where the hand-over
/// point falls, is near.
pub(super) const STARTUP_INTERVAL: Duration = Duration::from_micros(50);

/// [`HostClock::tai_offset`] before it is read: not read at startup, which
/// must stay cheap, as few programs read TAI.
pub(super) const TAI_UNREAD: i64 = i64::MIN;

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
    /// under it (see `fork.rs`).
    pub(super) steering: Mutex<Steering>,
    /// The bound on |ours − CLOCK_MONOTONIC| as it grows from the last
    /// measurement (written under the steering lock).
    pub(super) bound: Mutex<Bound>,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC, in ns.
    pub(crate) boottime_offset: AtomicI64,
    /// The last measured offset, kernel − ours, in ns, for `info`.
    pub(crate) last_offset: AtomicI64,
    /// The bound on the error of the Realtime offset as recorded (half its
    /// bracket), in ns: what Realtime's accuracy adds to Monotonic's.
    pub(crate) realtime_uncertainty: AtomicU64,
    /// TAI − UTC, in seconds, as the kernel has it; [`TAI_UNREAD`] until
    /// the first read of TAI or the first steering; 0 for good once the
    /// kernel refused to say (`adjtimex` filtered by a sandbox, an OS whose
    /// NTP state is not read).
    pub(super) tai_offset: AtomicI64,
    /// Whether the kernel refused its NTP state: not asked again.
    pub(super) ntp_refused: AtomicBool,
    /// Windups readers made: the upkeep thread was late, or is not running.
    pub(super) reader_windups: AtomicU64,
    /// Reads that stood at their hands' promise and had to wait for a windup.
    pub(super) standing_reads: AtomicU64,
    /// The kernel's clocks this clock follows.
    pub(crate) kernel: &'static dyn KernelClocks,
}

impl HostClock {
    /// The process's clock: on the kernel's CLOCK_MONOTONIC at first, which
    /// costs nothing to choose (CPUID traps to the hypervisor in a VM, some
    /// microseconds a leaf, and the clocksource is a file), until the
    /// upkeep thread moves it to the hardware counter.
    pub(super) fn start() -> HostClock {
        // Registered before `main` where the platform allows (see fork.rs).
        fork::register();
        let startup = Choice {
            counter: HostCounter::Kernel(KernelCounter::monotonic()),
            frequency_source: kernel_frequency_source(),
            verdicts: Vec::new(),
            fallback: None,
            anchor: None,
            uncertainty_ppb: Some(0),
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
            frequency_source: "the test".to_string(),
            verdicts: Vec::new(),
            fallback: None,
            anchor: None,
            uncertainty_ppb: Some(uncertainty_ppb),
        };
        Box::leak(Box::new(HostClock::new(choice, kernel)))
    }

    /// A clock on the counter `choice` made, which it keeps (but for a
    /// failover).
    #[cfg(test)]
    pub(super) fn new(choice: Choice, kernel: &'static dyn KernelClocks) -> HostClock {
        let clock = HostClock::build(choice, WINDUP_INTERVAL, kernel);
        clock.choice.store(CHOSEN, Ordering::Release);
        clock
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
        let before = BinTime::from_nanos(start.kernel as i128);
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
            }),
            bound: Mutex::new(Bound {
                ns: 0,
                ppb,
                since: 0,
            }),
            boottime_offset: AtomicI64::new(0),
            last_offset: AtomicI64::new(0),
            realtime_uncertainty: AtomicU64::new(0),
            tai_offset: AtomicI64::new(TAI_UNREAD),
            ntp_refused: AtomicBool::new(false),
            reader_windups: AtomicU64::new(0),
            standing_reads: AtomicU64::new(0),
            kernel,
        };
        let offsets = clock.steering().follow_offsets(kernel);
        clock.keep(offsets);
        // An error bound from the start (some hundreds of ns of brackets),
        // not a zero that nothing measured.
        let (offset, width) =
            offset_to_kernel(clock.timekeeper(), kernel, KernelClock::Monotonic, 3);
        clock.keep_phase(Phase {
            offset: offset as i64,
            unrun: 0,
            width,
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

    /// Moves the clock, once, from the kernel's clock it starts on to the
    /// counter `choose` picks (the TSC, CNTVCT_EL0; or stays, with the reason
    /// in `info`). Off the first read, which must stay cheap: the upkeep
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
        let choice = settle(choose());
        fork::point("choice: made, not handed over");
        let hz = choice.counter.frequency();
        let kept = Facts {
            frequency_source: choice.frequency_source,
            verdicts: choice.verdicts,
            fallback: choice.fallback,
            refused: Vec::new(),
        };
        let mut steering = self.steering();
        let chosen = Steering::new(hz, choice.uncertainty_ppb, choice.anchor);
        // The kernel's clock too is handed over, to a timekeeper that winds
        // up every WINDUP_INTERVAL rather than the startup one's interval.
        let facts = match self.hand_over(choice.counter, true, chosen.rate_bound_ppb()) {
            Ok(_) => {
                *steering = chosen;
                kept
            }
            // A hardware counter the engine refuses (firmware that left
            // CNTFRQ_EL0 at 0, say): the kernel's clock.
            Err(refused) => {
                self.hand_over(HostCounter::Kernel(KernelCounter::monotonic()), true, 0)
                    .expect("a 1 GHz, 64-bit counter with a 1 ms windup interval is valid");
                *steering = Steering::new(1_000_000_000, Some(0), None);
                Facts {
                    frequency_source: kernel_frequency_source(),
                    fallback: Some(format!("the hardware counter was refused: {refused}")),
                    ..kept
                }
            }
        };
        let offsets = steering.follow_offsets(self.kernel);
        self.keep(offsets);
        let mut kept = self.facts();
        // What the sandbox refused stays known.
        *kept = Facts {
            refused: std::mem::take(&mut kept.refused),
            ..facts
        };
        drop(kept);
        std::mem::forget(undo);
        self.choice.store(CHOSEN, Ordering::Release);
    }

    /// What `info` reports of the counter choice, whoever panicked holding it.
    pub(super) fn facts(&self) -> std::sync::MutexGuard<'_, Facts> {
        self.facts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The error bound's lock, whoever panicked holding it.
    pub(super) fn bound_lock(&self) -> std::sync::MutexGuard<'_, Bound> {
        self.bound.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bound on |ours − CLOCK_MONOTONIC| now, in ns.
    pub(crate) fn accuracy_nanos(&self) -> u64 {
        let bound = *self.bound_lock();
        bound.at(self.timekeeper().uptime_nanos())
    }

    /// Retires the timekeeper in use for one on `counter` that starts where
    /// it stopped, and moves the readers to it; returns the uptime the
    /// successor starts at. The
    /// retire point lies up to two windup intervals ahead of now (see
    /// [`Timekeeper::retire`]): the successor starts at the count where
    /// CLOCK_MONOTONIC reaches it, and stands at it until then, rather than
    /// running ahead of CLOCK_MONOTONIC by as much (or at CLOCK_MONOTONIC, if
    /// this thread was preempted past that point). With `wait`, the readers move only then
    /// (a spin of at most two intervals, for a thread that can afford it):
    /// until then they read the retired timekeeper, which is right up to
    /// that point, so that no read is ahead of CLOCK_MONOTONIC. The error
    /// bound starts again from the successor's start, growing at `ppb`, the
    /// new counter's rate uncertainty.
    ///
    /// Called with the steering lock held: a fork waits for the whole of it,
    /// so that no child has a retired timekeeper and no successor. Nothing
    /// changes if the engine refuses `counter`, or past the last stage.
    pub(super) fn hand_over(
        &self,
        counter: HostCounter,
        wait: bool,
        ppb: u64,
    ) -> Result<BinTime, crate::Error> {
        let stage = self.stage.load(Ordering::Acquire);
        if stage + 1 == STAGES {
            return Ok(self.timekeeper().uptime());
        }
        // The engine's checks of the counter, before anything is retired.
        Timekeeper::builder(&counter)
            .windup_interval(WINDUP_INTERVAL)
            .build()?;
        let current = self.timekeeper();
        // Wound up against CLOCK_MONOTONIC first: a counter that ran through a
        // suspend since the last windup would otherwise carry the gap into
        // the retire point (retire() winds up with no reference).
        current.windup_following(|| {
            BinTime::from_nanos(self.kernel.nanos(KernelClock::Monotonic) as i128)
        });
        let retired_at = current.retire();
        fork::point("hand-over: retired, no successor");
        // The successor starts at the retire point, at the count where
        // CLOCK_MONOTONIC will be there; or, where it is past it already (this
        // thread was preempted since the retirement), at CLOCK_MONOTONIC now:
        // reads stood meanwhile, and time moves on from where they stood.
        let start = pair(self.kernel, || counter.read());
        let reference = BinTime::from_nanos(start.kernel as i128);
        let begins = retired_at.max(reference);
        let ahead = floor_nanos(begins.saturating_sub(reference));
        let hz = counter.frequency() as u128;
        let ahead_counts = (ahead as u128 * hz).div_ceil(1_000_000_000);
        let due = start.count.wrapping_add(ahead_counts as u64) & counter.mask();
        // The successor's error there: half the pair's bracket, a count's
        // rounding, and the new rate's error over the counts ahead.
        let bound = Bound {
            ns: ((start.width as u128 * 1_000_000_000).div_ceil(2 * hz)
                + 1_000_000_000u128.div_ceil(hz)
                + (ahead as u128 * ppb as u128).div_ceil(1_000_000_000)) as u64,
            ppb,
            since: floor_nanos(begins),
        };
        let successor = build_timekeeper(counter, begins, Some(due), WINDUP_INTERVAL)
            .expect("the counter passed the timekeeper's checks above");
        // Realtime carries on: the retired timekeeper's offset, until the
        // steering re-reads the kernel's.
        successor.set_boottime(current.boottime());
        // Until the readers move, they read the retired timekeeper: the
        // bound covers both.
        {
            let mut kept = self.bound_lock();
            let now = floor_nanos(current.uptime());
            *kept = Bound {
                ns: bound.ns.max(kept.at(now)),
                ..bound
            };
        }
        let _ = self.stages[stage + 1].set(successor);
        fork::point("hand-over: successor set, readers not moved");
        let successor = self.stages[stage + 1].get().expect("set above");
        // Reads of the retired timekeeper stand at the retire point from
        // `due` on: the readers move as soon as it comes, nothing between.
        if wait {
            let counter = successor.counter();
            while counter.read().wrapping_sub(due) & counter.mask() > counter.mask() / 2 {
                std::hint::spin_loop();
            }
        }
        // Readers of the process's clock move to the successor before
        // anything (a coarse value) of it is published.
        if let Some(clock) = self.as_process_clock() {
            let successor = clock.stages[stage + 1].get().expect("set above");
            READER.store(reader_word(successor), Ordering::Release);
        }
        self.stage.store(stage + 1, Ordering::Release);
        Ok(begins)
    }

    /// Retires the hardware counter's timekeeper for one on CLOCK_MONOTONIC,
    /// because of `why` (the steering's watchdog, or the cross-CPU check),
    /// and steers that from now on with `steering`, the steering lock's;
    /// does nothing on the kernel's clock.
    pub(super) fn fail_over(&self, steering: &mut Steering, why: String) {
        if matches!(self.timekeeper().counter(), HostCounter::Kernel(_)) {
            return;
        }
        let retired_at = self
            .hand_over(HostCounter::Kernel(KernelCounter::monotonic()), false, 0)
            .expect("a 1 GHz, 64-bit counter with a 1 ms windup interval is valid");
        let mut facts = self.facts();
        facts.frequency_source = kernel_frequency_source();
        facts.fallback = Some(format!(
            "{why}: {} took over at {retired_at} s",
            KernelClock::Monotonic.name()
        ));
        drop(facts);
        // The kernel's counter counts nanoseconds exactly; Realtime and
        // Boottime are given to the new timekeeper afresh.
        *steering = Steering::new(1_000_000_000, Some(0), None);
        let offsets = steering.follow_offsets(self.kernel);
        self.keep(offsets);
    }

    /// Keeps what a steering found: the kernel's offsets (Realtime's given
    /// to the timekeeper), the phase for `info` and `getres`, TAI − UTC at
    /// each steering; and fails over from a counter the watchdog found
    /// misbehaving.
    fn apply(&self, steering: &mut Steering, findings: Findings) {
        let why = findings.misbehaviour.clone();
        if let Some(phase) = findings.phase {
            self.keep_phase(phase);
            self.follow_tai();
        }
        self.keep(findings);
        if let Some(why) = why {
            self.fail_over(steering, why);
        }
    }

    /// Keeps the kernel's offsets that `findings` say moved.
    fn keep(&self, findings: Findings) {
        if let Some(realtime) = findings.realtime {
            self.timekeeper()
                .set_boottime(BinTime::from_nanos(realtime.ns as i128));
            self.realtime_uncertainty
                .store(realtime.width.div_ceil(2), Ordering::Relaxed);
            // A leap second moves Realtime and TAI − UTC together: follow
            // both in the same windup, so that TAI does not step.
            self.follow_tai();
        }
        if let Some(boottime) = findings.boottime {
            self.boottime_offset.store(boottime, Ordering::Relaxed);
        }
    }

    /// Keeps a measured phase, and the error bound it gives from now on (the
    /// offset plus half its bracket, growing at the rate's uncertainty), for
    /// `info` and `getres`.
    fn keep_phase(&self, phase: Phase) {
        self.last_offset.store(phase.offset, Ordering::Relaxed);
        *self.bound_lock() = phase.bound(self.timekeeper().uptime_nanos());
    }

    /// The steering, whoever panicked holding it (the steering keeps no
    /// invariant a panic could break halfway).
    pub(super) fn steering(&self) -> std::sync::MutexGuard<'_, Steering> {
        self.steering.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a reader does when the clock is due: winds it up (and steers,
    /// when a steering is due), and says that precise reads come, which
    /// starts or wakes the upkeep thread when it is not running (see
    /// `upkeep.rs`). Out of line, so that readers do not carry its frame.
    #[cold]
    #[inline(never)]
    pub(super) fn windup_from_reader(&'static self) {
        self.reader_windups.fetch_add(1, Ordering::Relaxed);
        self.windup();
        self.need_upkeep(Need::Precise);
    }

    /// Winds up, then steers when a steering is due (its changes take
    /// effect from the next windup on); returns at once if another thread is
    /// at it. The windup comes first so that the steering measures a clock
    /// that stands nowhere (reads past the promise stand until a windup).
    pub(crate) fn windup(&self) {
        self.windup_unsteered();
        self.steer();
    }

    /// Winds up, without a steering: the upkeep thread's ticks, which keep
    /// the coarse time fresh and steer only now and then.
    pub(super) fn windup_unsteered(&self) {
        // CLOCK_MONOTONIC is our uptime's reference: a counter that ran
        // through a suspend that it did not count resumes from it.
        self.timekeeper().windup_following(|| {
            BinTime::from_nanos(self.kernel.nanos(KernelClock::Monotonic) as i128)
        });
        fork::point("windup: wound up, not steered");
    }

    /// Steers when a steering is due (its changes take effect from the next
    /// windup on), unless another thread is at it.
    fn steer(&self) {
        let steering = match self.steering.try_lock() {
            Ok(steering) => Some(steering),
            // A panic under the lock must not end steering (and the watchdog).
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(mut steering) = steering {
            let findings = steering.steer(self.timekeeper(), self.kernel);
            self.apply(&mut steering, findings);
        }
        if self.as_process_clock().is_none() {
            return;
        }
        let timekeeper = self.readers_timekeeper();
        // The engine's reads, which never wind up (this is a windup).
        let [monotonic, realtime] = &SECOND_HINTS;
        monotonic.store(timekeeper.uptime_nanos() / 1_000_000_000, Ordering::Relaxed);
        realtime.store(
            timekeeper.realtime_nanos() / 1_000_000_000,
            Ordering::Relaxed,
        );
    }

    /// The upkeep thread, after its windup: the coarse time ready for
    /// `now_coarse` in one word, and Realtime's for `gettime`. Only that
    /// thread publishes them, so that its stores come in order (Realtime
    /// may step back, which no maximum could keep) and none lands after it
    /// took them away.
    pub(super) fn publish_coarse_time(&self) {
        if self.as_process_clock().is_none() {
            return;
        }
        let timekeeper = self.readers_timekeeper();
        let realtime = floor_nanos(timekeeper.realtime_coarse());
        REALTIME_COARSE.store(realtime_coarse_word(realtime), Ordering::Release);
        COARSE_NANOS.fetch_max(floor_nanos(timekeeper.uptime_coarse()), Ordering::Release);
    }

    /// Takes the coarse time away: the next coarse read goes the long way,
    /// and so says that coarse reads come (see `upkeep.rs`).
    pub(super) fn take_coarse_time_away(&self) {
        if self.as_process_clock().is_some() {
            COARSE_NANOS.store(0, Ordering::Release);
            REALTIME_COARSE.store(0, Ordering::Release);
        }
    }

    /// The timekeeper the readers' word names (through it, so that a reader
    /// that sees a value published from it and then reads `now()` reads the
    /// same timekeeper or a later one).
    fn readers_timekeeper(&self) -> &Timekeeper<HostCounter> {
        match READER.load(Ordering::Acquire) {
            NOT_STARTED => self.timekeeper(),
            word => reader_timekeeper(word),
        }
    }

    /// Follows TAI − UTC, which the kernel keeps in whole seconds (an NTP
    /// daemon sets it; 0 otherwise). A kernel that refuses (`adjtimex`
    /// filtered by a sandbox, an OS without an NTP state) is asked once: TAI − UTC is 0 from then on, as
    /// the kernel's CLOCK_TAI is where nothing set it, and `info` says so.
    pub(crate) fn follow_tai(&self) {
        if self.ntp_refused.load(Ordering::Relaxed) {
            return;
        }
        match self.kernel.ntp() {
            Ok(ntp) => self
                .tai_offset
                .store(ntp.tai_offset_s as i64, Ordering::Relaxed),
            Err(e) => {
                if !self.ntp_refused.swap(true, Ordering::Relaxed) {
                    self.tai_offset.store(0, Ordering::Relaxed);
                    self.refused(format!(
                        "the NTP state: {e}; TAI − UTC is taken as 0, as Linux's CLOCK_TAI is unless an NTP daemon sets it"
                    ));
                }
            }
        }
    }

    /// Remembers what the operating system refused the clock, for `info`.
    pub(super) fn refused(&self, what: String) {
        self.facts().refused.push(what);
    }

    /// TAI − UTC in seconds, read from the kernel the first time (0 if the
    /// NTP state is refused, as Linux's CLOCK_TAI is Realtime then).
    #[inline]
    pub(crate) fn tai_offset(&self) -> i64 {
        match self.tai_offset.load(Ordering::Relaxed) {
            TAI_UNREAD => self.first_tai_offset(),
            seconds => seconds,
        }
    }

    /// [`tai_offset`](HostClock::tai_offset) the first time: asks the kernel.
    #[cold]
    #[inline(never)]
    fn first_tai_offset(&self) -> i64 {
        self.follow_tai();
        match self.tai_offset.load(Ordering::Relaxed) {
            TAI_UNREAD => 0,
            seconds => seconds,
        }
    }

    /// This clock, if it is the process's one (tests build others).
    pub(super) fn as_process_clock(&self) -> Option<&'static HostClock> {
        CLOCK.get().filter(|clock| std::ptr::eq(*clock, self))
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
    .expect("a 1 GHz, 64-bit counter with a 1 ms windup interval is valid")
}

/// The clock, started at its first use.
#[inline]
pub(crate) fn clock() -> &'static HostClock {
    match CLOCK.get() {
        Some(clock) => clock,
        None => start_clock(),
    }
}

/// The first use: says a start is under way before it is (a fork waits for
/// it: see fork.rs), then starts the clock, once.
#[cold]
#[inline(never)]
fn start_clock() -> &'static HostClock {
    fork::STARTING.store(true, Ordering::Release);
    CLOCK.get_or_init(HostClock::start)
}

/// The process's clock, once started.
pub(super) static CLOCK: OnceLock<HostClock> = OnceLock::new();
