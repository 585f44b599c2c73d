//! Winding up: a new hands from the counter's reading now, against
//! CLOCK_MONOTONIC (see [`Timekeeper::windup_following`](crate::Timekeeper::windup_following)), then a steering
//! when one is due, whose findings the clock keeps; and what the upkeep
//! thread publishes after its windups, the coarse time in one word.

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use super::clock::HostClock;
use super::fork_points::point;
use super::published::{COARSE_SLACK, COARSE_TICK};
use super::published::{
    REALTIME_COARSE, SECOND_HINTS, keep_coarse_nanos, realtime_coarse_word, take_coarse_nanos_away,
};
use crate::BinTime;
use crate::engine::Writes;
use crate::engine::nanos::{floor_nanos, realtime_nanos};
use crate::host::counter::HostCounter;
use crate::host::kernel_clocks::KernelClock;
use crate::host::kernel_clocks::NtpState;
use crate::host::steer::{Findings, Steering};
use crate::host::watchdog::Misbehaviour;

/// Who winds up, which says what else it may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Winder {
    /// The upkeep thread, a tool or a test: anything but a read.
    Keeper,
    /// A read, which may run in a signal handler: it neither waits nor
    /// allocates, and leaves a failover to the next windup that can tell
    /// it runs outside one.
    Reader,
}

impl Winder {
    /// Whether this winder may do what a signal handler must not: allocate
    /// and take locks that wait (a failover does both).
    fn may_block(self) -> bool {
        match self {
            Winder::Keeper => true,
            Winder::Reader => crate::os::outside_signal_handler(),
        }
    }
}

impl HostClock {
    /// Winds up, then steers when a steering is due (unless another thread
    /// steers: then it only winds up), as anything but a read does.
    pub(crate) fn windup(&'static self) {
        self.windup_by(Winder::Keeper);
    }

    /// A read found the counter `counts` behind its hands' base (see
    /// [`Timekeeper::went_back`](crate::Timekeeper)): a counter that went
    /// back no longer keeps time, and no windup moves that base, so that
    /// once the counter climbed back within an interval of it, reads would
    /// give its time again, behind what standing reads gave. Retired now,
    /// where this thread may fail over (outside a signal handler); else
    /// the finding waits in the steering for the next windup that may, as
    /// the watchdog's do. Where another thread steers, its watchdog finds
    /// it, and the next standing read asks again.
    pub(super) fn counter_went_back(&'static self, counts: u64) {
        let Some(mut steering) = self.try_steering() else {
            return;
        };
        let why = Misbehaviour::Backwards { counts };
        if Winder::Reader.may_block() {
            self.fail_over(&mut steering, &format_args!("a read: {why}"));
        } else {
            steering.misbehaving = Some(why);
        }
    }

    /// After a step of Realtime the OS gave notice of: a windup that
    /// follows it, tried again until one gets the locks a steering takes
    /// (a read, `getres` among them, holds them some microseconds), for a
    /// tick at most (then the readers' next windup follows it).
    pub(super) fn follow_step(&'static self) {
        let give_up = std::time::Instant::now() + COARSE_TICK;
        while !self.windup_by(Winder::Keeper) && std::time::Instant::now() < give_up {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }

    /// Winds up as `winder`, then steers when a steering is due (unless
    /// another thread steers: then it only winds up). True when it held
    /// the locks a steering takes, so that it followed the kernel's
    /// offsets (a step of Realtime).
    pub(super) fn windup_by(&'static self, winder: Winder) -> bool {
        let reference = || self.kernel.reference();
        let steered = match self.try_steering() {
            Some(steering) => self.windup_and_steer(steering, reference, winder),
            None => {
                self.timekeeper().windup_following(reference);
                false
            }
        };
        if self.publishes {
            self.publish_second_hints();
        }
        steered
    }

    /// The seconds `gettime` splits at, from the readers' timekeeper.
    fn publish_second_hints(&self) {
        let timekeeper = self.readers_timekeeper();
        // The engine's reads, which never wind up (this is a windup).
        let [monotonic, realtime] = &SECOND_HINTS;
        monotonic.store(timekeeper.uptime_nanos() / 1_000_000_000, Ordering::Relaxed);
        realtime.store(
            timekeeper.realtime_nanos() / 1_000_000_000,
            Ordering::Relaxed,
        );
    }

    /// With `steering`, the steering lock's: winds up and steers, all under
    /// one hold of the engine's writer lock, and only if no other writer
    /// holds it (one that does is winding up; the steering stays due for a
    /// later windup). A reader may be a real-time thread: one that waited
    /// here for a normal-priority windup that the scheduler had taken off
    /// the CPU kept it from the CPU, 92 ms in one measured run. A change of
    /// the kernel's rate is followed before the windup, so that the hands
    /// it publishes runs at the new rate from its switch point; the rest of
    /// the steering comes after, so that it measures a clock that stands
    /// nowhere (reads past the promise stand until a windup; a steering
    /// held up past it winds up again before it measures, see
    /// `offset_on_running_clock`), and its changes take effect from the
    /// next windup on.
    fn windup_and_steer(
        &'static self,
        mut steering: MutexGuard<'_, Steering>,
        reference: impl Fn() -> BinTime,
        winder: Winder,
    ) -> bool {
        let Some(mut writes) = self.timekeeper().try_writes() else {
            return false;
        };
        let ntp = self.kernel_ntp();
        self.follow_rate_change(&mut steering, &mut writes, ntp.as_ref(), true);
        writes.windup_following(reference);
        point("windup: wound up, not steered");
        let findings = steering.steer(&mut writes, self.kernel);
        self.apply(&mut steering, writes, findings, ntp.as_ref(), winder);
        true
    }

    /// Follows a change of the kernel's rate, if there is one, with
    /// `steering`, the steering lock's, `writes`, the writer lock's, and the
    /// kernel's `ntp` state (see [`Steering::follow_rate_change`], which
    /// `measure`s one the kernel does not say, if asked), and widens the
    /// error bound by what it may have cost.
    pub(super) fn follow_rate_change(
        &self,
        steering: &mut Steering,
        writes: &mut Writes<'_, HostCounter>,
        ntp: Option<&NtpState>,
        measure: bool,
    ) {
        point("windup: following the kernel's rate");
        let said_rate = ntp.and_then(|ntp| ntp.rate_ppb);
        if let Some(change) = steering.follow_rate_change(writes, self.kernel, said_rate, measure) {
            let now = writes.timekeeper().uptime_nanos();
            self.bound.store(self.bound.load().after(change, now));
        }
    }

    /// Keeps what a steering found: the kernel's offsets (Realtime's given
    /// to the timekeeper through `writes`), the phase for `info` and
    /// `getres`; and, the writer lock let go, fails over from a counter the
    /// watchdog found misbehaving, now or at a read's windup before, if
    /// `winder` may (else it keeps the finding for the next). TAI − UTC as the windup's `ntp` state
    /// says it, when a steering ran and Realtime did not move (where it
    /// moved, a leap second may have moved both: `keep` follows them
    /// together).
    fn apply(
        &'static self,
        steering: &mut Steering,
        mut writes: Writes<'_, HostCounter>,
        findings: Findings,
        ntp: Option<&NtpState>,
        winder: Winder,
    ) {
        let why = findings.misbehaviour.or(steering.misbehaving.take());
        if let Some(phase) = findings.phase {
            self.keep_phase(phase);
            if let (None, Some(ntp)) = (findings.realtime, ntp) {
                self.keep_tai(self.realtime_offset_ns(), ntp.tai_offset_s);
            }
        }
        self.keep(&mut writes, findings);
        // The hand-over retires this timekeeper, which takes the lock.
        drop(writes);
        match why {
            Some(why) if winder.may_block() => {
                self.fail_over(steering, &format_args!("watchdog: {why}"));
            }
            why => steering.misbehaving = why,
        }
    }

    /// The upkeep thread, after its windup: the coarse time ready for
    /// `now_coarse` in one word, and Realtime's for `gettime`. Only that
    /// thread publishes them, so that its stores come in order (Realtime
    /// may step back, which no maximum could keep) and none lands after it
    /// took them away.
    ///
    /// Where the windup before it was held up (a reader taken off its CPU
    /// holding the writer lock, `getres`'s among them), the timekeeper's
    /// coarse time stands: then, once it is more than [`COARSE_SLACK`]
    /// behind, what CLOCK_MONOTONIC vouches for, less the bound (no `now()`
    /// after it reads earlier), so that the coarse time lags at most a tick
    /// and a half, and the slack, whatever holds the windup up.
    pub(super) fn publish_coarse_time(&self) {
        if !self.publishes {
            return;
        }
        let timekeeper = self.readers_timekeeper();
        let mut monotonic = floor_nanos(timekeeper.uptime_coarse());
        let kernel = self.kernel.nanos(KernelClock::Monotonic);
        if kernel.saturating_sub(monotonic) > COARSE_SLACK.as_nanos() as u64 {
            monotonic = monotonic.max(self.vouched(kernel));
        }
        let realtime = realtime_nanos(monotonic, timekeeper.boottime());
        REALTIME_COARSE.store(realtime_coarse_word(realtime), Ordering::Release);
        keep_coarse_nanos(monotonic);
    }

    /// Takes the coarse time away: the next coarse read goes the long way,
    /// and so says that coarse reads come (see `upkeep.rs`).
    pub(super) fn take_coarse_time_away(&self) {
        if self.publishes {
            take_coarse_nanos_away();
            REALTIME_COARSE.store(0, Ordering::Release);
        }
    }
}
