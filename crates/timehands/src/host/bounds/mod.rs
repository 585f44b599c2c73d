//! Bounds on real time: the earliest and the latest UTC the true time can
//! be, now, from the best source on the machine, at the cost of a read.
//!
//! # Sources
//!
//! Our Realtime is the kernel's CLOCK_REALTIME to within our own error bound
//! (the one [`getres`](crate::getres) reports). How far the kernel's
//! Realtime is from UTC, the first of these that is present says:
//!
//! 1. **chronyd**, asked for its tracking over its command port (`chrony.rs`;
//!    UDP `127.0.0.1:323`, which answers without privilege, or the address
//!    in `TIMEHANDS_CHRONYD`): UTC is within chronyd's root distance (half
//!    the root delay plus the root dispersion) of chronyd's own estimate of
//!    true time, which is the kernel's Realtime plus the correction chronyd
//!    still has to slew (or step). Between chronyd's updates the kernel only
//!    closes that correction, so UTC lies between the Realtime and the
//!    Realtime plus the correction, widened by the root distance on each
//!    side: the correction counts on its own side only. The bound grows at
//!    chronyd's own rate: its skew, its residual frequency and its
//!    `maxclockerror`, which chronyd does not report and timehands reads off
//!    the growth of the root dispersion between two answers. This holds
//!    whether or not chronyd keeps the kernel's `STA_UNSYNC` clear (its
//!    `rtcsync`).
//! 2. **ptp4l** (`ptp.rs`), asked over its management socket as fbclock
//!    asks it, where it measures a grandmaster with software timestamps
//!    (its clock is then CLOCK_REALTIME): at the last Sync's ingress the
//!    Realtime was within the measured offset, the path delay and the
//!    grandmaster's stated accuracy of the grandmaster's time; growing at
//!    the kernel's 500 ppm.
//! 3. **ClockBound 3** (`clockbound3.rs`): the clock AWS's `clockbound`
//!    3.x keeps on the CPU's counter in its page (`shm1`): the time and its
//!    bound at a counter value, the counter's period and their errors. The
//!    bound is on that clock, not on the kernel's Realtime, so a read
//!    computes it at a counter value (`ticking.rs`), as ClockBound's
//!    client does, widened to hold our Realtime: the TSC's value our
//!    Realtime was read at, where the clock runs on the TSC, so that no
//!    second counter read is paid for, nor the span between the two.
//! 4. **ClockBound 2** (`clockbound.rs`): the bound `clock-bound-d` 2.x
//!    publishes in its segment (`shm0`), growing at its `max_drift`.
//! 5. **VMClock** (`vmclock.rs`): the hypervisor's clock on the counter, in
//!    the device's page, where it states a maximum error.
//! 6. **The kernel** (`adjtimex(2)`): its `maxerror`, which an NTP daemon
//!    (ntpd, systemd-timesyncd, a PTP daemon, chronyd with `rtcsync`) keeps,
//!    growing at 500 ppm; none while the kernel says `STA_UNSYNC`.
//!
//! Where a VMClock device is, every state carries its disruption marker,
//! and every read compares it with the device's: a live migration or a
//! snapshot's restore changes it, and ends every bound at once; then the
//! sources give none until they answer anew (chronyd after its next
//! update, ClockBound 3 once its marker is the device's, ClockBound 2 with
//! a reading taken since, ptp4l with a Sync received since, the kernel
//! once its daemon lowers `maxerror`; the device's own clock at once).
//!
//! Each bound is a promise the source makes; timehands adds its own
//! accuracy against the kernel's Realtime on both sides and never narrows
//! it. The growth is counted in Realtime, which chronyd may slew 8.3 %
//! slow: rates are taken 10 % higher. A status goes with it, as
//! ClockBound's: [`BoundsStatus::Synchronized`], or
//! [`BoundsStatus::FreeRunning`] when the source has not updated the clock
//! for eight of its update intervals, or chronyd stopped answering (its
//! last bound holds and grows, for 1000 s at most, as long as
//! nobody steps the clock: a change of CLOCK_REALTIME − CLOCK_MONOTONIC,
//! which no slew makes, ends it; a change of the kernel clock's rate since
//! adds to its growth, and one past 1000 ppm ends it; a chronyd that
//! answers unsynchronized, as one restarting does, ends it too: its first
//! update may slew the clock at 8.3 %, faster than a bound grows); where the source does not know, there is
//! no bound ([`Error::Unsynchronized`]). A ClockBound segment not written
//! for 10 s (its daemon writes every second) has no daemon behind it, and
//! is passed over, though its status still says synchronized.
//!
//! # Cost, and who refreshes
//!
//! A read ([`realtime_bounds`] and the verbs on it) is our Realtime and a
//! few loads of a published state (`state.rs`, a seqlock): no system
//! call, no lock, no allocation, no waiting, so it is safe in a signal
//! handler. The state carries our accuracy too, as
//! [`getres`](crate::getres) stated it at the refresh and the rate it
//! grows at. No thread keeps it: its readers do (`steps.rs`), as the
//! kernel's readers need nobody's thread. A read that finds the last step
//! older than the wait it set (100 ms while the sources answer) and wins a
//! flag advances the sources one step without waiting: it takes chronyd's
//! answer to the request the step before sent (a non-blocking socket),
//! reads ClockBound's mapped segment and the kernel's NTP state, publishes
//! the best source's state and sends chronyd its next request. Nothing is
//! asked while nobody reads. Every step is async-signal-safe too (system
//! calls on the stack, no allocation, no lock, no thread, nothing decided
//! from signal masks), so a process whose only reads are in a signal
//! handler keeps its bounds as well as any. Until the first answer, and
//! after the state is void, a read asks the kernel itself (one
//! `adjtimex`, no lock, no allocation; still safe in a handler).
//!
//! # Leap seconds, steps
//!
//! Around a leap second the kernel's Realtime repeats (or skips) a second at
//! midnight UTC: within a second of a midnight with a leap announced, the
//! bounds widen by that second. A step of the clock by chronyd closes its
//! correction, which the bounds already hold. A step by anyone else (`date
//! -s`) moves CLOCK_REALTIME − CLOCK_MONOTONIC beyond chronyd's bound while
//! chronyd made no update: the next answer's step sees it, and chronyd's
//! answers give no bound until its next update (reads between the step
//! and that answer, 100 ms at most while reads come, are not protected).
//!
//! # Verbs
//!
//! As Spanner's TrueTime: [`RealtimeBounds::earliest`] and
//! [`RealtimeBounds::latest`], [`surely_past`] and [`surely_not_yet`] for an
//! instant, and [`commit_wait`], which sleeps until an instant is surely
//! past. The repository's `docs/bounds.md` tells the model and the
//! measurements beside ClockBound.

mod answers;
// chrony runs on unix alone: elsewhere nothing asks it, and only the
// answer's type, which the steps share, is used.
#[cfg_attr(not(unix), allow(dead_code))]
mod chrony;
pub mod clockbound;
#[cfg(target_os = "linux")]
mod clockbound3;
#[cfg(unix)]
mod datagram;
mod environment;
#[cfg(all(test, unix))]
pub(crate) mod fake_chronyd;
#[cfg(target_os = "linux")]
mod mapping;
#[cfg(target_os = "linux")]
mod ptp;
#[cfg(all(test, target_os = "linux"))]
mod ptp4l_test;
#[cfg(all(test, target_os = "linux"))]
mod readers;
mod refresh;
pub(crate) mod state;
mod steps;
mod ticking;
#[cfg(target_os = "linux")]
mod vmclock;

use std::time::Duration;

use crate::Error;
pub use crate::os::LeapSecond;
use crate::os::NtpState;
use state::State;

/// Nanoseconds in a UTC day without a leap second, as Unix time counts it.
const DAY_NS: u64 = 86_400 * 1_000_000_000;
/// Nanoseconds in a second.
const SECOND_NS: u64 = 1_000_000_000;

/// Where the bounds come from; see [`realtime_bounds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum BoundsSource {
    /// The kernel's `maxerror` (`adjtimex(2)`, `ntp_gettime(2)`).
    Kernel,
    /// chronyd's tracking, over its command port.
    Chronyd,
    /// AWS ClockBound's shared memory (clock-bound-d 2.x's segment).
    ClockBound,
    /// AWS ClockBound 3's page: its own clock on the CPU's counter.
    ClockBound3,
    /// The VMClock device's clock (the hypervisor's), on the CPU's counter.
    VmClock,
    /// linuxptp's `ptp4l` (software timestamps), over its management socket.
    Ptp4l,
}

/// How the source keeps the clock, when it gives a bound (as ClockBound's
/// status; where the source does not know, there is no bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum BoundsStatus {
    /// The source keeps the clock synchronized.
    Synchronized,
    /// The source has stopped updating the clock (or answering): the bound
    /// holds, and grows at the rate it stated.
    FreeRunning,
}

/// Where real time is, and how sure of it the machine is; see
/// [`realtime_bounds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RealtimeBounds {
    /// The earliest UTC the true time can be, since the Unix epoch.
    pub earliest: Duration,
    /// Our Realtime, read for these bounds.
    pub realtime: Duration,
    /// The latest UTC the true time can be.
    pub latest: Duration,
    /// The kernel's bound on its Realtime's error against UTC (`maxerror`),
    /// as last read (at the last refresh, or by this call).
    pub kernel_max_error: Duration,
    /// The NTP daemon's estimate of that error (`esterror`): not a bound.
    pub kernel_estimated_error: Duration,
    /// Our bound against the kernel's Realtime.
    pub accuracy: Duration,
    /// TAI − UTC, in seconds, as the kernel has it (0 where no daemon set it).
    pub tai_offset_s: i32,
    /// The leap second announced.
    pub leap: LeapSecond,
    /// Where the bound comes from.
    pub source: BoundsSource,
    /// How the source keeps the clock.
    pub status: BoundsStatus,
}

impl RealtimeBounds {
    /// Half the interval's width: `(latest − earliest) / 2`.
    pub fn half_width(&self) -> Duration {
        (self.latest - self.earliest) / 2
    }

    /// Whether UTC `instant` (since the epoch) has surely passed: it is
    /// before the earliest the true time can be (TrueTime's `after`).
    pub fn surely_past(&self, instant: Duration) -> bool {
        instant < self.earliest
    }

    /// Whether UTC `instant` has surely not come yet: it is after the latest
    /// the true time can be (TrueTime's `before`).
    pub fn surely_not_yet(&self, instant: Duration) -> bool {
        instant > self.latest
    }
}

/// The fastest a bound is allowed to grow, ppb: twice the kernel's 500 ppm.
/// With [`answers::VALIDITY`], `age * rate` fits a u64 on the read path.
pub(crate) const MAX_RATE_PPB: u64 = 1_000_000;

/// A rate in ppb as the read path multiplies it: ns of growth per 2^32 ns,
/// rounded up (so never slower).
pub(crate) const fn q32(rate_ppb: u64) -> u64 {
    (rate_ppb << 32).div_ceil(SECOND_NS)
}

/// `age` ns at `rate_q32` (see [`q32`]), in ns, rounded up: one multiply
/// and a shift.
///
/// Invariant (kept by `refresh.rs`, checked in the tests): a state's rates
/// are at most [`MAX_RATE_PPB`] each and it is void after
/// [`answers::VALIDITY`], so `age * rate_q32` (under 2^40 × 2^24) fits a
/// u64.
#[inline]
fn grown(age: u64, rate_q32: u64) -> u64 {
    age.saturating_mul(rate_q32).div_ceil(1 << 32)
}

/// Whether `realtime` (ns since the epoch) is within a second of a
/// midnight UTC.
pub(crate) fn near_midnight(realtime: u64) -> bool {
    let into_day = realtime % DAY_NS;
    into_day < SECOND_NS || DAY_NS - into_day <= SECOND_NS
}

/// `ns` as a Duration, without a division when it is under a second (as
/// bounds are): the read path's conversions.
#[inline]
fn short(ns: u64) -> Duration {
    match u32::try_from(ns) {
        Ok(ns) if ns < SECOND_NS as u32 => Duration::new(0, ns),
        _ => Duration::from_nanos(ns),
    }
}

/// The bounds of `realtime_ns` (ours) from a published `state` that is not
/// void. The three times are split into seconds at `second` (Realtime's
/// hint): kept in nanoseconds until then, no conversion lengthens the
/// read's chain (some 1.5 ns of 30 on the Intel Xeon guest). A source's
/// clock on the counter is read at `tsc`, the TSC's value our Realtime was
/// read at, where the clock gives it, and at a counter read of its own
/// otherwise.
#[inline]
fn from_state(
    realtime_ns: u64,
    second: u64,
    tsc: Option<u64>,
    state: &State,
) -> Result<RealtimeBounds, Error> {
    let split = |ns| super::read::split_at(ns, second);
    let Some(mut status) = state.status else {
        return Err(Error::Unsynchronized);
    };
    if realtime_ns >= state.free_running_at {
        status = BoundsStatus::FreeRunning;
    }
    // A migration or a restore since the state was taken: every clock may
    // have moved.
    #[cfg(target_os = "linux")]
    if state.marker.is_some_and(vmclock::moved_from) {
        return Err(Error::Unsynchronized);
    }
    // A source's own clock on the counter: its interval now, around ours.
    let (below, above) = match &state.counter {
        None => (state.below, state.above),
        Some(clock) => clock.around(realtime_ns, tsc.unwrap_or_else(ticking::counter)),
    };
    // A chronyd step back may put the Realtime before `as_of`: no growth
    // then (the step closed the correction the bounds already hold).
    let age = realtime_ns.saturating_sub(state.as_of);
    let accuracy_ns = u64::from(state.accuracy_ns);
    let ours = accuracy_ns.saturating_add(grown(age, u64::from(state.accuracy_q32)));
    // One multiply for both rates, on the way to the bounds.
    let widening = accuracy_ns.saturating_add(grown(
        age,
        state.rate_q32.saturating_add(u64::from(state.accuracy_q32)),
    ));
    let mut below = below.saturating_add(widening);
    let mut above = above.saturating_add(widening);
    if state.leap != LeapSecond::None && near_midnight(realtime_ns) {
        below = below.saturating_add(SECOND_NS);
        above = above.saturating_add(SECOND_NS);
    }
    Ok(RealtimeBounds {
        earliest: split(realtime_ns.saturating_sub(below)),
        realtime: split(realtime_ns),
        latest: split(realtime_ns.saturating_add(above)),
        kernel_max_error: state.kernel_max_error,
        kernel_estimated_error: state.kernel_estimated_error,
        accuracy: short(ours),
        tai_offset_s: state.tai_offset_s,
        leap: state.leap,
        source: state.source,
        status,
    })
}

/// The bounds of `realtime` (ns since the epoch), with our `accuracy` against
/// the kernel's Realtime and the kernel's `ntp` state read just now.
///
/// # Errors
/// [`Error::Unsynchronized`] when no NTP daemon keeps the kernel synchronized.
pub(crate) fn bounds(
    realtime: u64,
    accuracy: Duration,
    ntp: &NtpState,
) -> Result<RealtimeBounds, Error> {
    if !ntp.synchronized {
        return Err(Error::Unsynchronized);
    }
    let kernel_max_error = Duration::from_micros(ntp.maxerror_us);
    let mut half_width = (kernel_max_error + accuracy).as_nanos() as u64;
    // Within a second of midnight UTC with a leap second announced (or
    // under way), the kernel's Realtime may stand a second off.
    if ntp.leap != LeapSecond::None && near_midnight(realtime) {
        half_width = half_width.saturating_add(SECOND_NS);
    }
    Ok(RealtimeBounds {
        earliest: Duration::from_nanos(realtime.saturating_sub(half_width)),
        realtime: Duration::from_nanos(realtime),
        latest: Duration::from_nanos(realtime.saturating_add(half_width)),
        kernel_max_error,
        kernel_estimated_error: Duration::from_micros(ntp.esterror_us),
        accuracy,
        tai_offset_s: ntp.tai_offset_s,
        leap: ntp.leap,
        source: BoundsSource::Kernel,
        status: BoundsStatus::Synchronized,
    })
}

/// The bounds from the kernel's NTP state, read now (before the first
/// refresh, or after the state went void), around the kernel's own
/// CLOCK_REALTIME (accuracy 0: ours is not stated without a lock). Out of
/// line: the read carries only the common path.
#[cold]
#[inline(never)]
fn from_kernel_now() -> Result<RealtimeBounds, Error> {
    let ntp = refresh::kernel_ntp().map_err(|e| match e.kind() {
        std::io::ErrorKind::Unsupported => Error::NoNtpState {
            os: std::env::consts::OS,
        },
        _ => Error::Ntp {
            errno: e.raw_os_error().unwrap_or(0),
        },
    })?;
    bounds(refresh::kernel_realtime(), Duration::ZERO, &ntp)
}

/// The earliest and the latest UTC the true time can be, now: our Realtime,
/// widened by our bound against the kernel's CLOCK_REALTIME and by the
/// bound the best source on the machine gives for it (chronyd, ClockBound,
/// the kernel), grown since that source said it. See the module docs.
///
/// Safe in a signal handler on Linux: loads, arithmetic, and, once an
/// interval, one read's step of the sources (a few system calls, none
/// that waits; before the first answer, one `adjtimex` a read).
///
/// ```
/// match timehands::realtime_bounds() {
///     Ok(bounds) => {
///         assert!(bounds.earliest <= bounds.realtime && bounds.realtime <= bounds.latest);
///         println!("{:?} ± {:?}, from {:?}", bounds.realtime, bounds.half_width(), bounds.source);
///     }
///     Err(timehands::Error::Unsynchronized) => println!("no daemon keeps this machine's time"),
///     Err(timehands::Error::NoNtpState { os }) => println!("no NTP state is read on {os}"),
///     Err(other) => panic!("{other}"),
/// }
/// ```
///
/// # Errors
/// [`Error::Unsynchronized`] when the source does not know the time (no
/// daemon, or it lost its sources), so that no bound exists; [`Error::Ntp`]
/// when `adjtimex(2)` (or `ntp_gettime(2)`) fails; [`Error::NoNtpState`] on
/// an OS whose NTP state timehands does not read (Android, Windows,
/// OpenBSD, wasm) where no chronyd or ClockBound answers.
// Inlined, as `now()` is: the caller keeps the fields it uses.
#[inline]
pub fn realtime_bounds() -> Result<RealtimeBounds, Error> {
    let (realtime, second, tsc) = super::read::realtime_with_second_and_tsc();
    let published = match super::published::page_read() {
        // The keeper keeps the sources: its readers ask none.
        Some(page) => state::Published::over(&page.bounds),
        None => {
            steps::keep(realtime);
            &state::PUBLISHED
        }
    };
    match published.load() {
        Some(state) if realtime < state.void_at => from_state(realtime, second, tsc, &state),
        _ => from_kernel_now(),
    }
}

/// [`realtime_bounds`], once the sources have been asked: waits (sleeping,
/// at most `timeout`, its reads stepping the sources) until the first
/// state is published, so that the bounds are chronyd's or ClockBound's where they
/// run rather than the kernel's (which gives none where chronyd leaves
/// `STA_UNSYNC` set). For a program's start, as ClockBound's client is
/// opened once: a read returns at once, with the kernel's word until then.
/// Not for a signal handler: it sleeps.
///
/// ```
/// use std::time::Duration;
///
/// match timehands::realtime_bounds_when_ready(Duration::from_millis(500)) {
///     Ok(bounds) => println!("± {:?} from {:?}", bounds.half_width(), bounds.source),
///     Err(e) => println!("no bound: {e}"),
/// }
/// ```
///
/// # Errors
/// As [`realtime_bounds`].
pub fn realtime_bounds_when_ready(timeout: Duration) -> Result<RealtimeBounds, Error> {
    let start = std::time::Instant::now();
    loop {
        let bounds = realtime_bounds();
        let published = super::published::page_read().map_or(&state::PUBLISHED, |page| {
            state::Published::over(&page.bounds)
        });
        if published.ever_published() || start.elapsed() >= timeout {
            return bounds;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether UTC `instant` (since the epoch) has surely passed, now
/// (TrueTime's `after`): see [`RealtimeBounds::surely_past`].
///
/// ```
/// let an_hour_ago = std::time::SystemTime::now()
///     .duration_since(std::time::UNIX_EPOCH)
///     .expect("after 1970")
///     - std::time::Duration::from_secs(3600);
/// if let Ok(past) = timehands::surely_past(an_hour_ago) {
///     assert!(past, "a synchronized clock is surely an hour past");
/// }
/// ```
///
/// # Errors
/// As [`realtime_bounds`].
pub fn surely_past(instant: Duration) -> Result<bool, Error> {
    realtime_bounds().map(|b| b.surely_past(instant))
}

/// Whether UTC `instant` has surely not come yet, now (TrueTime's
/// `before`): see [`RealtimeBounds::surely_not_yet`].
///
/// # Errors
/// As [`realtime_bounds`].
pub fn surely_not_yet(instant: Duration) -> Result<bool, Error> {
    realtime_bounds().map(|b| b.surely_not_yet(instant))
}

/// Commit wait: sleeps until UTC `instant` is surely past (its earliest is
/// after it), and returns the bounds that say so. A transaction stamped
/// `instant` that waits so is visible only once every machine's clock is
/// past it. Not for a signal handler: it sleeps.
///
/// ```
/// if let Ok(now) = timehands::realtime_bounds() {
///     let stamp = now.latest;
///     let after = timehands::commit_wait(stamp).expect("still synchronized");
///     assert!(after.earliest > stamp);
/// }
/// ```
///
/// # Errors
/// As [`realtime_bounds`], at any of its reads: the source may lose the
/// time while it waits.
pub fn commit_wait(instant: Duration) -> Result<RealtimeBounds, Error> {
    loop {
        let bounds = realtime_bounds()?;
        if bounds.surely_past(instant) {
            return Ok(bounds);
        }
        // The earliest advances a little slower than time (the bound
        // grows): sleep the distance and look again.
        std::thread::sleep(instant - bounds.earliest + Duration::from_nanos(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ntp(synchronized: bool, maxerror_us: u64, leap: LeapSecond) -> NtpState {
        NtpState {
            synchronized,
            maxerror_us,
            esterror_us: maxerror_us / 10,
            tai_offset_s: 37,
            leap,
            rate_ppb: None,
        }
    }

    /// 2026-11-23 12:00:00 UTC, in ns.
    const NOON: u64 = 1_795_435_200 * SECOND_NS;

    #[test]
    fn synchronized_bounds_add_the_two_errors() {
        let b = bounds(
            NOON,
            Duration::from_nanos(300),
            &ntp(true, 5_000, LeapSecond::None),
        )
        .expect("synchronized");
        assert_eq!(b.latest - b.realtime, Duration::from_nanos(5_000_300));
        assert_eq!(b.realtime - b.earliest, Duration::from_nanos(5_000_300));
        assert_eq!(b.kernel_estimated_error, Duration::from_micros(500));
        assert_eq!((b.tai_offset_s, b.leap), (37, LeapSecond::None));
    }

    #[test]
    fn an_unsynchronized_kernel_has_no_bounds() {
        assert_eq!(
            bounds(
                NOON,
                Duration::ZERO,
                &ntp(false, 16_000_000, LeapSecond::None)
            ),
            Err(Error::Unsynchronized)
        );
    }

    /// A leap second announced widens the bounds by a second within a second
    /// of midnight UTC, on either side, and not at noon.
    #[test]
    fn a_pending_leap_second_widens_the_bounds_at_midnight() {
        let leap = ntp(true, 1_000, LeapSecond::Insert);
        let at_noon = bounds(NOON, Duration::ZERO, &leap).expect("synchronized");
        assert_eq!(at_noon.latest - at_noon.realtime, Duration::from_millis(1));
        let midnight = NOON + DAY_NS / 2;
        for t in [midnight - SECOND_NS / 2, midnight, midnight + SECOND_NS / 2] {
            let b = bounds(t, Duration::ZERO, &leap).expect("synchronized");
            assert_eq!(b.latest - b.realtime, Duration::from_millis(1_001), "{t}");
            assert_eq!(b.realtime - b.earliest, Duration::from_millis(1_001), "{t}");
        }
        let no_leap = bounds(
            midnight,
            Duration::ZERO,
            &ntp(true, 1_000, LeapSecond::None),
        )
        .expect("synchronized");
        assert_eq!(no_leap.latest - no_leap.realtime, Duration::from_millis(1));
    }

    fn chronyd_state() -> State {
        State {
            as_of: NOON,
            below: 90_000,
            above: 100_000,
            rate_q32: q32(2_000),
            void_at: NOON + 1_000 * SECOND_NS,
            free_running_at: NOON + 16 * SECOND_NS,
            source: BoundsSource::Chronyd,
            status: Some(BoundsStatus::Synchronized),
            leap: LeapSecond::None,
            tai_offset_s: 37,
            accuracy_ns: 300,
            accuracy_q32: q32(100) as u32,
            kernel_max_error: Duration::from_secs(16),
            kernel_estimated_error: Duration::from_secs(16),
            counter: None,
            marker: None,
        }
    }

    /// A source's clock on the counter is read at the TSC's value our
    /// Realtime was read at, where the read gives one: its interval there,
    /// whatever the counter reads after.
    #[test]
    fn a_counter_clock_is_read_at_the_realtime_s_own_tsc() {
        // 1 ns a tick from counter value 1 000 at noon, within 10 µs.
        let clock = ticking::CounterClock {
            at: 1_000,
            time_ns: NOON,
            mult: 1 << 32,
            shift: 0,
            half_ns: 10_000,
            rate_q32: 0,
        };
        let state = State {
            below: 0,
            above: 0,
            rate_q32: 0,
            accuracy_ns: 0,
            accuracy_q32: 0,
            source: BoundsSource::ClockBound3,
            counter: Some(clock),
            ..chronyd_state()
        };
        // 5 ms of ticks on, our Realtime 2 µs behind the source's clock.
        let (realtime, tsc) = (NOON + 5_000_000 - 2_000, 1_000 + 5_000_000);
        let b = from_state(realtime, NOON / SECOND_NS, Some(tsc), &state).expect("a bound");
        // The interval at that tick, and the ns the period's rounding adds.
        assert_eq!(b.earliest, Duration::from_nanos(NOON + 5_000_000 - 10_001));
        assert_eq!(b.latest, Duration::from_nanos(NOON + 5_000_000 + 10_001));
        assert_eq!(b.realtime, Duration::from_nanos(realtime));
    }

    /// The bounds of `realtime` from `state`, split at the second of
    /// [`NOON`], as a read whose hint was published then splits them.
    fn at_noon_hint(realtime: u64, state: &State) -> Result<RealtimeBounds, Error> {
        from_state(realtime, NOON / SECOND_NS, None, state)
    }

    /// The three times are the same whatever second they are split at:
    /// the hint's, the next, or far from either (an earliest before the
    /// hint's second, a latest two past it, a hint not published yet).
    #[test]
    fn the_bounds_split_at_any_second_are_the_same() {
        let state = State {
            below: 2 * SECOND_NS,
            above: 3 * SECOND_NS,
            ..chronyd_state()
        };
        for realtime in [
            NOON,
            NOON + SECOND_NS - 1,
            NOON + SECOND_NS + 7,
            NOON + 5 * SECOND_NS,
        ] {
            let expected = from_state(realtime, 0, None, &state).expect("a bound");
            assert_eq!(expected.realtime, Duration::from_nanos(realtime));
            assert!(expected.realtime - expected.earliest > Duration::from_secs(2));
            assert!(expected.latest - expected.realtime > Duration::from_secs(3));
            for second in [
                realtime / SECOND_NS,
                realtime / SECOND_NS - 1,
                NOON / SECOND_NS,
            ] {
                let b = from_state(realtime, second, None, &state);
                assert_eq!(b, Ok(expected), "{realtime} split at {second}");
            }
        }
    }

    /// A published state's bounds grow at its rate from `as_of`, our
    /// accuracy on both sides; its status turns free-running at its time.
    #[test]
    fn a_state_grows_at_its_rate_and_turns_free_running() {
        let state = chronyd_state();
        let at = |t: u64| at_noon_hint(t, &state).expect("a bound");
        let b = at(NOON);
        assert_eq!(b.realtime - b.earliest, Duration::from_nanos(90_300));
        assert_eq!(b.latest - b.realtime, Duration::from_nanos(100_300));
        assert_eq!(b.half_width(), Duration::from_nanos(95_300));
        assert_eq!(
            (b.source, b.status),
            (BoundsSource::Chronyd, BoundsStatus::Synchronized)
        );
        // 2 ppm over 10 s: 20 µs more on each side; our accuracy's 0.1
        // ppm: 1 µs.
        let later = at(NOON + 10 * SECOND_NS);
        // (Each growth rounds up, the slower rates by up to 0.25 %.)
        let below = later.realtime - later.earliest;
        assert!(
            (Duration::from_nanos(111_300)..=Duration::from_nanos(111_305)).contains(&below),
            "{below:?}"
        );
        let accuracy = later.accuracy;
        assert!(
            (Duration::from_nanos(1_300)..=Duration::from_nanos(1_303)).contains(&accuracy),
            "{accuracy:?}"
        );
        assert_eq!(later.status, BoundsStatus::Synchronized);
        assert_eq!(at(NOON + 16 * SECOND_NS).status, BoundsStatus::FreeRunning);
        // A Realtime stepped back before `as_of` does not shrink it.
        let before = at(NOON - SECOND_NS);
        assert_eq!(
            before.realtime - before.earliest,
            Duration::from_nanos(90_300)
        );
    }

    #[test]
    fn a_state_that_does_not_know_gives_no_bound() {
        let unknown = State {
            status: None,
            ..chronyd_state()
        };
        assert_eq!(at_noon_hint(NOON, &unknown), Err(Error::Unsynchronized));
    }

    #[test]
    fn a_state_with_a_leap_second_widens_at_midnight() {
        let state = State {
            leap: LeapSecond::Insert,
            void_at: u64::MAX,
            ..chronyd_state()
        };
        let midnight = NOON + DAY_NS / 2;
        let b = at_noon_hint(midnight, &state).expect("a bound");
        assert!(b.latest - b.realtime > Duration::from_secs(1), "{b:?}");
        let noon = at_noon_hint(NOON, &state).expect("a bound");
        assert!(
            noon.latest - noon.realtime < Duration::from_millis(1),
            "{noon:?}"
        );
    }

    /// The verbs, at the edges: an instant is surely past only before the
    /// earliest, surely not yet only after the latest.
    #[test]
    fn the_verbs_hold_at_the_edges() {
        let b = at_noon_hint(NOON, &chronyd_state()).expect("a bound");
        assert!(b.surely_past(b.earliest - Duration::from_nanos(1)));
        assert!(!b.surely_past(b.earliest));
        assert!(!b.surely_past(b.realtime));
        assert!(b.surely_not_yet(b.latest + Duration::from_nanos(1)));
        assert!(!b.surely_not_yet(b.latest));
        assert!(!b.surely_not_yet(b.realtime));
    }

    /// The read path's product never overflows, at the largest rates (a
    /// source's and our accuracy's) over the whole validity; and it never
    /// grows slower than the rate.
    #[test]
    fn growth_fits_at_the_largest_rates_and_age_and_rounds_up() {
        let age = answers::VALIDITY.as_nanos() as u64;
        let rate = 2 * q32(MAX_RATE_PPB);
        assert!(age.checked_mul(rate).is_some());
        assert!(grown(age, q32(MAX_RATE_PPB)) >= age / 1_000);
        for (age, ppb) in [
            (1, 1),
            (999_999_999, 1_000),
            (10 * SECOND_NS, 2_000),
            (12_345, 500_000),
        ] {
            let exact = (age as u128 * ppb as u128).div_ceil(SECOND_NS as u128) as u64;
            let fast = grown(age, q32(ppb));
            assert!(
                fast >= exact && fast <= exact + 1,
                "{age} ns at {ppb} ppb: {fast}, not {exact}"
            );
        }
    }

    /// A commit wait on this machine returns once its instant is surely
    /// past, or says why there is no bound.
    #[test]
    #[cfg_attr(miri, ignore = "reads the CPU's counter and calls adjtimex")]
    fn commit_wait_returns_once_the_instant_is_surely_past() {
        let Ok(now) = realtime_bounds() else {
            return;
        };
        let stamp = now.realtime + Duration::from_millis(2);
        match commit_wait(stamp) {
            Ok(after) => assert!(
                after.earliest > stamp && after.surely_past(stamp),
                "{after:?}"
            ),
            Err(e) => assert_eq!(e, Error::Unsynchronized),
        }
    }

    /// On this machine: bounds around our Realtime if its kernel is
    /// synchronized, the error that says so if not.
    #[test]
    #[cfg_attr(miri, ignore = "reads the CPU's counter and calls adjtimex")]
    fn the_machine_reports_bounds_or_says_it_is_unsynchronized() {
        match realtime_bounds() {
            Ok(b) => {
                assert!(b.earliest < b.realtime && b.realtime < b.latest, "{b:?}");
                assert!(b.latest - b.realtime >= b.kernel_max_error, "{b:?}");
            }
            Err(Error::NoNtpState { os }) => assert_eq!(os, std::env::consts::OS),
            Err(e) => assert_eq!(e, Error::Unsynchronized),
        }
    }
}
