//! Brackets: a reading of one clock between two readings of another, the
//! way every measurement of the host clock against the kernel's is taken
//! (the tightest of a few, so that a preempted one is left out). A pair of
//! the counter and CLOCK_MONOTONIC, offsets between kernel clocks, our time
//! against the kernel's, and frequencies measured between two pairs.

use std::time::Duration;

use crate::host::kernel_clocks::{KernelClock, KernelClocks};
use crate::{Counter, Timekeeper};

/// The shortest baseline a frequency is measured over before it is used.
pub(crate) const MIN_BASELINE: Duration = Duration::from_millis(10);

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
pub(crate) fn pair_with(
    kernel: &dyn KernelClocks,
    read: impl Fn() -> u64,
    clock: KernelClock,
) -> Pair {
    let ((count, at), width) = tightest(3, || {
        let before = read();
        let at = kernel.nanos(clock);
        // A read stands for the count it had reached: the count at the
        // kernel's instant lies up to a count past the second read.
        let width = read().wrapping_sub(before).wrapping_add(1);
        ((before.wrapping_add(width / 2), at), width)
    });
    Pair {
        count,
        kernel: at,
        width,
    }
}

/// The value of the tightest of `brackets` (at least one) measurements,
/// each a value and the width of the bracket it was read in, and that width:
/// a measurement preempted wide is left out.
fn tightest<T>(brackets: usize, mut measure: impl FnMut() -> (T, u64)) -> (T, u64) {
    let mut best = measure();
    for _ in 1..brackets {
        let next = measure();
        if next.1 < best.1 {
            best = next;
        }
    }
    best
}

/// What the watchdog compares the counter with: CLOCK_MONOTONIC_RAW, which no
/// NTP slew moves (chrony slews CLOCK_MONOTONIC by up to 8% through the tick
/// length), plus the time spent in suspend (BOOTTIME − MONOTONIC), which a
/// counter that runs through suspend (an invariant TSC in s2idle) counts. The
/// suspend's own bracket, in counts of a counter at `hz`, widens the sample's:
/// a read preempted there must not look like a counter off its rate.
pub(crate) fn watch_pair(kernel: &dyn KernelClocks, read: impl Fn() -> u64, hz: u64) -> Pair {
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
pub(crate) fn offset_from_monotonic(
    kernel: &dyn KernelClocks,
    id: KernelClock,
    brackets: usize,
) -> (i64, u64) {
    tightest(brackets, || {
        let before = kernel.nanos(KernelClock::Monotonic) as i64;
        let other = kernel.nanos(id) as i64;
        let after = kernel.nanos(KernelClock::Monotonic) as i64;
        (
            other - before - (after - before) / 2,
            (after - before) as u64,
        )
    })
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
    pub(crate) fn frequency_to(&self, later: &Pair, baseline: Duration) -> Option<Measured> {
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

/// How many times [`offset_on_running_clock`] measures before it takes what
/// it measured.
const RUNNING_TRIES: usize = 3;

/// [`offset_to_kernel`], measured on a clock whose reads stood nowhere
/// meanwhile (`windup` winds it up). Our reads stand at the hands' promise
/// (an interval and a lead past the last windup: some 60 µs on the startup
/// clock, 6 ms on the counter) until the next windup, so a thread that wound
/// up, then was preempted for longer, measured the time the reads stood, not
/// how far our line is from the kernel's. A steering slewed that away, and
/// ran the clock ahead by as much once the next windup resumed the line
/// (children forked at a steering paused for 20 ms stated bounds of
/// 20-49 ms on a loaded machine and ran up to 6.4 ms ahead; one read 6.5 ms
/// ahead under a stated bound of 4.3 ms). So the clock is wound up first
/// where it is due (a windup interval past its last, which comes before
/// any read stands), and measured again where it fell due during the
/// measurement: `Err` with the last measurement when it fell due in each
/// of [`RUNNING_TRIES`] (its reads may have stood).
pub(crate) fn offset_on_running_clock(
    timekeeper: &Timekeeper<impl Counter>,
    mut windup: impl FnMut(),
    kernel: &dyn KernelClocks,
    id: KernelClock,
    brackets: usize,
) -> Result<(i128, u64), (i128, u64)> {
    let mut tries = 1;
    loop {
        if timekeeper.uptime_and_due().1 {
            windup();
        }
        let measured = offset_to_kernel(timekeeper, kernel, id, brackets);
        if !timekeeper.uptime_and_due().1 {
            return Ok(measured);
        }
        if tries == RUNNING_TRIES {
            return Err(measured);
        }
        tries += 1;
    }
}

/// The kernel clock `id` minus our uptime, in ns, and the width of the bracket
/// it was measured in: the tightest of `brackets` brackets `ours, kernel, ours`.
fn offset_to_kernel(
    timekeeper: &Timekeeper<impl Counter>,
    kernel: &dyn KernelClocks,
    id: KernelClock,
    brackets: usize,
) -> (i128, u64) {
    tightest(brackets, || {
        let before = timekeeper.uptime().as_nanos();
        let at = kernel.nanos(id) as i128;
        let after = timekeeper.uptime().as_nanos();
        (at - (before + after) / 2, (after - before) as u64)
    })
}
