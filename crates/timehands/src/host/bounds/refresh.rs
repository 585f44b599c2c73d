//! The sources, as the readers' steps (`steps.rs`) advance them: each
//! step takes chronyd's answer to the request the step before sent (a
//! non-blocking `recv`), ptp4l's answers the same way, reads the daemons'
//! mapped pages (ClockBound 3's and 2's, the VMClock device's) with loads
//! and the kernel's NTP state with `adjtimex`, gives the best source's
//! state, and sends chronyd and ptp4l the next requests; and keeps what
//! the steps need between them (chronyd's last state, its measured
//! `maxclockerror`, a step seen, a migration seen). Nothing here waits,
//! allocates or locks: a step may be a signal handler.

use std::net::SocketAddr;
use std::time::Duration;

#[cfg(target_os = "linux")]
use super::answers::{from_clockbound, from_clockbound3, from_ptp4l, from_vmclock};
use super::answers::{from_kernel, from_tracking, kernel_now, read_rate, realtime_now};
use super::chrony::Tracking;
#[cfg(unix)]
use super::chrony::{self, Chronyd, Received};
use super::environment::chronyd_address;
#[cfg(target_os = "linux")]
use super::environment::ptp4l_path;
#[cfg(target_os = "linux")]
use super::mapping::Page;
#[cfg(target_os = "linux")]
use super::ptp::{self, Ptp4l};
use super::state::State;
use super::{BoundsStatus, MAX_RATE_PPB, q32};
#[cfg(target_os = "linux")]
use super::{clockbound, clockbound3, vmclock};
use crate::os::{KernelClock, NtpState};

/// How often the sources are asked while reads come.
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_millis(100);
/// How soon after a request a read first looks for chronyd's answer (it
/// comes in tens of microseconds); then after as long again as it waited,
/// up to chronyd's [`TIMEOUT`](chrony::TIMEOUT).
const PICKUP: Duration = Duration::from_millis(1);
/// chronyd does not report its `maxclockerror`; until two answers of the
/// same update show how fast its dispersion grows, this much is assumed
/// (chrony's default is 1 ppm; this covers a configuration's larger one).
const ASSUMED_MAX_CLOCK_ERROR_PPB: u64 = 100_000;
/// A change of CLOCK_REALTIME − CLOCK_MONOTONIC this large, beyond both
/// measures' own uncertainty (see [`Offset::moved_from`]), is a step.
const STEP_TOLERANCE_NS: u64 = 1_000;
/// Two answers this far apart (at least) measure the dispersion's growth
/// to better than 1 % (a loopback round trip is some tens of µs).
const MEASURE_SPAN: Duration = Duration::from_millis(20);

/// The kernel's NTP state, read now; on Linux a plain `adjtimex` with no
/// allocation (even on failure), safe in a signal handler.
#[cfg(target_os = "linux")]
pub(crate) fn kernel_ntp() -> std::io::Result<NtpState> {
    crate::os::ntp_errno()
}

/// The kernel's CLOCK_REALTIME, ns: `clock_gettime(2)` (the vDSO), safe in
/// a signal handler.
pub(crate) fn kernel_realtime() -> u64 {
    kernel_now(KernelClock::Realtime)
}

/// The kernel's NTP state, read now (`ntp_gettime(2)` where the OS has it).
#[cfg(not(target_os = "linux"))]
pub(crate) fn kernel_ntp() -> std::io::Result<NtpState> {
    crate::os::ntp()
}

/// chronyd's last synchronized state, and the kernel's clock when it was
/// taken.
#[derive(Clone, Copy)]
struct Held {
    state: State,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC (see [`realtime_offset`]).
    offset: Offset,
    /// chronyd's update it came from (its `ref_time`).
    ref_time: f64,
    /// The kernel clock's rate, ppb, as `adjtimex` says it.
    rate_ppb: Option<i64>,
    /// The largest change of that rate seen since, ppb.
    rate_change_ppb: u64,
}

/// One answer of chronyd, and when it came (chronyd is asked on unix).
#[derive(Clone, Copy)]
#[cfg_attr(not(unix), allow(dead_code))]
struct Answer {
    tracking: Tracking,
    /// CLOCK_MONOTONIC_RAW, ns, as the answer arrived.
    received: u64,
}

/// chronyd's request in flight: when it was sent (chronyd is asked on
/// unix).
#[derive(Clone, Copy)]
#[cfg_attr(not(unix), allow(dead_code))]
struct Asked {
    /// CLOCK_MONOTONIC_RAW, ns, as it was sent.
    sent: u64,
    /// Our Realtime before it was sent: the answer's state holds from
    /// there (the dispersion chronyd reports is no younger).
    as_of: u64,
}

/// The sources, and what the steps keep between them.
pub(super) struct Sources {
    /// The process they belong to (0: none yet).
    pid: u32,
    /// chronyd's address (`None`: `TIMEHANDS_CHRONYD` did not parse).
    #[cfg(unix)]
    address: Option<SocketAddr>,
    /// The socket to it, made at the first step that asks.
    #[cfg(unix)]
    chronyd: Option<Chronyd>,
    /// chronyd's request in flight.
    asked: Option<Asked>,
    /// chronyd's last answer.
    last_answer: Option<Answer>,
    /// chronyd's `maxclockerror`, ppb, as measured from its dispersion.
    max_clock_error_ppb: Option<u64>,
    /// chronyd's last synchronized state, as it was taken.
    held: Option<Held>,
    /// An update of chronyd's (its `ref_time`) that a step by someone else
    /// came after: its answers give no bound until its next update.
    stepped_after: Option<f64>,
    /// ClockBound 2's segment and ClockBound 3's page, mapped.
    #[cfg(target_os = "linux")]
    clockbound: Page,
    #[cfg(target_os = "linux")]
    clockbound3: Page,
    /// Where the VMClock device is, and its marker when last read.
    #[cfg(target_os = "linux")]
    vmclock: &'static std::ffi::CStr,
    marker: Option<u64>,
    /// After the device's marker changed (a migration), ClockBound 2's
    /// readings no later than this CLOCK_MONOTONIC, and the kernel's state
    /// while its `maxerror` (µs) is not below this, give no bound: they
    /// have not answered anew.
    #[cfg(target_os = "linux")]
    clockbound_after: Option<Duration>,
    kernel_after: Option<u64>,
    /// The socket to ptp4l, when its last round went (CLOCK_MONOTONIC_RAW),
    /// its last whole round, and the Realtime of a migration its Syncs
    /// before give no bound.
    #[cfg(target_os = "linux")]
    ptp4l: Option<Ptp4l>,
    #[cfg(target_os = "linux")]
    ptp4l_sent: Option<u64>,
    #[cfg(target_os = "linux")]
    ptp4l_status: Option<ptp::Status>,
    #[cfg(target_os = "linux")]
    ptp4l_after: Option<u64>,
}

impl Sources {
    pub(super) const fn new(pid: u32, address: Option<SocketAddr>) -> Sources {
        // Where chrony does not run (not unix), nobody asks it.
        #[cfg(not(unix))]
        let _ = address;
        Sources {
            pid,
            #[cfg(unix)]
            address,
            #[cfg(unix)]
            chronyd: None,
            asked: None,
            last_answer: None,
            max_clock_error_ppb: None,
            held: None,
            stepped_after: None,
            #[cfg(target_os = "linux")]
            clockbound: Page::new(clockbound::DEFAULT_PATH_C),
            #[cfg(target_os = "linux")]
            clockbound3: Page::new(clockbound3::DEFAULT_PATH),
            #[cfg(target_os = "linux")]
            vmclock: vmclock::DEFAULT_PATH,
            marker: None,
            #[cfg(target_os = "linux")]
            clockbound_after: None,
            kernel_after: None,
            #[cfg(target_os = "linux")]
            ptp4l: None,
            #[cfg(target_os = "linux")]
            ptp4l_sent: None,
            #[cfg(target_os = "linux")]
            ptp4l_status: None,
            #[cfg(target_os = "linux")]
            ptp4l_after: None,
        }
    }

    /// Sources of process `pid`'s own: afresh, where they were another's
    /// (none yet, or a parent's before a fork: its socket would take the
    /// parent's answers, and is closed in this process). `torn`: the
    /// parent's step was under way at the fork, and may have left them
    /// half changed: their descriptors are left as they are.
    pub(super) fn belong_to(&mut self, pid: u32, torn: bool) {
        if self.pid == pid {
            return;
        }
        let old = std::mem::replace(self, Sources::new(pid, chronyd_address()));
        // Only unix has descriptors here (chronyd's socket, the pages).
        #[cfg(unix)]
        if torn {
            std::mem::forget(old);
        }
        #[cfg(not(unix))]
        let _ = (old, torn);
    }

    /// One step: the state to publish (`None`: nothing new, chronyd's
    /// answer still to come), and how long until the next.
    pub(super) fn advance(&mut self) -> (Option<State>, Duration) {
        #[cfg(target_os = "linux")]
        self.poll_ptp4l();
        let answer = match self.asked.take() {
            None if self.ask_chronyd() => return (None, PICKUP),
            // chronyd cannot be asked (no address, no socket): as if it
            // did not answer.
            None => None,
            Some(asked) => match self.answer(asked) {
                Ok(answer) => answer,
                Err(waited) => {
                    self.asked = Some(asked);
                    return (None, waited.max(PICKUP));
                }
            },
        };
        let kernel = kernel_ntp().ok();
        #[cfg(target_os = "linux")]
        let device = self.watch_vmclock(kernel.as_ref());
        let measuring =
            answer.is_some_and(|(t, _)| t.synchronized()) && self.max_clock_error_ppb.is_none();
        // Every state carries the device's marker, for the reads to check.
        let marker = self.marker;
        let marked = |state: State| State { marker, ..state };
        if let Some(state) = self.chronyd_state(answer, kernel.as_ref()) {
            // A second answer measures the dispersion's growth.
            let wait = if measuring {
                MEASURE_SPAN
            } else {
                REFRESH_INTERVAL
            };
            return (Some(marked(state)), wait);
        }
        #[cfg(target_os = "linux")]
        if let Some(state) = self.daemons_state(device.as_ref(), kernel.as_ref()) {
            return (Some(marked(state)), REFRESH_INTERVAL);
        }
        let state = kernel.map(|kernel| {
            let state = from_kernel(realtime_now(), &kernel);
            match self.kernel_after {
                // Its daemon has updated it since the migration.
                Some(then) if kernel.maxerror_us < then => {
                    self.kernel_after = None;
                    state
                }
                Some(_) => State {
                    status: None,
                    ..state
                },
                None => state,
            }
        });
        (state.map(marked), REFRESH_INTERVAL)
    }

    /// The VMClock device now, where there is one; a marker changed since
    /// the last step (a migration, a restore) withholds each source's bound
    /// until it answers anew: chronyd's until its next update (its last
    /// state is not carried on), ClockBound 2's until a reading taken
    /// since, the kernel's until its daemon lowers its `maxerror`.
    /// ClockBound 3 compares its own marker with the device's.
    #[cfg(target_os = "linux")]
    fn watch_vmclock(&mut self, kernel: Option<&NtpState>) -> Option<vmclock::Reading> {
        let device = vmclock::read(self.vmclock);
        // A page being written at each try keeps the marker last read: the
        // reads still load the word itself.
        let marker = device.map(|d| d.marker)?;
        if self.marker.is_some_and(|last| last != marker) {
            self.stepped_after = self
                .last_answer
                .map(|a| a.tracking.ref_time)
                .or(self.held.map(|h| h.ref_time));
            self.held = None;
            self.clockbound_after = Some(Duration::from_nanos(kernel_now(KernelClock::Monotonic)));
            self.kernel_after = kernel.map(|k| k.maxerror_us);
            self.ptp4l_after = Some(realtime_now());
        }
        self.marker = Some(marker);
        device
    }

    /// Takes ptp4l's answers to the round the last step sent, and sends the
    /// next round once that one is whole, or given up (not whole in
    /// chronyd's timeout: no ptp4l answering there).
    #[cfg(target_os = "linux")]
    fn poll_ptp4l(&mut self) {
        let now = kernel_now(KernelClock::MonotonicRaw);
        if let (Some(ptp4l), Some(sent)) = (self.ptp4l.as_mut(), self.ptp4l_sent) {
            let status = ptp4l.receive();
            if status.whole() {
                self.ptp4l_status = Some(status);
            } else if now.saturating_sub(sent) < chrony::TIMEOUT.as_nanos() as u64 {
                return;
            } else {
                self.ptp4l_status = None;
            }
        }
        self.ptp4l_sent = None;
        if self.ptp4l.is_none() {
            self.ptp4l = Ptp4l::open(ptp4l_path(&mut [0; 108])).ok();
        }
        match self.ptp4l.as_mut().map(Ptp4l::send) {
            Some(Ok(())) => self.ptp4l_sent = Some(now),
            // Refused: no ptp4l there now (a new one may come).
            _ => {
                self.ptp4l = None;
                self.ptp4l_status = None;
            }
        }
    }

    /// The state from the other daemons, the first that gives one:
    /// ptp4l's, ClockBound 3's page, ClockBound 2's, the VMClock device's.
    #[cfg(target_os = "linux")]
    fn daemons_state(
        &mut self,
        device: Option<&vmclock::Reading>,
        kernel: Option<&NtpState>,
    ) -> Option<State> {
        if let Some(state) = self.ptp4l_status.and_then(|s| from_ptp4l(&s, kernel)) {
            let before = self.ptp4l_after.is_some_and(|t| state.as_of <= t);
            return Some(State {
                status: state.status.filter(|_| !before),
                ..state
            });
        }
        if let Some(reading) = clockbound3::look(&mut self.clockbound3) {
            match from_clockbound3(&reading, self.marker, kernel) {
                Some(state) => return Some(state),
                // Void: its daemon may have gone, or made a new file.
                None => self.clockbound3.unmap(),
            }
        }
        if let Some(reading) = clockbound::look(&mut self.clockbound) {
            match from_clockbound(&reading, kernel) {
                Some(state) => {
                    let before = self.clockbound_after.is_some_and(|t| reading.as_of <= t);
                    return Some(State {
                        status: state.status.filter(|_| !before),
                        ..state
                    });
                }
                // Stale: its daemon may have gone, or made a new file.
                None => self.clockbound.unmap(),
            }
        }
        device.and_then(|device| from_vmclock(device, kernel))
    }

    /// Sends chronyd a request; whether it went.
    #[cfg(unix)]
    fn ask_chronyd(&mut self) -> bool {
        let Some(address) = self.address else {
            return false;
        };
        if self.chronyd.is_none() {
            self.chronyd = Chronyd::open(address).ok();
        }
        let Some(chronyd) = self.chronyd.as_mut() else {
            return false;
        };
        let sent = kernel_now(KernelClock::MonotonicRaw);
        let as_of = realtime_now();
        // A refusal left on the socket: no chronyd there now.
        if chronyd.send().is_err() {
            return false;
        }
        self.asked = Some(Asked { sent, as_of });
        true
    }

    #[cfg(not(unix))]
    fn ask_chronyd(&mut self) -> bool {
        false
    }

    /// chronyd's answer to `asked` with the Realtime its state holds from,
    /// `None` when it failed or never came; `Err` with how long it has been
    /// waited for while it may still come.
    #[cfg(unix)]
    fn answer(&mut self, asked: Asked) -> Result<Option<(Tracking, u64)>, Duration> {
        let Some(chronyd) = self.chronyd.as_mut() else {
            return Ok(None);
        };
        let tracking = match chronyd.receive() {
            Received::Tracking(tracking) => tracking,
            Received::Nothing => {
                let waited = Duration::from_nanos(
                    kernel_now(KernelClock::MonotonicRaw).saturating_sub(asked.sent),
                );
                return if waited < chrony::TIMEOUT {
                    Err(waited)
                } else {
                    Ok(None)
                };
            }
            Received::Failed => return Ok(None),
        };
        // Taken late (it waited in the socket), the answer is dated no
        // earlier than it came: the span to the next request, and so the
        // measured rate, errs on the side of more.
        let received = kernel_now(KernelClock::MonotonicRaw);
        if let Some(last) = self.last_answer {
            if let Some(ppb) = max_clock_error_ppb(&last, &tracking, asked.sent) {
                self.max_clock_error_ppb = Some(ppb);
            }
        }
        self.last_answer = Some(Answer { tracking, received });
        Ok(Some((tracking, asked.as_of)))
    }

    #[cfg(not(unix))]
    fn answer(&mut self, _: Asked) -> Result<Option<(Tracking, u64)>, Duration> {
        Ok(None)
    }

    /// The state from chronyd's `answer`, or, without one, its last state
    /// carried on; `None` when neither is to be had (see
    /// [`Sources::carried_on`]).
    fn chronyd_state(
        &mut self,
        answer: Option<(Tracking, u64)>,
        kernel: Option<&NtpState>,
    ) -> Option<State> {
        let offset = realtime_offset();
        let Some((tracking, as_of)) = answer else {
            self.last_answer = None;
            return self.carried_on(offset, kernel.and_then(|k| k.rate_ppb));
        };
        let state = from_tracking(
            &tracking,
            as_of,
            self.max_clock_error_ppb
                .unwrap_or(ASSUMED_MAX_CLOCK_ERROR_PPB),
            kernel,
        );
        let rate_ppb = kernel.and_then(|k| k.rate_ppb);
        if state.status.is_some() {
            if self.stepped_since(&tracking, offset) {
                self.held = None;
                return Some(State {
                    status: None,
                    ..state
                });
            }
            self.held = Some(Held {
                state,
                offset,
                ref_time: tracking.ref_time,
                rate_ppb,
                rate_change_ppb: 0,
            });
            return Some(state);
        }
        // A chronyd (re)starting, not synchronized yet, may start slewing
        // at its first update, faster than any bound grows (8.3 %): its
        // predecessor's bound is not carried on.
        self.held = None;
        Some(state)
    }

    /// Whether someone other than chronyd stepped the clock since chronyd's
    /// update that `tracking` reports: CLOCK_REALTIME − CLOCK_MONOTONIC
    /// (`offset` now) moved by more than the bound chronyd gave while
    /// chronyd made no update (chronyd steps only at an update, by its
    /// correction). Its answers give no bound until its next update, which
    /// measures the step. A step and an update of chronyd's between two
    /// refreshes go unseen until chronyd measures the step.
    fn stepped_since(&mut self, tracking: &Tracking, offset: Offset) -> bool {
        if self.stepped_after == Some(tracking.ref_time) {
            return true;
        }
        self.stepped_after = None;
        let Some(held) = &self.held else {
            return false;
        };
        let bound = held.state.below.max(held.state.above);
        let stepped = held.ref_time == tracking.ref_time
            && offset.moved_from(&held.offset) > STEP_TOLERANCE_NS.saturating_add(bound);
        if stepped {
            self.stepped_after = Some(tracking.ref_time);
        }
        stepped
    }

    /// chronyd's last synchronized state, free-running, while chronyd does
    /// not answer (stopped): it holds as long as nobody stepped the clock
    /// since, and grows at the rate
    /// chronyd stated, plus any change of the kernel clock's rate since
    /// (`rate_ppb`, now: chronyd's exit, or a new chronyd's slew, changes
    /// it; the largest change seen counts from the state's time on). A step
    /// changes CLOCK_REALTIME − CLOCK_MONOTONIC, which no slew does; one
    /// larger than [`STEP_TOLERANCE_NS`] beyond the measures' uncertainty
    /// drops the state for good.
    fn carried_on(&mut self, offset: Offset, rate_ppb: Option<i64>) -> Option<State> {
        let held = self.held.as_mut()?;
        if offset.moved_from(&held.offset) > STEP_TOLERANCE_NS {
            self.held = None;
            return None;
        }
        if let (Some(then), Some(now)) = (held.rate_ppb, rate_ppb) {
            held.rate_change_ppb = held.rate_change_ppb.max(now.abs_diff(then));
        }
        // A rate past MAX_RATE_PPB (a slew) is no bound the read can grow:
        // none then.
        let rate_q32 = held.state.rate_q32 + read_rate(held.rate_change_ppb);
        if rate_q32 > q32(MAX_RATE_PPB) {
            return None;
        }
        let held = held.state;
        // Invariant: computed from the held state each time, so that the
        // tolerance is added once, and the growth runs from chronyd's
        // last word.
        Some(State {
            status: Some(BoundsStatus::FreeRunning),
            free_running_at: held.as_of,
            below: held.below.saturating_add(STEP_TOLERANCE_NS),
            above: held.above.saturating_add(STEP_TOLERANCE_NS),
            rate_q32,
            ..held
        })
    }
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC, as measured: slews move both clocks
/// alike; only a step changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Offset {
    /// Realtime against the midpoint of two reads of Monotonic around it, ns.
    ns: i64,
    /// Half the span of those two reads, ns: the measure is this close.
    uncertainty: u64,
}

impl Offset {
    /// How far the offset surely moved since `then`, ns: the difference
    /// less both measures' uncertainty (a step preempted between
    /// its reads measures wide, and is not taken for a step).
    fn moved_from(&self, then: &Offset) -> u64 {
        self.ns
            .abs_diff(then.ns)
            .saturating_sub(self.uncertainty + then.uncertainty)
    }
}

/// The offset now: the narrowest of a few measures (Realtime read between
/// two reads of Monotonic).
fn realtime_offset() -> Offset {
    (0..3)
        .map(|_| {
            let before = kernel_now(KernelClock::Monotonic);
            let realtime = kernel_now(KernelClock::Realtime);
            let after = kernel_now(KernelClock::Monotonic);
            Offset {
                ns: realtime as i64 - (before / 2 + after / 2) as i64,
                uncertainty: after.saturating_sub(before).div_ceil(2) + 1,
            }
        })
        .min_by_key(|o| o.uncertainty)
        .expect("three measures")
}

/// chronyd's `maxclockerror` (ppb) from two answers of the same update:
/// the dispersion grew at skew + |residual frequency| + `maxclockerror`
/// between them. The span between chronyd's two answers is at least the
/// span from the first's arrival to the second's request (`sent`, both
/// CLOCK_MONOTONIC_RAW, which no daemon slews): dividing by it gives a
/// rate no smaller than the true one. `None` when the answers are of
/// different updates, unsynchronized, or too close to measure.
#[cfg_attr(not(unix), allow(dead_code))]
fn max_clock_error_ppb(last: &Answer, now: &Tracking, sent: u64) -> Option<u64> {
    let span = sent.checked_sub(last.received)?;
    if span < MEASURE_SPAN.as_nanos() as u64
        || last.tracking.ref_time != now.ref_time
        || !now.synchronized()
        || !last.tracking.synchronized()
    {
        return None;
    }
    let growth = now.root_dispersion - last.tracking.root_dispersion;
    let rate_ppb = growth / (span as f64 * 1e-9) * 1e9;
    let stated_ppb = (now.skew_ppm + now.resid_freq_ppm.abs()) * 1e3;
    Some((rate_ppb - stated_ppb).max(0.0).ceil() as u64)
}

#[cfg(all(test, target_os = "linux"))]
#[path = "counter_sources_tests.rs"]
pub(super) mod counter_sources_tests;

#[cfg(test)]
#[path = "refresh_tests.rs"]
mod tests;
