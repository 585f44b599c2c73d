//! Each source's answer as the state readers read: chronyd's tracking,
//! ptp4l's status, ClockBound 3's and 2's pages, the VMClock device's
//! clock, the kernel's NTP state. Every state carries the
//! kernel's leap second, TAI − UTC and errors (a void state's), and its
//! source's own bound: how far below and above the kernel's Realtime UTC
//! can be when it was taken, how fast that grows, and until when it holds.
//! The readers' steps (`steps.rs`, `refresh.rs`) ask the sources and
//! publish these.

use std::time::Duration;

use super::chrony::Tracking;
#[cfg(target_os = "linux")]
use super::clockbound::{ClockBoundReading, ClockBoundStatus};
use super::state::State;
#[cfg(target_os = "linux")]
use super::ticking::{CounterClock, counter};
use super::{BoundsSource, BoundsStatus, LeapSecond, MAX_RATE_PPB, q32};
#[cfg(target_os = "linux")]
use super::{clockbound3, ptp, vmclock};
use crate::os::{KernelClock, NtpState};

/// How long a state holds after it was taken: then reads ask the kernel.
/// ClockBound's daemon gives its readings the same life (its `void_after`).
pub(crate) const VALIDITY: Duration = Duration::from_secs(1000);
/// Readers count a state's age in Realtime, which chronyd slews as much as
/// 8.33 % slow: a rate per true second is a tenth more per Realtime second.
const SLEW_MARGIN_TENTHS: u64 = 11;
/// The kernel grows its `maxerror` by 500 µs each of its seconds.
const KERNEL_RATE_PPB: u64 = 500_000;
/// ClockBound's daemon writes its segment every second: one not written
/// for this long has no daemon behind it (its status would still say
/// synchronized), and is taken as absent.
#[cfg(target_os = "linux")]
const CLOCKBOUND_STALE: Duration = Duration::from_secs(10);

/// A Realtime, ns (ours).
pub(super) fn realtime_now() -> u64 {
    crate::host::read::realtime_with_second().0
}

/// The kernel's clock `clock`, ns (0 if it cannot be read).
pub(super) fn kernel_now(clock: KernelClock) -> u64 {
    crate::os::kernel_nanos(clock).unwrap_or(0)
}

/// `rate_ppb` as readers grow it: with the slew margin, at most
/// [`MAX_RATE_PPB`], as [`q32`].
pub(super) fn read_rate(rate_ppb: u64) -> u64 {
    q32((rate_ppb.saturating_mul(SLEW_MARGIN_TENTHS) / 10).min(MAX_RATE_PPB))
}

/// `seconds` as whole ns, rounded up (for bounds: never narrower).
pub(super) fn ceil_ns(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e9).ceil() as u64
}

/// A state that holds nothing (void from the start), with the kernel's
/// leap second, TAI − UTC and errors, and our accuracy still to be stamped
/// by `run` at each publication (`our_accuracy`): what every source's state
/// is, with its own bound.
fn void(kernel: Option<&NtpState>) -> State {
    State {
        as_of: 0,
        below: 0,
        above: 0,
        rate_q32: 0,
        void_at: 0,
        free_running_at: u64::MAX,
        source: BoundsSource::Kernel,
        status: None,
        leap: kernel.map_or(LeapSecond::None, |k| k.leap),
        tai_offset_s: kernel.map_or(0, |k| k.tai_offset_s),
        accuracy_ns: 0,
        accuracy_q32: 0,
        kernel_max_error: Duration::from_micros(kernel.map_or(0, |k| k.maxerror_us)),
        kernel_estimated_error: Duration::from_micros(kernel.map_or(0, |k| k.esterror_us)),
        counter: None,
        marker: None,
    }
}

/// The state chronyd's `tracking` gives at Realtime `as_of`, with its
/// `maxclockerror` (ppb).
///
/// UTC is within the root distance of chronyd's estimate of true time,
/// which is the Realtime plus the correction still to come; the kernel
/// only closes that correction (slewing, or stepping it away) until
/// chronyd's next update, so it widens the side it is on, and only that.
pub(super) fn from_tracking(
    tracking: &Tracking,
    as_of: u64,
    max_clock_error_ppb: u64,
    kernel: Option<&NtpState>,
) -> State {
    let leap = match (
        tracking.leap_status,
        kernel.map_or(LeapSecond::None, |k| k.leap),
    ) {
        (_, LeapSecond::InProgress) => LeapSecond::InProgress,
        (1, _) => LeapSecond::Insert,
        (2, _) => LeapSecond::Delete,
        _ => LeapSecond::None,
    };
    let distance = ceil_ns(tracking.root_distance());
    let correction = ceil_ns(tracking.current_correction.abs());
    let (below, above) = if tracking.current_correction > 0.0 {
        // The Realtime is behind chronyd's estimate: UTC may be ahead.
        (distance, distance.saturating_add(correction))
    } else {
        (distance.saturating_add(correction), distance)
    };
    let stated_ppb = ((tracking.skew_ppm + tracking.resid_freq_ppm.abs()) * 1e3).ceil() as u64;
    // ClockBound's rule: no update for eight update intervals is free
    // running (the interval is 0 before chronyd's second update).
    let quiet = ceil_ns(8.0 * tracking.last_update_interval.max(1.0));
    State {
        as_of,
        below,
        above,
        rate_q32: read_rate(stated_ppb.saturating_add(max_clock_error_ppb)),
        void_at: as_of.saturating_add(VALIDITY.as_nanos() as u64),
        free_running_at: ceil_ns(tracking.ref_time).saturating_add(quiet),
        source: BoundsSource::Chronyd,
        status: tracking
            .synchronized()
            .then_some(BoundsStatus::Synchronized),
        leap,
        ..void(kernel)
    }
}

/// The state from ClockBound's `reading`, or `None` where it is stale (no
/// daemon writes it).
#[cfg(target_os = "linux")]
pub(super) fn from_clockbound(
    reading: &ClockBoundReading,
    kernel: Option<&NtpState>,
) -> Option<State> {
    // ClockBound's times are CLOCK_MONOTONIC_COARSE; the precise clock is
    // at or after it, so the age it gives is no smaller.
    let monotonic = Duration::from_nanos(kernel_now(KernelClock::Monotonic));
    if monotonic.saturating_sub(reading.as_of) > CLOCKBOUND_STALE {
        return None;
    }
    let as_of = realtime_now();
    let bound = reading.bound_at(monotonic);
    let left = reading.void_after.saturating_sub(monotonic);
    Some(State {
        as_of,
        below: bound.map_or(0, |b| b.as_nanos() as u64),
        above: bound.map_or(0, |b| b.as_nanos() as u64),
        rate_q32: read_rate(u64::from(reading.max_drift_ppb)),
        void_at: as_of.saturating_add(left.min(VALIDITY).as_nanos() as u64),
        free_running_at: if reading.status == ClockBoundStatus::FreeRunning {
            as_of
        } else {
            u64::MAX
        },
        source: BoundsSource::ClockBound,
        status: bound.map(|_| BoundsStatus::Synchronized),
        ..void(kernel)
    })
}

/// `span` ns of a source's own time as a span of our Realtime it surely
/// outlasts (ours may run a tenth fast, slewed).
#[cfg(target_os = "linux")]
fn within(span: u64) -> u64 {
    (span / SLEW_MARGIN_TENTHS * 10).min(VALIDITY.as_nanos() as u64)
}

/// The state of a source's `clock` on the counter (see `ticking.rs`) with
/// `status`, taken now: void after `void_in` ns of the source's time,
/// free-running after `free_running_in`.
#[cfg(target_os = "linux")]
fn from_counter_clock(
    source: BoundsSource,
    clock: CounterClock,
    status: Option<BoundsStatus>,
    (void_in, free_running_in): (u64, u64),
    kernel: Option<&NtpState>,
) -> State {
    let as_of = realtime_now();
    State {
        as_of,
        void_at: as_of.saturating_add(within(void_in)),
        free_running_at: as_of.saturating_add(within(free_running_in)),
        source,
        status,
        counter: Some(clock),
        ..void(kernel)
    }
}

/// The state from ClockBound 3's `reading`, with the VMClock device's
/// marker where there is one; `None` where it is void (no daemon writes
/// it) or its clock does not fit.
#[cfg(target_os = "linux")]
pub(super) fn from_clockbound3(
    reading: &clockbound3::Reading,
    device_marker: Option<u64>,
    kernel: Option<&NtpState>,
) -> Option<State> {
    let clock = reading.clock?;
    let now = clock.time_at(counter());
    if now > reading.void_after_ns {
        return None;
    }
    let status = reading.status_at(now, device_marker);
    let free_running_in = match status {
        Some(BoundsStatus::Synchronized) => {
            (reading.as_of_ns + clockbound3::FREE_RUNNING_AFTER_NS).saturating_sub(now)
        }
        _ => 0,
    };
    let spans = (reading.void_after_ns - now, free_running_in);
    Some(from_counter_clock(
        BoundsSource::ClockBound3,
        clock,
        status,
        spans,
        kernel,
    ))
}

/// The state from the VMClock device's clock, where it gives one.
#[cfg(target_os = "linux")]
pub(super) fn from_vmclock(reading: &vmclock::Reading, kernel: Option<&NtpState>) -> Option<State> {
    let (clock, status) = reading.clock?;
    let free_running_in = match status {
        BoundsStatus::FreeRunning => 0,
        _ => u64::MAX,
    };
    Some(State {
        tai_offset_s: reading.tai_offset_s,
        leap: reading.leap,
        ..from_counter_clock(
            BoundsSource::VmClock,
            clock,
            Some(status),
            (u64::MAX, free_running_in),
            kernel,
        )
    })
}

/// ptp4l's bound, free-running once its last Sync is this old (ptp4l
/// sends one a second or more often).
#[cfg(target_os = "linux")]
const PTP_FREE_RUNNING_AFTER_NS: u64 = 10_000_000_000;

/// The state from ptp4l's `status`, where it gives a bound (see
/// `ptp.rs`): held at the Sync's ingress, growing at the kernel's rate.
#[cfg(target_os = "linux")]
pub(super) fn from_ptp4l(status: &ptp::Status, kernel: Option<&NtpState>) -> Option<State> {
    let (half, ingress) = status.bound()?;
    Some(State {
        as_of: ingress,
        below: half,
        above: half,
        // The kernel counts its own seconds: no slew margin.
        rate_q32: q32(KERNEL_RATE_PPB),
        void_at: ingress.saturating_add(VALIDITY.as_nanos() as u64),
        free_running_at: ingress.saturating_add(PTP_FREE_RUNNING_AFTER_NS),
        source: BoundsSource::Ptp4l,
        status: Some(BoundsStatus::Synchronized),
        ..void(kernel)
    })
}

/// The state from the kernel's NTP state at Realtime `as_of`.
pub(super) fn from_kernel(as_of: u64, kernel: &NtpState) -> State {
    let max_error_ns = kernel.maxerror_us.saturating_mul(1_000);
    State {
        as_of,
        below: max_error_ns,
        above: max_error_ns,
        // The kernel counts its own seconds: no slew margin.
        rate_q32: q32(KERNEL_RATE_PPB),
        void_at: as_of.saturating_add(VALIDITY.as_nanos() as u64),
        free_running_at: u64::MAX,
        source: BoundsSource::Kernel,
        status: kernel.synchronized.then_some(BoundsStatus::Synchronized),
        ..void(Some(kernel))
    }
}
