//! Steering the host clock to the kernel's CLOCK_MONOTONIC.
//!
//! At every windup the kernel's Realtime and Boottime offsets are followed
//! (see `follow_offsets`); then two measurements, two corrections, at most
//! every [`STEER_INTERVAL`]:
//!
//! - **rate**: the counter against CLOCK_MONOTONIC over a long baseline (the
//!   tightest of three brackets `counter, clock_gettime, counter` at each end),
//!   which gives the counter's frequency as the kernel sees it, NTP's trim
//!   included. It becomes the engine's counter frequency (as FreeBSD refines
//!   `tc_frequency`), a rate change at the next switch point. The baseline
//!   slides (16 to 32 s once warm) so that it follows NTP's changes; a bracket
//!   of 20 ns over 16 s is a rate known to about a part per billion.
//! - **phase**: our time against CLOCK_MONOTONIC (the tightest of three
//!   brackets `ours, clock_gettime, ours`); the difference is slewed away with
//!   [`Timekeeper::adjtime`](crate::Timekeeper::adjtime), at most 500 ppm, so
//!   the clock never steps. The rate is not estimated from our own time: slew
//!   already scheduled up to the next switch point would bias it.
//!
//! Before those, the watchdog (`watchdog.rs`) samples the counter against
//! CLOCK_MONOTONIC_RAW and the time suspended (`watch_pair`) and fails the
//! clock over to the kernel's counter when the counter misbehaves.
//!
//! The error bound that [`getres`](crate::getres) reports is the last measured
//! offset plus half its bracket.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::host::kernel_clocks::{KernelClock, KernelClocks};
use crate::host::watchdog;
use crate::host::{HostClock, HostCounter};
use crate::{BinTime, Counter, Timekeeper};

/// The least time between two steerings.
const STEER_INTERVAL: Duration = Duration::from_millis(10);
/// The shortest baseline a frequency is measured over before it is used.
const MIN_BASELINE: Duration = Duration::from_millis(10);
/// The baseline's reference moves forward once it is this old.
const SLIDE_AFTER: Duration = Duration::from_secs(16);
/// The shortest startup measurement, when CPUID states no frequency.
#[cfg(target_arch = "x86_64")]
const STARTUP_BASELINE: Duration = Duration::from_micros(20);

/// A counter value and the kernel's CLOCK_MONOTONIC at the same moment, to
/// within `width` counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pair {
    pub(crate) count: u64,
    pub(crate) kernel: u64,
    pub(crate) width: u64,
}

impl Pair {
    /// A pair of `count` and the kernel's `kernel` ns, to within `width` counts.
    #[cfg(test)]
    pub(crate) fn new(count: u64, kernel: u64, width: u64) -> Pair {
        Pair {
            count,
            kernel,
            width,
        }
    }
}

/// The tightest of three `read, CLOCK_MONOTONIC, read` brackets.
pub(crate) fn pair(kernel: &dyn KernelClocks, read: impl Fn() -> u64) -> Pair {
    pair_with(kernel, read, KernelClock::Monotonic)
}

/// The tightest of three `read, clock, read` brackets.
fn pair_with(kernel: &dyn KernelClocks, read: impl Fn() -> u64, clock: KernelClock) -> Pair {
    (0..3)
        .map(|_| {
            let before = read();
            let kernel = kernel.nanos(clock);
            let width = read().wrapping_sub(before);
            Pair {
                count: before.wrapping_add(width / 2),
                kernel,
                width,
            }
        })
        .min_by_key(|p| p.width)
        .expect("three brackets")
}

/// What the watchdog compares the counter with: CLOCK_MONOTONIC_RAW, which no
/// NTP slew moves (chrony slews CLOCK_MONOTONIC by up to 8% through the tick
/// length), plus the time spent in suspend (BOOTTIME − MONOTONIC), which a
/// counter that runs through suspend (an invariant TSC in s2idle) counts. The
/// suspend's own bracket, in counts of a counter at `hz`, widens the sample's:
/// a read preempted there must not look like a counter off its rate.
fn watch_pair(kernel: &dyn KernelClocks, read: impl Fn() -> u64, hz: u64) -> Pair {
    let (suspended, suspended_width) = offset_from_monotonic(kernel, KernelClock::Boottime, 3);
    let raw = pair_with(kernel, read, KernelClock::MonotonicRaw);
    let suspended_counts = (suspended_width as u128 * hz as u128 / 1_000_000_000) as u64;
    Pair {
        kernel: raw.kernel.saturating_add_signed(suspended),
        width: raw.width.saturating_add(suspended_counts),
        ..raw
    }
}

/// The kernel clock `id` minus CLOCK_MONOTONIC, in ns, and the width of the
/// bracket it was read in: the tightest of `brackets` brackets `MONOTONIC, id,
/// MONOTONIC`.
fn offset_from_monotonic(
    kernel: &dyn KernelClocks,
    id: KernelClock,
    brackets: usize,
) -> (i64, u64) {
    (0..brackets.max(1))
        .map(|_| {
            let before = kernel.nanos(KernelClock::Monotonic) as i64;
            let other = kernel.nanos(id) as i64;
            let after = kernel.nanos(KernelClock::Monotonic) as i64;
            (
                other - before - (after - before) / 2,
                (after - before) as u64,
            )
        })
        .min_by_key(|&(_, width)| width)
        .expect("at least one bracket")
}

/// A frequency measured between two pairs, and how sure it is: each pair's
/// midpoint is within half its bracket of the truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Measured {
    pub(crate) hz: u64,
    pub(crate) uncertainty_ppb: u64,
}

impl Pair {
    /// The frequency between `self` and a `later` pair, if they are at least
    /// `baseline` apart.
    fn frequency_to(&self, later: &Pair, baseline: Duration) -> Option<Measured> {
        let nanos = later.kernel.checked_sub(self.kernel)?;
        if nanos < baseline.as_nanos() as u64 {
            return None;
        }
        let counts = later.count.wrapping_sub(self.count).max(1) as f64;
        let slack = (self.width + later.width) as f64 / 2.0;
        Some(Measured {
            hz: (counts * 1e9 / nanos as f64).round() as u64,
            uncertainty_ppb: (slack / counts * 1e9).ceil() as u64,
        })
    }
}

/// The TSC read in order (`lfence; rdtsc`), for measuring before the `Tsc`
/// counter exists.
#[cfg(target_arch = "x86_64")]
pub(crate) fn read_tsc() -> u64 {
    // SAFETY: lfence and rdtsc exist on every x86_64 CPU.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

/// The counter's frequency from `start`, a pair taken when the clock began to
/// start up, to now: the startup's own work (CPUID, the kernel's clocksource)
/// is the baseline, so measuring costs nothing unless that work took less than
/// [`STARTUP_BASELINE`], in which case this waits for the rest. Rough (some
/// hundreds of ppm); the first steering, [`STEER_INTERVAL`] later and measured
/// from the same `start`, makes it good.
#[cfg(target_arch = "x86_64")]
pub(crate) fn startup_frequency(
    kernel: &dyn KernelClocks,
    start: &Pair,
    read: impl Fn() -> u64,
) -> Measured {
    loop {
        if let Some(measured) = start.frequency_to(&pair(kernel, &read), STARTUP_BASELINE) {
            return measured;
        }
    }
}

/// The kernel clock `id` minus our uptime, in ns, and the width of the bracket
/// it was measured in: the tightest of `brackets` brackets `ours, kernel, ours`.
pub(crate) fn offset_to_kernel(
    timekeeper: &Timekeeper<impl Counter>,
    kernel: &dyn KernelClocks,
    id: KernelClock,
    brackets: usize,
) -> (i128, u64) {
    (0..brackets.max(1))
        .map(|_| {
            let before = timekeeper.uptime().as_nanos();
            let kernel = kernel.nanos(id) as i128;
            let after = timekeeper.uptime().as_nanos();
            (kernel - (before + after) / 2, (after - before) as u64)
        })
        .min_by_key(|&(_, width)| width)
        .expect("at least one bracket")
}

/// Measures CLOCK_MONOTONIC minus our time with `engine`, records it and the
/// error bound it gives (the offset plus half its bracket) for `info` and
/// `getres`, and returns it in ns.
pub(crate) fn measure_phase(timekeeper: &Timekeeper<HostCounter>, clock: &HostClock) -> i64 {
    let (offset, width) = offset_to_kernel(timekeeper, clock.kernel, KernelClock::Monotonic, 3);
    let offset = offset as i64;
    clock.last_offset.store(offset, Ordering::Relaxed);
    clock
        .accuracy
        .store(offset.unsigned_abs() + width / 2, Ordering::Relaxed);
    offset
}

/// The steering state, kept under the host clock's steering lock.
pub(crate) struct Steering {
    /// The counter frequency the engine uses now, in Hz.
    hz: u64,
    /// The frequency the clock started with.
    initial_hz: u64,
    /// How sure the frequency in use is, once it has been measured.
    uncertainty_ppb: Option<u64>,
    /// The baseline's reference, and the next one.
    anchor: Option<Pair>,
    next_anchor: Option<Pair>,
    /// CLOCK_MONOTONIC at the last steering.
    last_steer: u64,
    /// REALTIME − MONOTONIC as last given to the engine.
    realtime_offset: Option<Offset>,
    /// BOOTTIME − MONOTONIC as last given to the host clock.
    boottime_offset: Option<Offset>,
    /// The watchdog's first sample and its last (see `watch_pair`).
    watch_anchor: Option<Pair>,
    watched: Option<Pair>,
}

/// An offset of a kernel clock from CLOCK_MONOTONIC, in ns, as measured:
/// within half its bracket's `width` of the truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Offset {
    pub(crate) ns: i64,
    pub(crate) width: u64,
}

impl Offset {
    /// Whether `other` cannot be the same offset: the two brackets do not
    /// overlap. Neither noise nor a first measurement preempted wide (whose
    /// truth lies anywhere in its bracket) makes a move.
    fn moved_to(&self, other: &Offset) -> bool {
        self.ns.abs_diff(other.ns) > (self.width + other.width) / 2
    }
}

/// How many brackets an offset is recorded from, the tightest kept.
const RECORD_BRACKETS: usize = 10;

/// The offset of the kernel clock `id` from CLOCK_MONOTONIC if it moved from
/// the `known` one by more than the two measurements can tell, recording it:
/// so that noise never moves a clock, backwards or forwards. One bracket at
/// each windup; a move is confirmed, and recorded, with the tightest of
/// [`RECORD_BRACKETS`], so that a bracket preempted wide is neither a move
/// nor (but for a machine that preempts every one) a recorded offset.
fn moved_offset(
    known: &mut Option<Offset>,
    kernel: &dyn KernelClocks,
    id: KernelClock,
) -> Option<Offset> {
    let measure = |brackets| {
        let (ns, width) = offset_from_monotonic(kernel, id, brackets);
        Offset { ns, width }
    };
    let moved = |known: &Option<Offset>, measured: &Offset| {
        known.is_none_or(|known| known.moved_to(measured))
    };
    if !moved(known, &measure(1)) {
        return None;
    }
    let confirmed = measure(RECORD_BRACKETS);
    if !moved(known, &confirmed) {
        return None;
    }
    *known = Some(confirmed);
    Some(confirmed)
}

impl Steering {
    /// Steering of a counter at `hz` (known to `uncertainty_ppb`, if it was
    /// measured), measured from `anchor` on if the clock took a pair of its
    /// counter at startup.
    pub(crate) fn new(hz: u64, uncertainty_ppb: Option<u64>, anchor: Option<Pair>) -> Steering {
        Steering {
            hz,
            initial_hz: hz,
            uncertainty_ppb,
            anchor,
            next_anchor: anchor,
            last_steer: 0,
            realtime_offset: None,
            boottime_offset: None,
            watch_anchor: None,
            watched: None,
        }
    }

    /// Whether the rate has a baseline's first end (test access).
    #[cfg(test)]
    pub(crate) fn has_rate_anchor(&self) -> bool {
        self.anchor.is_some()
    }

    /// Makes the Boottime offset known `ns` less than it is, as it was before
    /// a suspend of `ns` (test access).
    #[cfg(test)]
    pub(crate) fn pretend_suspended(&mut self, ns: i64) {
        if let Some(known) = &mut self.boottime_offset {
            known.ns -= ns;
        }
    }

    /// The counter frequency in use, in Hz.
    pub(crate) fn frequency_hz(&self) -> u64 {
        self.hz
    }

    /// How sure the frequency in use is, in ppb, once measured.
    pub(crate) fn uncertainty_ppb(&self) -> Option<u64> {
        self.uncertainty_ppb
    }

    /// How far the frequency in use is from the one the clock started with,
    /// in ppb.
    pub(crate) fn correction_ppb(&self) -> i64 {
        ((self.hz as f64 / self.initial_hz as f64 - 1.0) * 1e9).round() as i64
    }

    /// Follows the kernel's Realtime and Boottime offsets, then measures and
    /// corrects rate and phase unless the last steering is too recent.
    pub(crate) fn steer(&mut self, clock: &HostClock) {
        // At every windup: a `settimeofday` shows in Realtime one windup on.
        self.follow_offsets(clock);
        let now = clock.kernel.nanos(KernelClock::Monotonic);
        if now.saturating_sub(self.last_steer) < STEER_INTERVAL.as_nanos() as u64 {
            return;
        }
        self.last_steer = now;
        let timekeeper = clock.timekeeper();
        if let Some(why) = self.watch(clock.kernel, timekeeper) {
            self.fail_over(clock, format!("watchdog: {why}"));
            return;
        }
        clock.follow_tai();
        let current = pair(clock.kernel, || timekeeper.counter().read());
        self.steer_rate(timekeeper, current);
        self.steer_phase(timekeeper, clock);
    }

    /// Fails the clock over to the kernel's counter because of `why`, and
    /// steers that from now on.
    pub(crate) fn fail_over(&mut self, clock: &HostClock, why: String) {
        clock.fail_over(why);
        // The kernel's counter counts nanoseconds exactly; Realtime and
        // Boottime are given to the new timekeeper afresh.
        *self = Steering::new(1_000_000_000, Some(0), None);
        self.follow_offsets(clock);
    }

    /// The watchdog's verdict on the counter from the last steering's pair to
    /// `current` (none on the kernel's own clock, which is the reference).
    fn watch(
        &mut self,
        kernel: &dyn KernelClocks,
        timekeeper: &Timekeeper<HostCounter>,
    ) -> Option<watchdog::Misbehaviour> {
        if matches!(timekeeper.counter(), HostCounter::Kernel(_)) {
            return None;
        }
        let current = watch_pair(
            kernel,
            || timekeeper.counter().read(),
            timekeeper.counter().frequency(),
        );
        let earlier = self.watched.replace(current)?;
        // The rate the counter has kept since the first sample, up to the
        // last one: what this interval is held to.
        let anchor = *self.watch_anchor.get_or_insert(earlier);
        let rate = anchor.frequency_to(&earlier, MIN_BASELINE);
        watchdog::check(&earlier, &current, rate, timekeeper.counter().mask())
    }

    /// Rate: the counter's frequency over the sliding baseline, to `current`.
    fn steer_rate(&mut self, timekeeper: &Timekeeper<HostCounter>, current: Pair) {
        let anchor = *self.anchor.get_or_insert(current);
        let next = *self.next_anchor.get_or_insert(current);
        if current.kernel - next.kernel >= SLIDE_AFTER.as_nanos() as u64 {
            self.anchor = Some(next);
            self.next_anchor = Some(current);
        }
        let Some(measured) = anchor.frequency_to(&current, MIN_BASELINE) else {
            return;
        };
        if measured.hz == self.hz || timekeeper.set_counter_frequency(measured.hz).is_ok() {
            self.hz = measured.hz;
            self.uncertainty_ppb = Some(measured.uncertainty_ppb);
        }
    }

    /// Phase: slew our time onto CLOCK_MONOTONIC.
    fn steer_phase(&mut self, timekeeper: &Timekeeper<HostCounter>, clock: &HostClock) {
        timekeeper.adjtime(measure_phase(timekeeper, clock));
    }

    /// Realtime and Boottime: the kernel's offsets from CLOCK_MONOTONIC,
    /// followed when they move by more than the bracket they are read in
    /// (a `settimeofday`, a suspend).
    pub(crate) fn follow_offsets(&mut self, clock: &HostClock) {
        let kernel = clock.kernel;
        if let Some(realtime) =
            moved_offset(&mut self.realtime_offset, kernel, KernelClock::Realtime)
        {
            clock
                .timekeeper()
                .set_boottime(BinTime::from_nanos(realtime.ns as i128));
            clock
                .realtime_uncertainty
                .store(realtime.width.div_ceil(2), Ordering::Relaxed);
        }
        let known = self.boottime_offset.is_some();
        if let Some(boottime) =
            moved_offset(&mut self.boottime_offset, kernel, KernelClock::Boottime)
        {
            clock.boottime_offset.store(boottime.ns, Ordering::Relaxed);
            if known {
                // A suspend: CLOCK_MONOTONIC stood still while the counter
                // may have run on, so the rate's baseline starts again after
                // it (the watchdog's reference counts the suspend in).
                self.anchor = None;
                self.next_anchor = None;
            }
        }
    }
}
