//! Winding up: a new hands from the counter's reading now, against
//! CLOCK_MONOTONIC (see [`Timekeeper::windup_following`](crate::Timekeeper::windup_following)), then a steering
//! when one is due, whose findings the clock keeps, and a step of the
//! counter's choice while it is being made (`handover.rs`).
//!
//! Whoever reads winds up: a read that finds its hands a windup interval
//! old, or standing at their promise, calls [`HostClock::windup`], which
//! takes each lock it needs only if no one holds it (another thread's
//! windup, or this thread's own, interrupted by the signal handler this
//! read runs in), and otherwise leaves the step to that holder or the next
//! read. So whatever the reading thread is (a signal handler, a thread that
//! blocks every signal, a real-time one), its reads wind up, steer and
//! choose as any other's, at the same cost.

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use super::clock::{CHOSEN, HostClock};
use super::fork_points::point;
use super::published::SECOND_HINTS;
use crate::BinTime;
use crate::engine::Writes;
use crate::host::counter::HostCounter;
use crate::host::kernel_clocks::NtpState;
use crate::host::steer::{Findings, Steering};
use crate::host::watchdog::Misbehaviour;

impl HostClock {
    /// What a reader does when the clock is due: winds it up (see
    /// [`windup`](HostClock::windup)). Out of line, so that readers do not
    /// carry its frame.
    #[cold]
    #[inline(never)]
    pub(super) fn windup_from_reader(&'static self) {
        self.reader_windups.fetch_add(1, Ordering::Relaxed);
        self.windup();
    }

    /// A read found the counter `counts` behind its hands' base (see
    /// [`Timekeeper::went_back`](crate::Timekeeper)): a counter that went
    /// back no longer keeps time, and no windup moves that base, so that
    /// once the counter climbed back within an interval of it, reads would
    /// give its time again, behind what standing reads gave. Retired now;
    /// where another thread steers, or holds the writer lock, the finding
    /// waits in the steering for the next windup, as the watchdog's do.
    pub(super) fn counter_went_back(&'static self, counts: u64) {
        let Some(mut steering) = self.try_steering() else {
            return;
        };
        let why = Misbehaviour::Backwards { counts };
        if !self.fail_over(&mut steering, &format_args!("a read: {why}")) {
            steering.misbehaving = Some(why);
        }
    }

    /// Winds up where the last windup is [`STALE`](super::clock::STALE) at
    /// `kernel`, the kernel's Monotonic time (ns): what a coarse read past
    /// its limit and `getres` do, which a clock whose counter stopped needs
    /// (its reads never fall due, so that only a windup's watchdog finds
    /// it).
    pub(super) fn wind_up_if_stale(&'static self, kernel: u64) {
        let windup = crate::engine::nanos::floor_nanos(self.timekeeper().uptime_coarse());
        if kernel.saturating_sub(windup) > super::clock::STALE.as_nanos() as u64 {
            self.windup();
        }
    }

    /// Winds up, then steers when a steering is due, and takes a step of
    /// the counter's choice while it is made (unless another thread steers:
    /// then it only winds up). True when it held the locks a steering
    /// takes, so that it followed the kernel's offsets (a step of
    /// Realtime). Nothing here waits, allocates or starts a thread.
    pub(crate) fn windup(&'static self) -> bool {
        let reference = || self.kernel.reference();
        let steered = match self.try_steering() {
            Some(mut steering) => {
                // While the readers wait to move to the chosen counter, the
                // timekeeper they read is retired: nothing to wind up.
                if self.move_when_due(&mut steering) {
                    return false;
                }
                let steered = self.windup_and_steer(&mut steering, reference);
                if self.choice.load(Ordering::Acquire) != CHOSEN {
                    self.choose_step(&mut steering);
                }
                self.publish_coarse_limit(&self.bound.load());
                steered
            }
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
        steering: &mut MutexGuard<'_, Steering>,
        reference: impl Fn() -> BinTime,
    ) -> bool {
        let Some(mut writes) = self.timekeeper().try_writes() else {
            return false;
        };
        let ntp = self.kernel_ntp();
        self.follow_rate_change(steering, &mut writes, ntp.as_ref(), true);
        writes.windup_following(reference);
        point("windup: wound up, not steered");
        let findings = steering.steer(&mut writes, self.kernel);
        self.apply(steering, writes, findings, ntp.as_ref());
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
            self.state_bound(self.bound.load().after(change, now));
        }
    }

    /// Keeps what a steering found: the kernel's offsets (Realtime's given
    /// to the timekeeper through `writes`), the phase for `info` and
    /// `getres`; and, the writer lock let go, fails over from a counter the
    /// watchdog found misbehaving, now or at a windup before (one whose
    /// failover found the writer lock held: the finding waits for the
    /// next). TAI − UTC as the windup's `ntp` state
    /// says it, when a steering ran and Realtime did not move (where it
    /// moved, a leap second may have moved both: `keep` follows them
    /// together).
    fn apply(
        &'static self,
        steering: &mut Steering,
        mut writes: Writes<'_, HostCounter>,
        findings: Findings,
        ntp: Option<&NtpState>,
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
        if let Some(why) = why {
            if !self.fail_over(steering, &format_args!("watchdog: {why}")) {
                steering.misbehaving = Some(why);
            }
        }
    }
}
