//! What the clock can tell apart, how far it is from the kernel, and what it
//! runs on.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::choice::Verdict;
use super::coarse_limit::COARSE_SLACK;
use super::counter::CounterKind;
use super::life::Facts;
use super::process::{clock, try_clock};
use super::read::{ClockId, gettime};
use super::steer::tick_ns;
use crate::os::KernelClock;
use crate::os::LeapSecond;

/// What a clock can tell apart, and how far it can be from the kernel's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resolution {
    /// The smallest step the clock takes.
    pub resolution: Duration,
    /// The current bound on its error against the kernel's clock of that name.
    pub accuracy: Duration,
}

/// The resolution and the current accuracy bound of clock `id`.
///
/// The bound holds for the kernel's clock as it runs. Where the kernel says
/// its clock's rate (Linux's `adjtimex`, one system call), `getres` asks it
/// whether that rate changed since the last windup, so that the bound knows
/// of a change that no windup has found yet (chrony starting a slew);
/// elsewhere a change is known from the windup that measures it, a few
/// milliseconds on.
///
/// Async-signal-safe, as the reads are: it never waits, allocates or
/// starts a thread.
pub fn getres(id: ClockId) -> Resolution {
    // While the clock starts on another thread (or on this one, in the
    // code a signal handler interrupted), reads ask the kernel: its
    // nanoseconds, to the nanosecond.
    // The process's own clock only where it does not read the keeper's
    // page (the start that `try_clock` makes may map it, too).
    let own = match super::page::reading() {
        Some(_) => None,
        None => try_clock(),
    };
    let (tick, stated) = match (super::page::reading(), own) {
        // The keeper's page: its bound, read with loads. (Its coarse
        // clocks are the kernel's, as the process's own clock keeps them.)
        (Some(page), _) => (1, super::page::accuracy(page)),
        (None, Some(clock)) => (
            tick_ns(clock.timekeeper()),
            super::page::Stated {
                bound: {
                    // A clock whose counter stopped never falls due: asked
                    // for its bound, it winds up (its watchdog then finds it).
                    clock.wind_up_if_stale(clock.kernel.nanos(KernelClock::Monotonic));
                    clock.accuracy_nanos()
                },
                realtime_uncertainty: clock.realtime_uncertainty.load(Ordering::Relaxed),
                boottime_uncertainty: clock.boottime_uncertainty.load(Ordering::Relaxed),
                leap: clock.leap(),
            },
        ),
        (None, None) => (
            1,
            super::page::Stated {
                bound: 0,
                realtime_uncertainty: 0,
                boottime_uncertainty: 0,
                leap: LeapSecond::None,
            },
        ),
    };
    let super::page::Stated {
        bound: accuracy,
        realtime_uncertainty,
        boottime_uncertainty,
        leap,
    } = stated;
    // While a read maps the keeper's page, the others read the kernel's
    // clock less the slack (`read::start_and_read`).
    let accuracy = if super::page::mapping() {
        accuracy.max(super::page::slack_ns())
    } else {
        accuracy
    };
    let tick = Duration::from_nanos(tick);
    // The bound grows from the last measurement at the rate's uncertainty;
    // a read of ours and one of the kernel's are each rounded down to whole
    // nanoseconds: two more.
    let accuracy = Duration::from_nanos(accuracy.saturating_add(2));
    // Realtime's offset from Monotonic was measured too; TAI is Monotonic
    // moved by that offset (and whole seconds).
    let tai_accuracy = accuracy + Duration::from_nanos(realtime_uncertainty);
    // Around a leap second the kernel's Realtime steps at midnight, and
    // ours follows at the next windup.
    let realtime_accuracy = match leap {
        LeapSecond::None => tai_accuracy,
        leap => tai_accuracy + leap_margin(gettime(ClockId::Realtime), leap),
    };
    match id {
        ClockId::Monotonic => Resolution {
            resolution: tick,
            accuracy,
        },
        // Boottime's offset from Monotonic was measured too.
        ClockId::Boottime => Resolution {
            resolution: tick,
            accuracy: accuracy + Duration::from_nanos(boottime_uncertainty),
        },
        ClockId::Realtime => Resolution {
            resolution: tick,
            accuracy: realtime_accuracy,
        },
        ClockId::Tai => Resolution {
            resolution: tick,
            accuracy: tai_accuracy,
        },
        ClockId::MonotonicRaw => Resolution {
            resolution: Duration::from_nanos(1),
            accuracy: Duration::ZERO,
        },
        ClockId::MonotonicCoarse => Resolution {
            resolution: coarse_tick(),
            accuracy: accuracy + coarse_lag(),
        },
        ClockId::RealtimeCoarse => Resolution {
            resolution: coarse_tick(),
            accuracy: realtime_accuracy + coarse_lag(),
        },
        ClockId::Second => Resolution {
            resolution: Duration::from_secs(1),
            accuracy: realtime_accuracy + Duration::from_secs(1),
        },
    }
}

/// The kernel's tick, by which its coarse clock moves (`clock_getres`).
fn coarse_tick() -> Duration {
    crate::os::kernel_resolution(KernelClock::MonotonicCoarse)
}

/// How many of its ticks the kernel's coarse clock may lag its precise
/// one. The CPU in charge of timekeeping moves it at each of its ticks;
/// where that CPU is held up (a vCPU the hypervisor stopped, a CPU in
/// `stop_machine`), Linux has the tick of another CPU take the charge over
/// once five of its own ticks found the time unmoved (`MAX_STALLED_JIFFIES`
/// in `kernel/time/tick-sched.c`, since 6.1): five ticks, and the one in
/// progress.
const KERNEL_COARSE_TICKS: u32 = 6;

/// How far the coarse clocks may lag the precise ones, whatever the
/// scheduler does: as far as the kernel's coarse clock may
/// ([`KERNEL_COARSE_TICKS`]), and the slack a coarse read subtracts.
fn coarse_lag() -> Duration {
    KERNEL_COARSE_TICKS * coarse_tick() + COARSE_SLACK
}

/// How far the kernel's Realtime may stand from ours at `realtime` (since
/// the epoch) with `leap` announced: a second within a second of a
/// midnight UTC, where the kernel repeats (or skips) one and ours follows
/// at its next windup; nothing elsewhere.
pub(crate) fn leap_margin(realtime: Duration, leap: LeapSecond) -> Duration {
    let realtime = u64::try_from(realtime.as_nanos()).unwrap_or(u64::MAX);
    if leap != LeapSecond::None && super::bounds::near_midnight(realtime) {
        Duration::from_secs(1)
    } else {
        Duration::ZERO
    }
}

/// What the clock runs on and how well it is doing. With the `serde` feature
/// it serializes under these names, the accuracy as `accuracy_ns`.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Info {
    /// The counter's name (`TSC`, `CNTVCT_EL0`, `CLOCK_MONOTONIC`).
    pub counter: CounterKind,
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
    /// How many times the steering measured the phase against
    /// CLOCK_MONOTONIC (and corrected it).
    pub steerings: u64,
    /// How many times the steering found that the kernel changed its
    /// clock's rate (an NTP daemon's slew through the tick, a frequency
    /// step) and followed the new rate at once.
    pub rate_changes: u64,
    /// Windups that readers made: readers wind up the clock themselves when
    /// they find it a windup interval old, at most some hundred times a
    /// second for a program that reads all the time.
    pub reader_windups: u64,
    /// Reads that stood: their hands' promise passed (no windup for two
    /// intervals: a stop, a suspend), or the counter behind the hands' base
    /// by more than an interval (it went back, or the read was preempted
    /// past a windup). Each wound up, or, where it could not, took what
    /// CLOCK_MONOTONIC vouches for less the bound.
    pub standing_reads: u64,
    /// What the operating system refused the clock (the NTP state: `adjtimex`
    /// under seccomp, or an OS whose state is not read), asked once, and
    /// what the clock does instead.
    pub refused: Vec<String>,
    /// Where the process's time comes from: the keeper's page (see
    /// [`keeper`](crate::keeper)), or its own clock and why not the page
    /// (none here, stale, refused, left).
    pub keeper: String,
    /// The bounds on real time against UTC ([`realtime_bounds`](crate::realtime_bounds)),
    /// or why there are none (the kernel is not synchronized). In JSON, the
    /// bounds, or `{"error": "..."}`.
    #[cfg_attr(feature = "serde", serde(serialize_with = "bounds_or_error"))]
    pub realtime_bounds: Result<crate::RealtimeBounds, crate::Error>,
}

/// A duration serialized as whole nanoseconds.
#[cfg(feature = "serde")]
pub(super) fn nanos_of<S: serde::Serializer>(
    d: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_u128(d.as_nanos())
}

/// The bounds, or `{"error": message}`.
#[cfg(feature = "serde")]
pub(super) fn bounds_or_error<S: serde::Serializer>(
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

/// What the clock runs on, why, and how far it is from the kernel. Not
/// async-signal-safe, unlike the reads: it allocates its report, and waits
/// for the clock's locks.
pub fn info() -> Info {
    // A first read finds the keeper's page, if there is one to read.
    crate::now();
    let clock = clock();
    clock.wait_for_choice();
    let Facts {
        frequency_source,
        verdicts,
        fallback,
        // The verdicts say so.
        own_evidence: _,
    } = clock.facts();
    // The steering's figures, copied: nothing below runs under its lock (a
    // read there may wind up, and a windup may take it).
    let (
        frequency_hz,
        frequency_uncertainty_ppb,
        frequency_correction_ppb,
        steerings,
        rate_changes,
    ) = {
        let steering = clock.steering();
        (
            steering.frequency_hz(),
            steering.uncertainty_ppb(),
            steering.correction_ppb(),
            steering.steerings(),
            steering.rate_changes(),
        )
    };
    Info {
        counter: clock.timekeeper().counter().kind(),
        frequency_hz,
        frequency_source: frequency_source.to_string(),
        frequency_uncertainty_ppb,
        frequency_correction_ppb,
        verdicts: verdicts
            .iter()
            .map(super::choice::KeptVerdict::verdict)
            .chain(clock.cross_cpu.get().cloned())
            .collect(),
        fallback: fallback.map(|why| why.to_string()),
        windups: clock
            .stages
            .iter()
            .filter_map(OnceLock::get)
            .map(|timekeeper| timekeeper.stats().windups)
            .sum(),
        offset_ns: clock.last_offset.load(Ordering::Relaxed),
        accuracy: getres(ClockId::Monotonic).accuracy,
        steerings,
        rate_changes,
        reader_windups: clock.reader_windups.load(Ordering::Relaxed),
        standing_reads: clock.standing_reads.load(Ordering::Relaxed),
        refused: clock.ntp_refusal().into_iter().collect(),
        keeper: super::page::describe(),
        realtime_bounds: crate::realtime_bounds(),
    }
}
