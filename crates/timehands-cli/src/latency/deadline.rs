//! The absolute-deadline schedule of a measuring thread, and the periods it
//! misses.
//!
//! Deadlines are `start + k * interval`: each wakeup is measured against the
//! deadline it was asked for, and the next one is one interval later, not one
//! interval after the (late) wakeup, so lateness never accumulates. When a
//! wakeup comes so late that one or more later deadlines have already passed,
//! those periods are lost: cyclictest skips them silently; here they are
//! counted, because a thread that missed a period has failed its deadline
//! whatever the latency of the wakeup that finally came.

use timehands::Instant;

/// The next deadline of a periodic thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    next: u64,
    interval: u64,
}

impl Deadline {
    /// The schedule whose first deadline is one `interval_ns` after `start`.
    pub fn first_after(start: Instant, interval_ns: u64) -> Deadline {
        Deadline {
            next: start.as_nanos() + interval_ns,
            interval: interval_ns,
        }
    }

    /// Starts the schedule again one interval after `now`: a relative sleep
    /// (`-r`) is measured against the moment it began plus the interval.
    pub fn restart_from(&mut self, now: Instant) {
        self.next = now.as_nanos() + self.interval;
    }

    /// The deadline to sleep until.
    pub fn next(&self) -> Instant {
        Instant::from_nanos(self.next)
    }

    /// How late a wakeup at `woke` is for the current deadline, in
    /// nanoseconds. An absolute sleep never returns early, so a wakeup before
    /// the deadline (a signal) counts as on time.
    pub fn lateness(&self, woke: Instant) -> u64 {
        woke.as_nanos().saturating_sub(self.next)
    }

    /// Moves to the first deadline after `woke`, and returns how many deadlines
    /// were skipped on the way: periods in which the thread never ran.
    pub fn advance_past(&mut self, woke: Instant) -> u64 {
        self.next += self.interval;
        let woke = woke.as_nanos();
        if woke <= self.next {
            return 0;
        }
        // Every deadline in (old next, woke) has passed unserved; skip them
        // in one step so that a wakeup hours late costs no loop.
        let missed = (woke - self.next).div_ceil(self.interval);
        self.next += missed * self.interval;
        missed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn an_on_time_wakeup_misses_nothing_and_keeps_the_grid() {
        let mut d = Deadline::first_after(at(0), 1000);
        assert_eq!(d.next(), at(1000));
        assert_eq!(d.lateness(at(1030)), 30);
        assert_eq!(d.advance_past(at(1030)), 0);
        // The grid, not the wakeup, sets the next deadline.
        assert_eq!(d.next(), at(2000));
    }

    #[test]
    fn a_wakeup_past_later_deadlines_counts_each_one_missed() {
        let mut d = Deadline::first_after(at(0), 1000);
        // Woke for the deadline at 1000 at 3500: 2000 and 3000 have passed.
        assert_eq!(d.lateness(at(3500)), 2500);
        assert_eq!(d.advance_past(at(3500)), 2);
        assert_eq!(d.next(), at(4000));
    }

    #[test]
    fn a_wakeup_exactly_on_the_next_deadline_misses_nothing() {
        let mut d = Deadline::first_after(at(0), 1000);
        assert_eq!(d.advance_past(at(2000)), 0);
        assert_eq!(d.next(), at(2000));
        // One nanosecond later that deadline has passed.
        let mut d = Deadline::first_after(at(0), 1000);
        assert_eq!(d.advance_past(at(2001)), 1);
        assert_eq!(d.next(), at(3000));
    }

    #[test]
    fn a_restart_measures_from_the_new_start() {
        let mut d = Deadline::first_after(at(0), 1000);
        d.restart_from(at(5_250));
        assert_eq!(d.next(), at(6_250));
        assert_eq!(d.lateness(at(6_300)), 50);
    }

    #[test]
    fn an_early_return_is_not_late() {
        let d = Deadline::first_after(at(500), 1000);
        assert_eq!(d.lateness(at(1200)), 0);
    }
}
