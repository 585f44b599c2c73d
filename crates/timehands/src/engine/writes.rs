//! Writes: a writer's changes made under one hold of the writer lock.
//!
//! A public write of a [`Timekeeper`] (a slew, a rate, a step) takes the
//! writer lock for itself, waiting for a windup in progress; most go
//! through a [`Writes`] held for the one write. A writer that
//! makes several changes in a row, and must never wait, takes the lock once
//! with [`Timekeeper::try_writes`] and makes them all through the one
//! [`Writes`]: the host clock's steering, whose reader may be a real-time
//! thread. Such a thread that waited for the lock while a normal-priority
//! windup held it, preempted, kept that windup from the CPU for as long as
//! it spun (92 ms in one measured run, with four threads busy on two CPUs).
//! Where the lock is taken, the steering is left for a later windup: the
//! thread that holds it (a windup, most often) will have wound up.

use super::bintime::BinTime;
use super::counter::Counter;
use super::discipline::nominal_scale;
use super::lock::WriterGuard;
use super::stats::WriterState;
use super::timekeeper::Timekeeper;
use super::writer::{Change, Windup};
use crate::Error;

/// The writer lock, held: the writes of one writer, made in turn.
pub(crate) struct Writes<'a, C> {
    timekeeper: &'a Timekeeper<C>,
    writer: WriterGuard<'a, WriterState>,
}

impl<C: Counter> Timekeeper<C> {
    /// The writer lock, once the writer that holds it lets go.
    pub(crate) fn writes(&self) -> Writes<'_, C> {
        Writes {
            timekeeper: self,
            writer: self.writer.lock(),
        }
    }

    /// The writer lock, if no other writer holds it: a windup runs on
    /// another thread otherwise.
    pub(crate) fn try_writes(&self) -> Option<Writes<'_, C>> {
        let writer = self.writer.try_lock()?;
        Some(Writes {
            timekeeper: self,
            writer,
        })
    }
}

impl<'a, C: Counter> Writes<'a, C> {
    /// The timekeeper written to, for its reads (never its writes: each
    /// takes the lock held here).
    #[cfg(feature = "std")]
    pub(crate) fn timekeeper(&self) -> &'a Timekeeper<C> {
        self.timekeeper
    }

    /// See [`Timekeeper::windup_following`].
    pub(crate) fn windup_following(&mut self, reference: impl Fn() -> BinTime) -> Windup {
        let reference: Option<&dyn Fn() -> BinTime> = Some(&reference);
        self.timekeeper
            .windup_locked(&mut self.writer, Change::Windup { reference })
    }

    /// See [`Timekeeper::windup`].
    pub(super) fn windup(&mut self) -> Windup {
        self.timekeeper
            .windup_locked(&mut self.writer, Change::Windup { reference: None })
    }

    /// See [`Timekeeper::retire`]: retires without waiting, the lock being
    /// held here already (the host clock's hand-over, which a read in a
    /// signal handler may make, never waits for a windup).
    #[cfg(feature = "std")]
    pub(crate) fn retire(&mut self) -> BinTime {
        self.timekeeper.retire_locked(&mut self.writer)
    }

    /// See [`Timekeeper::set_realtime`].
    pub(super) fn set_realtime(&mut self, now: BinTime) {
        self.timekeeper
            .windup_locked(&mut self.writer, Change::Realtime(now));
    }

    /// See [`Timekeeper::set_boottime`].
    pub(crate) fn set_boottime(&mut self, offset: BinTime) {
        self.timekeeper
            .windup_locked(&mut self.writer, Change::Boottime(offset));
    }

    /// See [`Timekeeper::set_counter_frequency`].
    pub(crate) fn set_counter_frequency(&mut self, hz: u64) -> Result<(), Error> {
        if hz < 2 {
            return Err(Error::Frequency { hz });
        }
        self.writer.discipline.nominal = nominal_scale(hz);
        Ok(())
    }

    /// See [`Timekeeper::set_slew_rate`].
    pub(crate) fn set_slew_rate(&mut self, ppb: i64) -> Result<(), Error> {
        self.writer.discipline.set_slew_rate(ppb)
    }

    /// See [`Timekeeper::adjtime`].
    pub(crate) fn adjtime(&mut self, ns: i64) -> i64 {
        let timekeeper = self.timekeeper;
        let line = timekeeper.current(|slot| slot.line()).1;
        let delta = timekeeper.delta(line.base, timekeeper.counter.read());
        // Where reads stand at the promise, no slew runs past it (a windup
        // after a gap charges up to the promise only).
        let delta = if timekeeper.follows_reference {
            delta.min(line.switch.saturating_add(timekeeper.interval))
        } else {
            delta
        };
        // What has run since the switch point, which the remainder still
        // counts; before it, what is scheduled there and has not run yet.
        let unaccounted = match delta.checked_sub(line.switch) {
            Some(since) => line.slew().map_or(0, |slew| slew.over(since)),
            None => -((line.switch - delta) as i128 * self.writer.discipline.slew_before as i128),
        };
        self.writer.discipline.adjtime(ns, unaccounted)
    }
}
