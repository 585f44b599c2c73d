//! The refresh thread: asks the sources (chronyd, ClockBound, the kernel)
//! off the read path and publishes the state readers read (`state.rs`).
//!
//! It costs nothing while nobody asks. A read raises [`DEMAND`]; the upkeep
//! thread, which runs while the clock is read, calls [`on_upkeep`] at each
//! of its wakeups, which starts this thread the first time (never a read:
//! a read may be a signal handler) and wakes it when it parked. The thread
//! refreshes at most every [`REFRESH_INTERVAL`] while reads keep raising the
//! demand, and parks, with no timeout, once a whole interval passed without
//! one. A `fork()`ed child's upkeep thread is a new thread, whose
//! thread-local handle is empty: it starts the child's own refresh thread.
//!
//! Why a thread of its own rather than the upkeep thread's time: a query
//! may wait for chronyd (half a second at most, when it hangs), which the
//! upkeep thread's ticks cannot afford.

use std::cell::OnceCell;
use std::io;
#[cfg(target_os = "linux")]
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[cfg(target_os = "linux")]
use super::answers::from_clockbound;
use super::answers::{
    MAX_RATE_PPB, from_kernel, from_tracking, kernel_now, read_rate, realtime_now,
};
use super::chrony::{self, Chronyd, Tracking};
#[cfg(target_os = "linux")]
use super::clockbound;
use super::state::{PUBLISHED, State};
use super::{BoundsStatus, q32};
use crate::os::{KernelClock, NtpState};

/// How often the thread asks the sources while reads come.
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_millis(100);
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

/// Some read wants the state since the last refresh.
static DEMAND: AtomicBool = AtomicBool::new(false);
/// The OS refused the thread: readers ask the kernel themselves.
static REFUSED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The refresh thread, as the upkeep thread (the only caller of
    /// [`on_upkeep`]) started it in this process.
    static REFRESHER: OnceCell<std::thread::Thread> = const { OnceCell::new() };
}

/// A read wants the state: one load, and a store the first time.
#[inline]
pub(crate) fn ask() {
    if !DEMAND.load(Ordering::Relaxed) {
        DEMAND.store(true, Ordering::Relaxed);
    }
}

/// The upkeep thread's hook, at each of its wakeups: when a read asked,
/// starts the refresh thread the first time, or wakes it.
pub(crate) fn on_upkeep() {
    if !DEMAND.load(Ordering::Relaxed) || REFUSED.load(Ordering::Relaxed) {
        return;
    }
    REFRESHER.with(|refresher| {
        if let Some(thread) = refresher.get() {
            thread.unpark();
            return;
        }
        match std::thread::Builder::new()
            .name("timehands-bounds".to_string())
            .spawn(run)
        {
            Ok(handle) => {
                let _ = refresher.set(handle.thread().clone());
            }
            Err(_) => REFUSED.store(true, Ordering::Relaxed),
        }
    });
}

/// The thread's life: refresh while asked, park when not.
fn run() {
    block_signals();
    let mut sources = Sources::new();
    loop {
        if DEMAND.swap(false, Ordering::AcqRel) {
            // Where no source answers and the kernel's state is not read
            // (an OS without one), nothing is published: readers say so.
            if let Some(mut state) = sources.refresh() {
                (state.accuracy_ns, state.accuracy_q32) = our_accuracy();
                PUBLISHED.publish(&state);
            }
            std::thread::sleep(REFRESH_INTERVAL);
        } else {
            std::thread::park();
        }
    }
}

/// No signal handler runs on this thread: a handler that reads the bounds
/// there would find the state half written (it gives up after a few tries
/// and asks the kernel, but need not).
fn block_signals() {
    #[cfg(unix)]
    // SAFETY: a zeroed sigset_t is valid storage for sigfillset, which
    // fills it; pthread_sigmask changes only this thread's mask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
}

/// The kernel's NTP state, read now; on Linux a plain `adjtimex` with no
/// allocation (even on failure), safe in a signal handler.
#[cfg(target_os = "linux")]
pub(crate) fn kernel_ntp() -> io::Result<NtpState> {
    crate::os::ntp_errno()
}

/// The kernel's CLOCK_REALTIME, ns: `clock_gettime(2)` (the vDSO), safe in
/// a signal handler.
pub(crate) fn kernel_realtime() -> u64 {
    kernel_now(KernelClock::Realtime)
}

/// The kernel's NTP state, read now (`ntp_gettime(2)` where the OS has it).
#[cfg(not(target_os = "linux"))]
pub(crate) fn kernel_ntp() -> io::Result<NtpState> {
    crate::os::ntp()
}

/// Our Realtime's bound against the kernel's, ns, and how fast it grows,
/// ppb: what [`getres`](crate::getres) states (which asks the kernel
/// whether it changed its rate, and follows a change), and the rate's
/// uncertainty it grows at. Readers grow it from the state's `as_of`
/// (earlier than now): never less than `getres` would say while the
/// kernel keeps its rate. A rate change between windups that no windup
/// saw yet leaves our Realtime behind the kernel's slew, on the side of
/// chronyd's correction, which the bounds hold already.
fn our_accuracy() -> (u32, u32) {
    let ns = crate::getres(crate::ClockId::Realtime).accuracy.as_nanos();
    let ppb = crate::host::clock().bound.load().ppb;
    (
        u32::try_from(ns).unwrap_or(u32::MAX),
        // At most q32(MAX_RATE_PPB), some 2^22: a u32.
        read_rate(ppb) as u32,
    )
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

/// One answer of chronyd, and when it came.
#[derive(Clone, Copy)]
struct Answer {
    tracking: Tracking,
    /// CLOCK_MONOTONIC_RAW, ns, as the answer arrived.
    received: u64,
}

/// The sources, and what the thread keeps between refreshes.
struct Sources {
    /// chronyd's address (`TIMEHANDS_CHRONYD`, or its default port).
    chronyd_address: String,
    /// The socket to it, made at the first refresh that needs it.
    chronyd: Option<Chronyd>,
    /// chronyd's last answer.
    last_answer: Option<Answer>,
    /// chronyd's `maxclockerror`, ppb, as measured from its dispersion.
    max_clock_error_ppb: Option<u64>,
    /// chronyd's last synchronized state, as it was taken.
    held: Option<Held>,
    /// An update of chronyd's (its `ref_time`) that a step by someone else
    /// came after: its answers give no bound until its next update.
    stepped_after: Option<f64>,
}

impl Sources {
    fn new() -> Sources {
        Sources {
            chronyd_address: std::env::var("TIMEHANDS_CHRONYD")
                .unwrap_or_else(|_| chrony::DEFAULT_ADDRESS.to_string()),
            chronyd: None,
            last_answer: None,
            max_clock_error_ppb: None,
            held: None,
            stepped_after: None,
        }
    }

    /// The state from the best source present now.
    fn refresh(&mut self) -> Option<State> {
        let kernel = kernel_ntp().ok();
        if let Some(state) = self.chronyd_state(kernel.as_ref()) {
            return Some(state);
        }
        #[cfg(target_os = "linux")]
        if let Some(state) = from_clockbound(Path::new(clockbound::DEFAULT_PATH), kernel.as_ref()) {
            return Some(state);
        }
        kernel.map(|kernel| from_kernel(realtime_now(), &kernel))
    }

    /// chronyd's answer now: the tracking and its Realtime (taken before
    /// the request, so that the dispersion it reports is no younger).
    fn ask_chronyd(&mut self) -> io::Result<(Tracking, u64)> {
        if self.chronyd.is_none() {
            self.chronyd = Some(Chronyd::connect(&self.chronyd_address)?);
        }
        let chronyd = self.chronyd.as_mut().expect("connected above");
        let sent = kernel_now(KernelClock::MonotonicRaw);
        let as_of = realtime_now();
        let tracking = chronyd.tracking()?;
        let received = kernel_now(KernelClock::MonotonicRaw);
        if let Some(last) = self.last_answer {
            if let Some(ppb) = max_clock_error_ppb(&last, &tracking, sent) {
                self.max_clock_error_ppb = Some(ppb);
            }
        }
        self.last_answer = Some(Answer { tracking, received });
        Ok((tracking, as_of))
    }

    /// The state from chronyd, or `None` when it does not answer and its
    /// last state cannot be carried on (see [`Sources::carried_on`]).
    fn chronyd_state(&mut self, kernel: Option<&NtpState>) -> Option<State> {
        let mut answer = self.ask_chronyd();
        if let Ok((tracking, _)) = &answer {
            if tracking.synchronized() && self.max_clock_error_ppb.is_none() {
                // A second answer measures the dispersion's growth.
                std::thread::sleep(MEASURE_SPAN);
                answer = self.ask_chronyd();
            }
        }
        let offset = realtime_offset();
        match answer {
            Ok((tracking, as_of)) => {
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
                // A chronyd (re)starting, not synchronized yet, may start
                // slewing at its first update, faster than any bound grows
                // (8.3 %): its predecessor's bound is not carried on.
                self.held = None;
                Some(state)
            }
            Err(_) => {
                self.last_answer = None;
                self.carried_on(offset, kernel.and_then(|k| k.rate_ppb))
            }
        }
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
    /// less both measures' uncertainty (a refresh thread preempted between
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::bounds::{BoundsSource, LeapSecond};

    /// 2026-11-23 12:00:00 UTC, in ns.
    const NOON: u64 = 1_795_435_200_000_000_000;

    /// An offset measured to 100 ns.
    fn at(ns: i64) -> Offset {
        Offset {
            ns,
            uncertainty: 100,
        }
    }

    /// A measure wide by a preemption is no step; a step beyond both
    /// measures' uncertainty is.
    #[test]
    fn an_offset_moved_only_beyond_both_measures() {
        let wide = Offset {
            ns: 2_000_000,
            uncertainty: 2_500_000,
        };
        assert_eq!(wide.moved_from(&at(0)), 0);
        assert_eq!(at(5_000).moved_from(&at(0)), 4_800);
        assert_eq!(at(0).moved_from(&at(5_000)), 4_800);
        let now = realtime_offset();
        assert!(now.uncertainty >= 1, "{now:?}");
    }

    fn tracking(correction: f64, dispersion: f64) -> Tracking {
        Tracking {
            ref_id: 0x7f00_0001,
            leap_status: 0,
            ref_time: 1_795_435_199.5,
            current_correction: correction,
            resid_freq_ppm: -0.25,
            skew_ppm: 0.5,
            root_delay: 100e-6,
            root_dispersion: dispersion,
            last_update_interval: 2.0,
        }
    }

    /// The correction still to slew widens the side it is on, and only
    /// that; the rate is chronyd's skew, residual frequency and
    /// `maxclockerror`, a tenth more for the slew.
    #[test]
    fn chronyd_s_correction_widens_its_own_side() {
        let behind = from_tracking(&tracking(20e-6, 40e-6), NOON, 1_000, None);
        assert_eq!((behind.below, behind.above), (90_000, 110_000));
        assert_eq!(behind.rate_q32, q32(1_925), "(500 + 250 + 1000) * 1.1");
        assert_eq!(behind.status, Some(BoundsStatus::Synchronized));
        assert_eq!(behind.source, BoundsSource::Chronyd);
        assert_eq!(
            behind.free_running_at,
            NOON - SECOND + 16 * SECOND + SECOND / 2
        );
        let ahead = from_tracking(&tracking(-20e-6, 40e-6), NOON, 1_000, None);
        assert_eq!((ahead.below, ahead.above), (110_000, 90_000));
        let unsynchronized = from_tracking(
            &Tracking {
                leap_status: 3,
                ..tracking(0.0, 0.0)
            },
            NOON,
            1_000,
            None,
        );
        assert_eq!(unsynchronized.status, None);
    }

    const SECOND: u64 = 1_000_000_000;

    /// Two answers of one update, 1 s apart, whose dispersion grew by
    /// 1.75 µs: 0.75 ppm of it stated, so `maxclockerror` is 1 ppm.
    #[test]
    fn maxclockerror_is_read_off_the_dispersion_s_growth() {
        let first = Answer {
            tracking: tracking(0.0, 40e-6),
            received: 5 * SECOND,
        };
        let second = tracking(0.0, 41.75e-6);
        let ppb = max_clock_error_ppb(&first, &second, 6 * SECOND).expect("measured");
        assert!((999..=1_001).contains(&ppb), "{ppb}");
        // Another update, answers too close, or unsynchronized: no measure.
        let other = Tracking {
            ref_time: 1_795_435_201.0,
            ..second
        };
        assert_eq!(max_clock_error_ppb(&first, &other, 6 * SECOND), None);
        assert_eq!(
            max_clock_error_ppb(&first, &second, 5 * SECOND + 1_000),
            None
        );
        let lost = Tracking {
            leap_status: 3,
            ..second
        };
        assert_eq!(max_clock_error_ppb(&first, &lost, 6 * SECOND), None);
    }

    /// chronyd's last synchronized state is carried on, free-running and
    /// wider by the step tolerance once, growing faster by a change of the
    /// kernel's rate, while the clock is not stepped; a step, or a slew's
    /// rate, ends it.
    #[test]
    fn a_stopped_chronyd_s_state_is_carried_on_until_a_step() {
        let mut sources = Sources::new();
        assert_eq!(sources.carried_on(at(0), None), None, "nothing held");
        let held = from_tracking(&tracking(20e-6, 40e-6), NOON, 1_000, None);
        let hold = |sources: &mut Sources| {
            sources.held = Some(Held {
                state: held,
                offset: at(5_000),
                ref_time: 1.0,
                rate_ppb: Some(1_000),
                rate_change_ppb: 0,
            });
        };
        hold(&mut sources);
        for _ in 0..2 {
            let carried = sources.carried_on(at(5_400), Some(1_000)).expect("no step");
            assert_eq!(carried.status, Some(BoundsStatus::FreeRunning));
            assert_eq!((carried.below, carried.above), (91_000, 111_000));
            assert_eq!(
                (carried.as_of, carried.rate_q32),
                (held.as_of, held.rate_q32)
            );
        }
        // The kernel's rate moved by 2 ppm, and back: 2 ppm more growth
        // (with the slew's tenth), for good.
        let moved = sources.carried_on(at(5_000), Some(3_000)).expect("no step");
        assert_eq!(moved.rate_q32, held.rate_q32 + q32(2_200));
        let back = sources.carried_on(at(5_000), Some(1_000)).expect("no step");
        assert_eq!(back.rate_q32, moved.rate_q32);
        // A slew's rate is past what the read grows: no bound from then on.
        assert_eq!(
            sources.carried_on(at(5_000), Some(83_333_000)),
            None,
            "a slew"
        );
        assert_eq!(
            sources.carried_on(at(5_000), Some(1_000)),
            None,
            "after a slew"
        );
        hold(&mut sources);
        assert_eq!(
            sources.carried_on(at(5_000 + 1_201), Some(1_000)),
            None,
            "a step"
        );
        assert_eq!(
            sources.carried_on(at(5_000), Some(1_000)),
            None,
            "dropped for good"
        );
    }

    /// A step by someone else while chronyd made no update: no bound from
    /// that update, until chronyd's next; chronyd's own step (at an update)
    /// is no such step.
    #[test]
    fn a_step_by_someone_else_ends_chronyd_s_bound_until_its_next_update() {
        let mut sources = Sources::new();
        let answer = tracking(20e-6, 40e-6);
        sources.held = Some(Held {
            state: from_tracking(&answer, NOON, 1_000, None),
            offset: at(5_000),
            ref_time: answer.ref_time,
            rate_ppb: None,
            rate_change_ppb: 0,
        });
        assert!(
            !sources.stepped_since(&answer, at(5_000 + 100_000)),
            "within the bound"
        );
        assert!(
            sources.stepped_since(&answer, at(5_000 + 300_000_000)),
            "a step"
        );
        assert!(sources.stepped_since(&answer, at(5_000)), "the same update");
        let next = Tracking {
            ref_time: answer.ref_time + 1.0,
            ..answer
        };
        assert!(
            !sources.stepped_since(&next, at(5_000 + 300_000_000)),
            "chronyd's update"
        );
    }

    #[test]
    fn the_kernel_s_maxerror_grows_at_500_ppm_and_an_unsynchronized_kernel_gives_none() {
        let ntp = |synchronized| NtpState {
            synchronized,
            maxerror_us: 1_500,
            esterror_us: 20,
            tai_offset_s: 37,
            leap: LeapSecond::None,
            rate_ppb: None,
        };
        let state = from_kernel(NOON, &ntp(true));
        assert_eq!(
            (state.below, state.above, state.rate_q32),
            (1_500_000, 1_500_000, q32(500_000))
        );
        assert_eq!(state.status, Some(BoundsStatus::Synchronized));
        assert_eq!(from_kernel(NOON, &ntp(false)).status, None);
    }

    /// ClockBound's bound, grown to now, on both sides; its drift with the
    /// slew's tenth.
    #[cfg(target_os = "linux")]
    #[test]
    #[cfg_attr(miri, ignore = "reads the kernel's clocks")]
    fn clockbound_s_segment_gives_its_bound() {
        let monotonic = kernel_now(KernelClock::Monotonic);
        let mut segment = vec![0u8; 80];
        segment[0..4].copy_from_slice(&0x414D_5A4Eu32.to_ne_bytes());
        segment[4..8].copy_from_slice(&0x4342_0200u32.to_ne_bytes());
        segment[12..14].copy_from_slice(&2u16.to_ne_bytes());
        segment[14..16].copy_from_slice(&2u16.to_ne_bytes());
        let as_of = monotonic / SECOND;
        segment[16..24].copy_from_slice(&(as_of as i64).to_ne_bytes());
        segment[32..40].copy_from_slice(&(as_of as i64 + 1000).to_ne_bytes());
        segment[48..56].copy_from_slice(&91_000i64.to_ne_bytes());
        segment[64..68].copy_from_slice(&1_000u32.to_ne_bytes());
        segment[68..72].copy_from_slice(&1i32.to_ne_bytes());
        let path =
            std::env::temp_dir().join(format!("timehands-clockbound-{}", std::process::id()));
        std::fs::write(&path, &segment).expect("a temporary file");
        let state = from_clockbound(&path, None).expect("a reading");
        std::fs::remove_file(&path).expect("removed");
        assert_eq!(state.source, BoundsSource::ClockBound);
        assert_eq!(state.status, Some(BoundsStatus::Synchronized));
        assert_eq!(state.below, state.above);
        // 91 µs, and 1 ppm for at most a few seconds since.
        assert!((91_000..100_000).contains(&state.below), "{state:?}");
        assert_eq!(state.rate_q32, q32(1_100));
        assert_eq!(from_clockbound(Path::new("/nonexistent/shm0"), None), None);
    }
}
