//! The host clock against kernel clocks a test drives: what no machine here
//! can do (suspend for an hour, preempt a bracket at will, run a counter off
//! its rate), done to a clock built as the process's is, with its steering,
//! its watchdog and its windups.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use super::brackets::offset_on_running_clock;
use super::clock::{HostClock, WINDUP_INTERVAL};
use super::steer::STEER_INTERVAL;
use crate::host::kernel_clocks::{KernelClock, KernelClocks, NtpState};
use crate::os::LeapSecond;
use crate::{BinTime, Counter};

mod migration;
mod rate_changes;

/// Kernel clocks that move only when the test moves them.
struct SimKernel {
    /// CLOCK_MONOTONIC_RAW: the true time, in ns.
    raw: AtomicU64,
    /// CLOCK_MONOTONIC, in ns: the raw time at the kernel's rate.
    monotonic: AtomicU64,
    /// How far CLOCK_MONOTONIC's rate is from the raw one, in ppb: an NTP
    /// daemon's frequency and tick (chrony slews at +83 333 333).
    rate_ppb: AtomicI64,
    /// Whether the NTP state says that rate, as Linux's does.
    says_rate: AtomicBool,
    /// Time spent suspended, ns: BOOTTIME − MONOTONIC.
    suspended: AtomicU64,
    /// REALTIME − BOOTTIME, ns: the Unix time of the boot.
    boot_epoch: AtomicU64,
    /// How far each read of CLOCK_REALTIME moves time on: a bracket around
    /// it preempted that long.
    realtime_read_delay: AtomicU64,
    /// The same for CLOCK_BOOTTIME.
    boottime_read_delay: AtomicU64,
    ntp: Mutex<NtpState>,
    /// TAI − UTC as the clocks read it (CLOCK_TAI less CLOCK_REALTIME),
    /// which moves with Realtime, where the NTP state's may move first.
    clocks_tai: AtomicI64,
}

impl SimKernel {
    /// Booted a second ago, on 2026-11-23, synchronized, TAI − UTC 37 s.
    fn leaked() -> &'static SimKernel {
        Box::leak(Box::new(SimKernel {
            raw: AtomicU64::new(1_000_000_000),
            monotonic: AtomicU64::new(1_000_000_000),
            rate_ppb: AtomicI64::new(0),
            says_rate: AtomicBool::new(false),
            suspended: AtomicU64::new(0),
            boot_epoch: AtomicU64::new(1_795_435_200_000_000_000),
            realtime_read_delay: AtomicU64::new(0),
            boottime_read_delay: AtomicU64::new(0),
            clocks_tai: AtomicI64::new(37),
            ntp: Mutex::new(NtpState {
                synchronized: true,
                maxerror_us: 2_000,
                esterror_us: 100,
                tai_offset_s: 37,
                leap: LeapSecond::None,
                rate_ppb: None,
            }),
        }))
    }

    /// Moves the true time on by `ns`, and CLOCK_MONOTONIC by as much at
    /// its rate.
    fn advance(&self, ns: u64) {
        self.raw.fetch_add(ns, Ordering::AcqRel);
        let rate = self.rate_ppb.load(Ordering::Acquire) as i128;
        let kernel = ns as i128 + ns as i128 * rate / 1_000_000_000;
        self.monotonic.fetch_add(kernel as u64, Ordering::AcqRel);
    }

    /// Nanoseconds a counter that runs through suspend has counted.
    fn running(&self) -> u64 {
        self.raw.load(Ordering::Acquire) + self.suspended.load(Ordering::Acquire)
    }
}

impl SimKernel {
    /// CLOCK_BOOTTIME: CLOCK_MONOTONIC and the time suspended.
    fn boottime(&self) -> u64 {
        self.monotonic.load(Ordering::Acquire) + self.suspended.load(Ordering::Acquire)
    }
}

impl KernelClocks for SimKernel {
    fn nanos(&self, clock: KernelClock) -> u64 {
        match clock {
            KernelClock::Monotonic | KernelClock::MonotonicCoarse => {
                self.monotonic.load(Ordering::Acquire)
            }
            KernelClock::MonotonicRaw => self.raw.load(Ordering::Acquire),
            KernelClock::Boottime => {
                let boottime = self.boottime();
                self.advance(self.boottime_read_delay.load(Ordering::Acquire));
                boottime
            }
            KernelClock::Realtime | KernelClock::RealtimeCoarse => {
                let boottime = self.boottime();
                self.advance(self.realtime_read_delay.load(Ordering::Acquire));
                boottime + self.boot_epoch.load(Ordering::Acquire)
            }
        }
    }

    fn tai_minus_utc(&self) -> Option<i32> {
        Some(self.clocks_tai.load(Ordering::Acquire) as i32)
    }

    /// Its own CLOCK_MONOTONIC, so that a failover's successor follows the
    /// simulated time.
    fn monotonic_counter(&'static self) -> super::counter::HostCounter {
        super::counter::HostCounter::Test(Arc::new(SimMonotonic(self)))
    }

    fn ntp(&self) -> io::Result<NtpState> {
        let rate = self.rate_ppb.load(Ordering::Acquire);
        Ok(NtpState {
            rate_ppb: self.says_rate.load(Ordering::Acquire).then_some(rate),
            ..*self.ntp.lock().expect("the state")
        })
    }
}

/// The simulated CLOCK_MONOTONIC as a 1 GHz counter, as
/// [`KernelCounter`](crate::hw::KernelCounter) is the machine's.
struct SimMonotonic(&'static SimKernel);

impl Counter for SimMonotonic {
    fn read(&self) -> u64 {
        self.0.nanos(KernelClock::Monotonic)
    }
    fn frequency(&self) -> u64 {
        1_000_000_000
    }
    fn name(&self) -> &str {
        "simulated CLOCK_MONOTONIC"
    }
}

/// A counter that counts through suspend, as an invariant TSC in s2idle:
/// the simulated boot time, times `ppm_fast` parts per million more than
/// the 1 GHz it states.
struct SimTsc {
    kernel: &'static SimKernel,
    ppm_fast: u64,
}

impl Counter for SimTsc {
    fn read(&self) -> u64 {
        let ns = self.kernel.running();
        ns + ns / 1_000_000 * self.ppm_fast
    }
    fn frequency(&self) -> u64 {
        1_000_000_000
    }
    fn name(&self) -> &str {
        "simulated TSC"
    }
}

/// A host clock on a `SimTsc` of `kernel`, its frequency said to be known
/// to `uncertainty_ppb`.
fn clock_known_to(
    kernel: &'static SimKernel,
    ppm_fast: u64,
    uncertainty_ppb: u64,
) -> &'static HostClock {
    HostClock::on_test_counter(
        Arc::new(SimTsc { kernel, ppm_fast }),
        kernel,
        uncertainty_ppb,
    )
}

/// A host clock on a `SimTsc` of `kernel`.
fn clock(kernel: &'static SimKernel, ppm_fast: u64) -> &'static HostClock {
    clock_known_to(kernel, ppm_fast, 0)
}

/// CLOCK_MONOTONIC minus our time, in ns.
fn offset(clock: &HostClock, kernel: &SimKernel) -> i128 {
    kernel.nanos(KernelClock::Monotonic) as i128 - clock.timekeeper().uptime().as_nanos()
}

/// Moves the simulated time on by `ns` in steps of `step`, winding the clock
/// up as a reader of `now()` does, whenever it is due.
fn run(clock: &'static HostClock, kernel: &SimKernel, ns: u64, step: u64) {
    for _ in 0..ns / step {
        kernel.advance(step);
        if clock.timekeeper().uptime_and_due().1 {
            clock.windup();
        }
    }
}

/// A clock `ppm_fast` on a new simulated kernel, run 50 ms, then left a
/// steering interval: its next windup steers. How many steerings it made.
fn due_to_steer(ppm_fast: u64) -> (&'static HostClock, &'static SimKernel, u64) {
    let kernel = SimKernel::leaked();
    let clock = clock(kernel, ppm_fast);
    run(clock, kernel, 50_000_000, 100_000);
    kernel.advance(STEER_INTERVAL.as_nanos() as u64);
    (clock, kernel, clock.steering().steerings())
}

/// An hour suspended, as an invariant TSC counts it and CLOCK_MONOTONIC does
/// not. Readers on threads through the resume never step back and never
/// read more than two windup intervals ahead of CLOCK_MONOTONIC read after
/// them (they leave the windups to the thread that moves the simulated
/// time: steering brackets that it moved on midway would measure noise a
/// real clock does not have); the offset is back under 1 µs within 10 s,
/// and the suspend is not taken for a change of the kernel's rate;
/// Boottime and Realtime advance by the hour, as the kernel's do; a
/// deadline armed on our clock
/// falls due at its CLOCK_MONOTONIC time. Prints the offset after the
/// resume over time.
#[test]
#[cfg_attr(miri, ignore = "ten simulated seconds of windups: too slow")]
fn an_hour_suspended_is_taken_out() {
    const HOUR: u64 = 3_600_000_000_000;
    let kernel = SimKernel::leaked();
    let clock = clock(kernel, 0);
    run(clock, kernel, 50_000_000, 100_000);
    let deadline_before = clock.timekeeper().uptime().as_nanos() + 100_000_000;
    let realtime_before = clock.timekeeper().realtime().as_nanos();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut last, mut reads) = (BinTime::ZERO, 0u64);
                while !stop.load(Ordering::Acquire) {
                    let now = clock.timekeeper().uptime();
                    let monotonic = kernel.nanos(KernelClock::Monotonic) as i128;
                    assert!(now >= last, "{last} then {now}");
                    assert!(
                        now.as_nanos() <= monotonic + 2 * WINDUP_INTERVAL.as_nanos() as i128,
                        "{now} read, CLOCK_MONOTONIC {monotonic} ns after it"
                    );
                    (last, reads) = (now, reads + 1);
                }
                reads
            })
        })
        .collect();
    run(clock, kernel, 10_000_000, 100_000);
    let rate_changes = clock.steering().rate_changes();
    kernel.suspended.fetch_add(HOUR, Ordering::AcqRel);
    let mut offsets = Vec::new();
    for second in 1..=10 {
        for _ in 0..10 {
            run(clock, kernel, 100_000_000, 100_000);
            std::thread::yield_now();
        }
        offsets.push((second, offset(clock, kernel)));
    }
    stop.store(true, Ordering::Release);
    for reader in readers {
        assert!(reader.join().expect("the reader's checks held") > 0);
    }
    println!("offset (CLOCK_MONOTONIC − ours) after the resume: {offsets:?} (s, ns)");
    let last = offsets.last().expect("ten seconds").1;
    assert!(last.abs() < 1_000, "{offsets:?}");
    // The counts of the suspend are not taken for a rate.
    assert_eq!(
        clock.steering().rate_changes(),
        rate_changes,
        "a suspend taken for a change of the kernel's rate"
    );
    // Boottime and Realtime count the suspend, as the kernel's do.
    assert_eq!(clock.boottime_offset.load(Ordering::Relaxed), HOUR as i64);
    let realtime = clock.timekeeper().realtime().as_nanos();
    let kernel_realtime = kernel.nanos(KernelClock::Realtime) as i128;
    assert!(
        (realtime - kernel_realtime).abs() < 1_000,
        "{realtime} against {kernel_realtime}"
    );
    assert!(realtime - realtime_before >= HOUR as i128);
    // Deadlines on our clock are CLOCK_MONOTONIC deadlines (a timerfd's):
    // one armed before the suspend, 100 ms on, is behind both clocks now
    // (it fired 10 s ago, not an hour from now); one armed now, 10 ms on,
    // fires in 10 ms of CLOCK_MONOTONIC.
    let now = clock.timekeeper().uptime().as_nanos();
    let monotonic = kernel.nanos(KernelClock::Monotonic) as i128;
    assert!(now >= deadline_before && monotonic >= deadline_before);
    let fires_in = now + 10_000_000 - monotonic;
    assert!((fires_in - 10_000_000).abs() < 1_000, "{fires_in} ns");
}

/// Reads a second apart, and the clock's only windups theirs: the phase
/// corrections still converge, as each slew runs at 500 ppm until it is
/// done (when a slew lasted one interval past a windup, a 50 ppm counter
/// left 100 µs of phase a windup that took minutes to slew away).
#[test]
#[cfg_attr(miri, ignore = "a simulated minute of steering: too slow")]
fn phase_converges_with_windups_a_second_apart() {
    let kernel = SimKernel::leaked();
    let clock = clock(kernel, 50);
    let mut offsets = Vec::new();
    for _ in 0..30 {
        kernel.advance(1_000_000_000);
        // A reader: due, it winds up (and so steers).
        if clock.timekeeper().uptime_and_due().1 {
            clock.windup();
        }
        offsets.push(offset(clock, kernel));
    }
    let tail = &offsets[offsets.len() - 5..];
    assert!(tail.iter().all(|o| o.abs() < 1_000), "{offsets:?}");
}

/// A windup that finds a steering due while another writer holds the
/// engine's writer lock (a reader's windup that the scheduler took off the
/// CPU) returns at once, and leaves the steering for a later windup. Before,
/// the steering's writes waited for the lock, and a real-time reader that
/// waited there kept the holder from the CPU (92 ms in one measured run).
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn a_steering_never_waits_for_another_writer() {
    let (clock, _, steerings) = due_to_steer(50);
    let other_writer = clock.timekeeper().try_writes().expect("no writer yet");
    let (done, returned) = mpsc::channel();
    std::thread::spawn(move || {
        clock.windup();
        let _ = done.send(());
    });
    let waited = returned.recv_timeout(Duration::from_secs(10));
    drop(other_writer);
    assert!(waited.is_ok(), "the windup waited for the other writer");
    assert_eq!(clock.steering().steerings(), steerings, "steered meanwhile");
    clock.windup();
    assert_eq!(clock.steering().steerings(), steerings + 1, "never steered");
}

/// The first Realtime offset recorded from brackets preempted 100 µs wide
/// (its truth anywhere within 50 µs of it) is not stepped when tight
/// brackets later land within that: before, they stepped Realtime by up to
/// half the first width. A real step of the kernel's Realtime is followed,
/// and Realtime's accuracy counts the first bracket's half width; so does
/// Boottime's, from brackets of its own as wide (before, Boottime's
/// accuracy was Monotonic's, and under load a process's Boottime could
/// stand off by more than `getres` stated).
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn a_wide_first_bracket_never_steps_realtime() {
    let kernel = SimKernel::leaked();
    kernel.realtime_read_delay.store(100_000, Ordering::Release);
    kernel.boottime_read_delay.store(100_000, Ordering::Release);
    let clock = clock(kernel, 0);
    kernel.realtime_read_delay.store(0, Ordering::Release);
    kernel.boottime_read_delay.store(0, Ordering::Release);
    let boottime = |clock: &HostClock| {
        let timekeeper = clock.timekeeper();
        timekeeper.realtime().saturating_sub(timekeeper.uptime())
    };
    let recorded = boottime(clock);
    assert_eq!(clock.realtime_uncertainty.load(Ordering::Relaxed), 50_000);
    assert_eq!(clock.boottime_uncertainty.load(Ordering::Relaxed), 50_000);
    let off = clock.boottime_offset.load(Ordering::Relaxed) - kernel_boottime_offset(kernel);
    assert!(off.unsigned_abs() <= 50_000, "Boottime {off} ns off");
    run(clock, kernel, 100_000_000, 100_000);
    assert_eq!(
        boottime(clock),
        recorded,
        "a tight bracket stepped Realtime"
    );
    kernel.boot_epoch.fetch_add(1_000_000_000, Ordering::AcqRel);
    run(clock, kernel, 10_000_000, 100_000);
    let stepped = boottime(clock).saturating_sub(recorded).as_nanos();
    assert!((stepped - 1_000_000_000).abs() <= 50_000, "{stepped}");
}

/// The kernel's CLOCK_BOOTTIME − CLOCK_MONOTONIC, ns.
fn kernel_boottime_offset(kernel: &SimKernel) -> i64 {
    kernel.boottime() as i64 - kernel.monotonic.load(Ordering::Acquire) as i64
}

/// A steering whose thread was held up between its windup and its phase
/// measurement (here, 20 ms inside its read of Realtime) longer than the
/// hands' promise: it measures the line, not the reads that stood at the
/// promise meanwhile. Before, it measured the stand (some 14 ms), stated it
/// as the bound, and slewed it away: the clock ran milliseconds ahead of
/// CLOCK_MONOTONIC once the next windup resumed the line.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn a_steering_held_up_after_its_windup_measures_the_line() {
    let (clock, kernel, steerings) = due_to_steer(0);
    kernel
        .realtime_read_delay
        .store(20_000_000, Ordering::Release);
    clock.windup();
    kernel.realtime_read_delay.store(0, Ordering::Release);
    assert_eq!(clock.steering().steerings(), steerings + 1, "never steered");
    for _ in 0..300 {
        kernel.advance(100_000);
        if clock.timekeeper().uptime_and_due().1 {
            clock.windup();
        }
        let (error, bound) = (offset(clock, kernel), clock.accuracy_nanos());
        assert!(
            error.abs() < 1_000 && bound < 1_000,
            "{error} ns off, bound {bound} ns"
        );
    }
}

/// `kernel`, the next `slow` reads of whose CLOCK_MONOTONIC each take
/// `delay` ns (a thread preempted in them).
struct SlowMonotonic {
    kernel: &'static SimKernel,
    delay: u64,
    slow: AtomicU64,
}

impl KernelClocks for SlowMonotonic {
    fn nanos(&self, clock: KernelClock) -> u64 {
        let slow = matches!(clock, KernelClock::Monotonic)
            && (self.slow)
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok();
        if slow {
            self.kernel.advance(self.delay);
        }
        self.kernel.nanos(clock)
    }

    fn ntp(&self) -> io::Result<NtpState> {
        self.kernel.ntp()
    }
}

/// A measurement held up in a read of CLOCK_MONOTONIC past the hands'
/// promise (its later reads of ours stand there) is taken again, on a
/// clock wound up; held up in every try, it is refused.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn a_measurement_on_reads_that_stood_is_taken_again_or_refused() {
    let (clock, kernel, _) = due_to_steer(0);
    let measure = |slow: u64| {
        let kernel = SlowMonotonic {
            kernel,
            delay: 20_000_000,
            slow: AtomicU64::new(slow),
        };
        offset_on_running_clock(
            clock.timekeeper(),
            || {
                clock.timekeeper().windup_following(|| kernel.reference());
            },
            &kernel,
            KernelClock::Monotonic,
            3,
        )
    };
    let (offset, _) = measure(1).expect("measured again on a running clock");
    assert!(offset.abs() < 1_000, "{offset} ns");
    let (stood, _) = measure(u64::MAX).expect_err("every try held up");
    assert!(stood > 1_000_000, "{stood} ns");
}

/// TAI − UTC in seconds, as `clock` has it.
fn tai_minus_utc(clock: &HostClock) -> i64 {
    (clock.tai() - clock.realtime_offset_ns()) / 1_000_000_000
}

/// TAI − UTC follows the kernel's, as an NTP daemon sets it.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn the_tai_offset_follows_the_kernel() {
    let kernel = SimKernel::leaked();
    let clock = clock(kernel, 0);
    run(clock, kernel, 20_000_000, 1_000_000);
    assert_eq!(tai_minus_utc(clock), 37);
    kernel.ntp.lock().expect("the state").tai_offset_s = 38;
    kernel.clocks_tai.store(38, Ordering::Release);
    run(clock, kernel, 20_000_000, 1_000_000);
    assert_eq!(tai_minus_utc(clock), 38);
}

/// A leap second: the kernel steps Realtime back a second and TAI − UTC up
/// one together in its clocks, and says the new TAI − UTC in its NTP state
/// some milliseconds sooner (Linux's `adjtimex` did, 1.6 ms before its
/// clocks moved). Realtime follows at the next windup; TAI, Monotonic plus
/// one offset that the leap leaves where it was, does not move, before,
/// through and after it (it stepped back a second once, when TAI was
/// Realtime plus TAI − UTC, two words a read could see apart; and a second
/// once, when TAI − UTC came from the NTP state ahead of Realtime).
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn a_leap_second_steps_realtime_and_not_tai() {
    let kernel = SimKernel::leaked();
    let clock = clock(kernel, 0);
    run(clock, kernel, 20_000_000, 1_000_000);
    let tai = clock.tai();
    let realtime = clock.realtime_offset_ns();
    kernel.ntp.lock().expect("the state").tai_offset_s += 1;
    for _ in 0..20 {
        run(clock, kernel, 1_000_000, 1_000_000);
        assert_eq!(clock.tai(), tai, "TAI moved with the NTP state alone");
    }
    kernel.clocks_tai.fetch_add(1, Ordering::AcqRel);
    kernel.boot_epoch.fetch_sub(1_000_000_000, Ordering::AcqRel);
    for _ in 0..20 {
        run(clock, kernel, 1_000_000, 1_000_000);
        assert_eq!(clock.tai(), tai, "TAI moved");
    }
    assert_eq!(clock.realtime_offset_ns(), realtime - 1_000_000_000);
    assert_eq!(tai_minus_utc(clock), 38);
}

/// A paused VM: the counter and CLOCK_MONOTONIC both jump an hour. That is
/// time that passed: nothing is taken out, nothing is slewed.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn a_paused_vm_keeps_the_time_that_passed() {
    const HOUR: u64 = 3_600_000_000_000;
    let kernel = SimKernel::leaked();
    let clock = clock(kernel, 0);
    run(clock, kernel, 50_000_000, 100_000);
    kernel.advance(HOUR);
    let read = clock.timekeeper().uptime();
    // The first read after the pause stands at the promise; the windup it
    // makes finds the line and CLOCK_MONOTONIC agree.
    assert!(offset(clock, kernel) >= HOUR as i128 - 2 * WINDUP_INTERVAL.as_nanos() as i128);
    clock.windup();
    assert!(clock.timekeeper().uptime() >= read);
    // Within the steering's own slews of some ns, as before the pause.
    assert!(
        offset(clock, kernel).abs() < 1_000,
        "{}",
        offset(clock, kernel)
    );
    run(clock, kernel, 1_000_000_000, 100_000);
    assert!(
        offset(clock, kernel).abs() < 1_000,
        "{}",
        offset(clock, kernel)
    );
}

/// A first frequency 100 ppm off, known to 200 ppm (a startup measurement
/// over microseconds): at every step the clock is within the bound it
/// states (the offset measured last, plus the rate's uncertainty times the
/// time since), through the first steerings and through a 3 s pause (a
/// stopped process, a paused VM), after which it resumes on the kernel's
/// clock rather than 300 µs off it.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn the_error_bound_holds_with_a_wrong_first_frequency() {
    let kernel = SimKernel::leaked();
    let clock = clock_known_to(kernel, 100, 200_000);
    let holds = |when: &str| {
        let error = offset(clock, kernel).unsigned_abs();
        let bound = clock.accuracy_nanos() as u128;
        assert!(error <= bound, "{when}: {error} ns off, bound {bound} ns");
    };
    for _ in 0..300 {
        kernel.advance(100_000);
        holds("running");
        if clock.timekeeper().uptime_and_due().1 {
            clock.windup();
            holds("after a windup");
        }
    }
    kernel.advance(3_000_000_000);
    // Reads stand at the promise meanwhile; the first reader winds up.
    let stood = clock.timekeeper().uptime();
    clock.windup();
    holds("after the stop");
    assert!(clock.timekeeper().uptime() >= stood);
    assert!(
        offset(clock, kernel).abs() < 1_000,
        "{} ns off after the stop",
        offset(clock, kernel)
    );
}

/// A counter as ARM's generic timer on many boards: 24 MHz, so a read
/// stands up to 41 ns behind the instant it is made at.
struct SimCntvct {
    kernel: &'static SimKernel,
}

impl Counter for SimCntvct {
    fn read(&self) -> u64 {
        self.kernel.running() * 3 / 125
    }
    fn frequency(&self) -> u64 {
        24_000_000
    }
    fn name(&self) -> &str {
        "simulated 24 MHz counter"
    }
}

/// The stated bound covers a counter's period: steering measured on a read
/// a tick behind, reads a tick ahead. Reads every 100 µs and 7 ns land at
/// every phase of a tick, for five simulated seconds of windups and
/// steerings.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn the_error_bound_holds_on_a_coarse_counter() {
    let kernel = SimKernel::leaked();
    let clock = HostClock::on_test_counter(Arc::new(SimCntvct { kernel }), kernel, 0);
    let mut worst = (0, 0);
    for _ in 0..50_000 {
        kernel.advance(100_007);
        if clock.timekeeper().uptime_and_due().1 {
            clock.windup();
        }
        let error = offset(clock, kernel).unsigned_abs();
        let bound = clock.accuracy_nanos() as u128;
        assert!(error <= bound, "{error} ns off, bound {bound} ns");
        worst = worst.max((error, bound));
    }
    println!("worst error {} ns, bound then {} ns", worst.0, worst.1);
}

/// Reads in bursts between idle spells of 10 ms, 1 s and a minute, with
/// nothing else winding the clock up: the first read after each spell is
/// never behind the last one before it, the windup it makes puts the
/// clock within its stated bound of CLOCK_MONOTONIC, and a burst's reads
/// end within 1 µs of it, whatever the spell did to a counter 50 ppm off.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn bursts_between_idle_spells_keep_time() {
    let kernel = SimKernel::leaked();
    let clock = clock_known_to(kernel, 50, 200_000);
    run(clock, kernel, 2_000_000_000, 100_000);
    for spell in [10_000_000, 1_000_000_000, 60_000_000_000] {
        let before = clock.timekeeper().uptime();
        kernel.advance(spell);
        let (first, due) = clock.timekeeper().uptime_and_due();
        assert!(first >= before, "{spell} ns idle: {before} then {first}");
        assert!(due, "{spell} ns idle and no windup due");
        clock.windup();
        let error = offset(clock, kernel).unsigned_abs();
        assert!(
            error <= clock.accuracy_nanos() as u128,
            "{spell} ns idle: {error} ns off, bound {} ns",
            clock.accuracy_nanos()
        );
        run(clock, kernel, 100_000_000, 100_000);
        assert!(
            offset(clock, kernel).abs() < 1_000,
            "{spell} ns idle: {} ns off after a burst",
            offset(clock, kernel)
        );
    }
}

/// `settimeofday` an hour ahead and back: Realtime follows each step at the
/// windup after it (a read that finds a windup due reads after it), both
/// ways, and Monotonic does not move.
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn realtime_follows_a_step_both_ways() {
    const HOUR: u64 = 3_600_000_000_000;
    let kernel = SimKernel::leaked();
    let clock = clock(kernel, 0);
    run(clock, kernel, 100_000_000, 100_000);
    let realtime_off = |clock: &HostClock| {
        clock.timekeeper().realtime().as_nanos() - kernel.nanos(KernelClock::Realtime) as i128
    };
    for step in [HOUR as i64, -(HOUR as i64)] {
        let before = offset(clock, kernel);
        let epoch = kernel.boot_epoch.load(Ordering::Acquire);
        kernel
            .boot_epoch
            .store(epoch.saturating_add_signed(step), Ordering::Release);
        run(clock, kernel, WINDUP_INTERVAL.as_nanos() as u64, 100_000);
        assert!(
            realtime_off(clock).abs() < 1_000,
            "{step}: {}",
            realtime_off(clock)
        );
        assert!(
            (offset(clock, kernel) - before).abs() < 1_000,
            "{step}: Monotonic moved"
        );
    }
}
