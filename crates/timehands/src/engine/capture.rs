//! Time at a captured counter value: `pps_capture` and `pps_event` of the
//! BSD kernels, exact on whichever hands was current at the capture.
//!
//! A pulse's edge is captured as the counter's value (a timer's capture
//! register, or the counter read first thing in the interrupt handler) and
//! turned into a time later, when a windup may have published a newer
//! hands since. Every hands continues its predecessor exactly and is right
//! from its base on, so the time at a count is that of the newest hands
//! whose base is at or before it: the current one, or an older one the ring
//! still holds. FreeBSD drops an event whose hands was replaced meanwhile;
//! here it is stamped exactly as long as the ring holds that hands (`hands
//! - 1` windups).

use super::bintime::BinTime;
use super::counter::Counter;
use super::slot::Slot;
use super::state::{prev_ticket, slot_index, ticket};
use super::sync::Ordering;
use super::timekeeper::Timekeeper;
use crate::Error;

/// The time of a captured counter value, on both of the timekeeper's clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Uptime at the count.
    pub uptime: BinTime,
    /// Realtime at the count: uptime plus the boottime offset of the hands
    /// that was current then.
    pub realtime: BinTime,
}

impl<C: Counter> Timekeeper<C> {
    /// The time at `count`, a value of this timekeeper's counter captured
    /// earlier (a pulse's edge), as a read at that count returned or would
    /// have returned it, even when windups published newer hands since.
    ///
    /// ```
    /// use timehands::{SimCounter, Timekeeper};
    ///
    /// let counter = SimCounter::new(1_000_000_000);
    /// let tk = Timekeeper::new(counter.clone())?;
    /// counter.advance(1_500);
    /// let edge = counter.value(); // the capture register, at the pulse
    /// counter.advance(2_000_000);
    /// tk.windup(); // a newer hands, whose base is after the edge
    /// assert_eq!(tk.time_of(edge)?.uptime.as_nanos(), 1_500);
    /// # Ok::<(), timehands::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Capture`] when the count is older than every hands the ring
    /// still holds (more than `hands - 1` windups ago; with a ring of one,
    /// any count before the last windup).
    pub fn time_of(&self, count: u64) -> Result<Stamp, Error> {
        let count = count & self.mask;
        'again: loop {
            let state = self.state.load(Ordering::Acquire);
            let mut at = (ticket(state), slot_index(state));
            for older in 0..self.ring {
                let load = |slot: &Slot| (slot.line(), slot.boottime());
                let Some((line, boottime)) = self.slots[at.1].read(at.0, load) else {
                    if older == 0 || self.state.load(Ordering::Acquire) != state {
                        // Rewritten under us (a ring of one), or a windup
                        // went by: look again from the new current hands.
                        continue 'again;
                    }
                    break;
                };
                let ahead = count.wrapping_sub(line.base) & self.mask;
                if ahead <= self.behind {
                    let promise = line.switch.saturating_add(self.interval);
                    let delta = if older > 0 || ahead < promise {
                        // An older hands held up to its successor's base,
                        // which is after the count.
                        ahead
                    } else if self.follows_reference {
                        // Reads stand at the promise; so does the stamp.
                        promise
                    } else {
                        // Past the current hands' promise: the count was
                        // taken, so a candidate whose switch point it passed
                        // must not be published (a read's rule).
                        match self.past_promise(state, ahead) {
                            Some(delta) => delta,
                            None => continue 'again,
                        }
                    };
                    let uptime = line.uptime_at(delta);
                    return Ok(Stamp {
                        uptime,
                        realtime: uptime.saturating_add(boottime),
                    });
                }
                at = (prev_ticket(at.0), (at.1 + self.ring - 1) % self.ring);
            }
            return Err(Error::Capture { count });
        }
    }
}
