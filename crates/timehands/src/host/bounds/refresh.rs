//! The bounds' steps: the readers keep the state (`state.rs`) themselves,
//! as the kernel's readers need nobody's thread. A read that finds the
//! state due ([`keep`]: the last step older than the wait it set, 100 ms
//! while the sources answer) and wins a flag advances the sources one
//! step, without waiting for anything: it takes chronyd's answer to the
//! request the step before sent (a non-blocking `recv`), reads
//! ClockBound's mapped segment with loads and the kernel's NTP state with
//! `adjtimex`, publishes the best source's state, and sends chronyd the
//! next request. A read that loses the flag, or finds a step under way on
//! its own thread (a signal handler over it), goes on with the state
//! published: nobody waits, nobody spins on another thread.
//!
//! Everything a step does is async-signal-safe: system calls on the stack
//! (the socket, the mapping), atomics, arithmetic; no allocation, no lock,
//! no thread, and nothing read or changed of signal masks or dispositions.
//! chronyd's address (`TIMEHANDS_CHRONYD`) is read once, before `main`,
//! where the loader runs initializers (elsewhere the default is asked).
//!
//! A `fork()`ed child notices its own pid at its first step and starts its
//! sources afresh, with a socket of its own (sharing its parent's, it would
//! take the parent's answers). A child forked while its parent's reader
//! stepped finds the flag held by that pid, with nobody to release it:
//! once the step is [`TAKE_OVER_AFTER`] overdue it takes the flag over, and
//! leaves the sources it may have caught half changed unclosed.

use std::cell::UnsafeCell;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::answers::{
    MAX_RATE_PPB, from_kernel, from_tracking, kernel_now, read_rate, realtime_now,
};
#[cfg(target_os = "linux")]
use super::answers::{from_clockbound, from_clockbound3, from_ptp4l, from_vmclock};
use super::chrony::{self, Tracking};
#[cfg(unix)]
use super::chrony::{Chronyd, Received};
#[cfg(target_os = "linux")]
#[cfg(target_os = "linux")]
use super::mapping::Page;
#[cfg(target_os = "linux")]
use super::ptp::{self, Ptp4l};
use super::state::{PUBLISHED, State};
use super::{BoundsStatus, q32};
#[cfg(target_os = "linux")]
use super::{clockbound, clockbound3, vmclock};
use crate::os::{KernelClock, NtpState};

/// How often the sources are asked while reads come.
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_millis(100);
/// How soon after a request a read first looks for chronyd's answer (it
/// comes in tens of microseconds); then after as long again as it waited,
/// up to chronyd's [`TIMEOUT`](chrony::TIMEOUT).
const PICKUP: Duration = Duration::from_millis(1);
/// How long a step may hold the flag before a forked child, which finds it
/// held by its parent's pid, takes it over (a step takes microseconds).
const TAKE_OVER_AFTER: Duration = Duration::from_secs(1);
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

/// Our Realtime (ns) from which the next step is due: the last step's
/// start and the wait it set, at most [`TAKE_OVER_AFTER`].
static DUE_AT: AtomicU64 = AtomicU64::new(0);
/// The pid of the process whose read steps, 0 when none does.
static STEPPING: AtomicU32 = AtomicU32::new(0);

/// The sources, changed only by the read that holds [`STEPPING`].
struct Shared(UnsafeCell<Sources>);
// SAFETY: only the holder of STEPPING touches the cell.
unsafe impl Sync for Shared {}
static SOURCES: Shared = Shared(UnsafeCell::new(Sources::new(0, None)));

/// chronyd's address as the environment gave it before `main` (see
/// [`chrony::address`], [`read_environment`]); unset where no initializer
/// ran (AIX, Cygwin: the default is asked there).
static CHRONYD: OnceLock<Option<SocketAddr>> = OnceLock::new();

/// Reads `TIMEHANDS_CHRONYD`: before `main` (the loader's initializer that
/// registers the fork handlers calls it, before anything runs in a
/// program, or when a library is `dlopen`ed), as a step, which may be a
/// signal handler, cannot read the environment.
#[cfg(unix)]
pub(crate) fn read_environment() {
    let variable = std::env::var_os("TIMEHANDS_CHRONYD");
    let _ = CHRONYD.set(chrony::address(variable.as_deref()));
    #[cfg(target_os = "linux")]
    if let Some(path) = std::env::var_os("TIMEHANDS_PTP4L") {
        use std::os::unix::ffi::OsStrExt;
        // A path with a NUL in it names no socket: the default is asked.
        if let Ok(path) = std::ffi::CString::new(path.as_bytes()) {
            let _ = PTP4L.set(path);
        }
    }
}

/// ptp4l's management socket as `TIMEHANDS_PTP4L` named it before `main`.
#[cfg(target_os = "linux")]
static PTP4L: OnceLock<std::ffi::CString> = OnceLock::new();

/// ptp4l's management socket: the environment's, or the default.
#[cfg(target_os = "linux")]
fn ptp4l_path() -> &'static std::ffi::CStr {
    PTP4L
        .get()
        .map_or(ptp::DEFAULT_PATH, |path| path.as_c_str())
}

/// chronyd's address: the environment's, or the default port's.
fn chronyd_address() -> Option<SocketAddr> {
    CHRONYD
        .get()
        .copied()
        .unwrap_or_else(|| chrony::address(None))
}

/// A read of the bounds at our Realtime `realtime`: steps the sources when
/// they are due (a load, a subtraction and a compare otherwise). A
/// Realtime more than the longest wait before the time due (stepped back)
/// is due at once; so is one at or after it.
#[inline]
pub(crate) fn keep(realtime: u64) {
    let ahead = DUE_AT.load(Ordering::Relaxed).wrapping_sub(realtime);
    // `ahead` in 1..=TAKE_OVER_AFTER: not yet; 0 wraps to the top.
    if ahead.wrapping_sub(1) >= TAKE_OVER_AFTER.as_nanos() as u64 {
        step(realtime);
    }
}

/// One step, if the flag is to be had: see the module docs.
#[cold]
#[inline(never)]
fn step(realtime: u64) {
    let pid = std::process::id();
    let from_parent = match STEPPING.compare_exchange(0, pid, Ordering::Acquire, Ordering::Relaxed)
    {
        Ok(_) => false,
        // A step under way in this process (on another thread, or on this
        // one under a signal handler): the state published serves.
        Err(held) if held == pid => return,
        // A parent's step, caught by the fork that made this process.
        Err(held) => {
            if STEPPING
                .compare_exchange(held, pid, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return;
            }
            true
        }
    };
    // Other reads look again only after a while: a step takes
    // microseconds, and a child finds a step its fork interrupted overdue
    // after that while.
    DUE_AT.store(due(realtime, TAKE_OVER_AFTER), Ordering::Relaxed);
    // SAFETY: STEPPING is ours: no other step runs in this process, and no
    // handler that interrupts this one steps.
    let sources = unsafe { &mut *SOURCES.0.get() };
    sources.belong_to(pid, from_parent);
    let (state, wait) = sources.advance();
    if let Some(mut state) = state {
        (state.accuracy_ns, state.accuracy_q32) = our_accuracy();
        PUBLISHED.publish(&state);
    }
    DUE_AT.store(due(realtime, wait), Ordering::Relaxed);
    STEPPING.store(0, Ordering::Release);
}

/// The Realtime `wait` after `realtime` (a wait of at most
/// [`TAKE_OVER_AFTER`], as [`keep`] needs).
fn due(realtime: u64, wait: Duration) -> u64 {
    realtime.wrapping_add(wait.min(TAKE_OVER_AFTER).as_nanos() as u64)
}

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

/// chronyd's request in flight: when it was sent.
#[derive(Clone, Copy)]
struct Asked {
    /// CLOCK_MONOTONIC_RAW, ns, as it was sent.
    sent: u64,
    /// Our Realtime before it was sent: the answer's state holds from
    /// there (the dispersion chronyd reports is no younger).
    as_of: u64,
}

/// The sources, and what the steps keep between them.
struct Sources {
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
    const fn new(pid: u32, address: Option<SocketAddr>) -> Sources {
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
    fn belong_to(&mut self, pid: u32, torn: bool) {
        if self.pid == pid {
            return;
        }
        let old = std::mem::replace(self, Sources::new(pid, chronyd_address()));
        if torn {
            std::mem::forget(old);
        }
    }

    /// One step: the state to publish (`None`: nothing new, chronyd's
    /// answer still to come), and how long until the next.
    fn advance(&mut self) -> (Option<State>, Duration) {
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
            self.ptp4l = Ptp4l::open(ptp4l_path()).ok();
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
        let mut sources = Sources::new(1, None);
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
        let mut sources = Sources::new(1, None);
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

    /// Steps until one publishes, each after the wait the last set (an
    /// answer sent may reach the socket a moment after the server counted
    /// it, on a loaded machine).
    #[cfg(unix)]
    pub(super) fn published(sources: &mut Sources) -> (State, Duration) {
        loop {
            match sources.advance() {
                (Some(state), wait) => return (state, wait),
                (None, wait) => std::thread::sleep(wait),
            }
        }
    }

    /// Steps against a chronyd of the test's own: a step sends the request
    /// and publishes nothing; a step after the answer came publishes
    /// chronyd's state, and asks again 20 ms on to measure
    /// `maxclockerror`; with chronyd gone its last state is carried on,
    /// free-running.
    #[cfg(unix)]
    #[test]
    #[cfg_attr(miri, ignore = "sockets")]
    fn steps_take_chronyd_s_answer_a_step_after_its_request() {
        let chronyd = super::super::fake_chronyd::FakeChronyd::start();
        let mut sources = Sources::new(std::process::id(), Some(chronyd.address));
        let replied = chrony::parse(&chrony::tests::reply(1), 1).expect("a reply");
        let stated = ((replied.skew_ppm + replied.resid_freq_ppm.abs()) * 1e3).ceil() as u64;
        assert_eq!(sources.advance(), (None, PICKUP), "asked");
        chronyd.wait_answered(1);
        let (state, wait) = published(&mut sources);
        assert_eq!(
            (state.source, state.status),
            (BoundsSource::Chronyd, Some(BoundsStatus::Synchronized))
        );
        assert_eq!(wait, MEASURE_SPAN, "asks again to measure");
        assert_eq!(
            state.rate_q32,
            read_rate(stated + ASSUMED_MAX_CLOCK_ERROR_PPB),
            "skew and residual frequency, the assumed maxclockerror"
        );
        // The span the measure needs, as the wait said.
        std::thread::sleep(MEASURE_SPAN);
        assert_eq!(sources.advance(), (None, PICKUP), "asked again");
        chronyd.wait_answered(2);
        let (state, wait) = published(&mut sources);
        // The test's replies keep their dispersion: nothing beyond the
        // stated rates.
        assert_eq!(sources.max_clock_error_ppb, Some(0));
        assert_eq!(state.rate_q32, read_rate(stated));
        assert_eq!(wait, REFRESH_INTERVAL);
        let port = sources.chronyd.as_ref().expect("a socket").local_port();
        drop(chronyd);
        assert_eq!(sources.advance(), (None, PICKUP), "asked, nobody there");
        // The refusal comes at once on loopback, or the timeout in 500 ms.
        let (carried, wait) = published(&mut sources);
        assert_eq!(wait, REFRESH_INTERVAL);
        // chronyd's last state, free-running; or, where another process
        // (a test of the kernel's clock) stepped the clock or changed its
        // rate meanwhile, the next source's: never chronyd synchronized.
        match carried.source {
            BoundsSource::Chronyd => {
                assert_eq!(carried.status, Some(BoundsStatus::FreeRunning))
            }
            other => println!("chronyd's state not carried on ({other:?}): the clock moved"),
        }
        // Sources of another process (a forked child's): a socket of
        // their own, which asks from another port.
        let chronyd = super::super::fake_chronyd::FakeChronyd::start();
        sources.belong_to(std::process::id() + 1, false);
        sources.address = Some(chronyd.address);
        assert!(sources.chronyd.is_none() && sources.held.is_none());
        assert_eq!(sources.advance(), (None, PICKUP));
        chronyd.wait_answered(1);
        let peers = chronyd.peers();
        assert_eq!(peers.len(), 1);
        assert!(peers.iter().all(|p| p.port() != port), "{peers:?} {port}");
    }

    /// A step with no chronyd to ask publishes the next source's state at
    /// once.
    #[test]
    #[cfg_attr(miri, ignore = "calls adjtimex")]
    fn without_chronyd_a_step_publishes_the_next_source_at_once() {
        let mut sources = Sources::new(std::process::id(), None);
        let (state, wait) = sources.advance();
        assert_eq!(wait, REFRESH_INTERVAL);
        if let Some(state) = state {
            assert_ne!(state.source, BoundsSource::Chronyd, "{state:?}");
        }
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
        let c_path = std::ffi::CString::new(path.to_str().expect("UTF-8")).expect("no NUL");
        let mut mapped = Page::new(Box::leak(c_path.into_boxed_c_str()));
        let reading = clockbound::look(&mut mapped).expect("a reading");
        std::fs::remove_file(&path).expect("removed");
        assert_eq!(clockbound::look(&mut mapped), Some(reading), "still mapped");
        let state = from_clockbound(&reading, None).expect("a reading");
        assert_eq!(state.source, BoundsSource::ClockBound);
        assert_eq!(state.status, Some(BoundsStatus::Synchronized));
        assert_eq!(state.below, state.above);
        // 91 µs, and 1 ppm for at most a few seconds since.
        assert!((91_000..100_000).contains(&state.below), "{state:?}");
        assert_eq!(state.rate_q32, q32(1_100));
        let stale = clockbound::ClockBoundReading {
            as_of: Duration::from_nanos(monotonic) - Duration::from_secs(11),
            ..reading
        };
        assert_eq!(from_clockbound(&stale, None), None, "stale");
        let mut absent = Page::new(c"/nonexistent/shm0");
        assert_eq!(clockbound::look(&mut absent), None);
    }
}
