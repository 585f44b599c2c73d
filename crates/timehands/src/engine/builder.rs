//! The settings of a timekeeper: its ring, its windup interval, where it
//! starts, and whether it follows a reference.

use core::time::Duration;

use super::bintime::BinTime;
use super::counter::Counter;
use super::discipline::{Discipline, nominal_scale};
use super::line::Line;
use super::lock::WriterLock;
use super::slot::{Hands, Slot, coarse_of};
use super::state::{MAX_HANDS, TICKET_SHIFT, max_interval};
use super::stats::{Stats, WriterState};
use super::sync::AtomicUsize;
use super::timekeeper::Timekeeper;
use crate::Error;

/// The ring a `Timekeeper` gets unless told otherwise.
pub const DEFAULT_HANDS: usize = 8;
/// The windup interval a `Timekeeper` assumes unless told otherwise.
pub const DEFAULT_WINDUP_INTERVAL: Duration = Duration::from_millis(1);

/// Builds a [`Timekeeper`] with a chosen ring size and windup interval.
#[derive(Debug)]
pub struct Builder<C> {
    pub(super) counter: C,
    /// The ring's size, as [`Builder::hands`] sets it.
    pub(super) ring: usize,
    pub(super) windup_interval: Duration,
    pub(super) start: BinTime,
    pub(super) start_count: Option<u64>,
    pub(super) follows_reference: bool,
}

impl<C: Counter> Builder<C> {
    /// The number of timehands in the ring, 1 to [`MAX_HANDS`]. With 1, readers
    /// retry while a windup rewrites it (see the module docs).
    pub fn hands(mut self, count: usize) -> Builder<C> {
        self.ring = count;
        self
    }

    /// How often [`Timekeeper::windup`] is expected to be called. It sets how
    /// far ahead a rate change is scheduled (a quarter of it) and how long a
    /// hands promises its rate (all of it); windups may come earlier or later,
    /// at the cost of readers taking a slower path while a windup is overdue.
    /// It must be at least 4 counts and at most an eighth of the counter's wrap.
    pub fn windup_interval(mut self, interval: Duration) -> Builder<C> {
        self.windup_interval = interval;
        self
    }

    /// The uptime the timekeeper starts from (zero unless told otherwise): a
    /// timekeeper that takes over from another, on another counter, continues
    /// its time.
    pub fn start_at(mut self, uptime: BinTime) -> Builder<C> {
        self.start = uptime;
        self
    }

    /// The counter value at which uptime is [`start_at`](Builder::start_at)
    /// (the counter's value when the timekeeper is built, unless told): for a
    /// caller that paired a counter reading with another clock's time, so
    /// that the time spent building does not count as an offset.
    pub fn start_count(mut self, count: u64) -> Builder<C> {
        self.start_count = Some(count);
        self
    }

    /// For a timekeeper whose time follows a reference clock that its counter
    /// may run ahead of: a counter that counts on through a suspend the
    /// reference does not count (an invariant TSC in s2idle, against
    /// CLOCK_MONOTONIC). Reads then never extrapolate the counter past the
    /// hands' promise (at most two windup intervals after the last windup):
    /// they stand there until a windup, and
    /// [`windup_following`](Timekeeper::windup_following) takes out counts
    /// the reference did not see. Off unless told: a counter that stops
    /// when time should (an RTOS's through its sleep) needs nothing, and
    /// its reads extrapolate over late windups.
    pub fn follows_reference(mut self, follows: bool) -> Builder<C> {
        self.follows_reference = follows;
        self
    }

    /// The timekeeper, its uptime [`start_at`](Builder::start_at) (zero) at the
    /// counter's current value.
    ///
    /// # Errors
    /// [`Error::Frequency`] for a counter below 2 Hz, [`Error::Mask`] for a mask
    /// that is not `2^bits - 1`, [`Error::Hands`] for a ring outside
    /// `1..=MAX_HANDS`, [`Error::WindupInterval`] for an interval the counter
    /// cannot represent.
    pub fn build(self) -> Result<Timekeeper<C>, Error> {
        let frequency = self.counter.frequency();
        if frequency < 2 {
            return Err(Error::Frequency { hz: frequency });
        }
        let mask = self.counter.mask();
        if mask == 0 || mask & mask.wrapping_add(1) != 0 {
            return Err(Error::Mask { mask });
        }
        if !(1..=MAX_HANDS).contains(&self.ring) {
            return Err(Error::Hands { count: self.ring });
        }
        let interval = self
            .windup_interval
            .as_nanos()
            .checked_mul(frequency as u128)
            .map_or(u128::MAX, |n| n / 1_000_000_000);
        if interval < 4 || interval > max_interval(mask) as u128 {
            return Err(Error::WindupInterval {
                interval: self.windup_interval,
                counts: interval,
                mask,
            });
        }
        let interval = interval as u64;
        let nominal = nominal_scale(frequency);
        let tk = Timekeeper {
            slots: core::array::from_fn(|_| Slot::new()),
            state: AtomicUsize::new(1 << TICKET_SHIFT),
            pending_switch: AtomicUsize::new(0),
            writer: WriterLock::new(WriterState {
                discipline: Discipline::new(nominal, interval),
                stats: Stats::default(),
            }),
            ring: self.ring,
            mask,
            behind: mask - (mask >> 3),
            interval,
            lead: interval / 4,
            follows_reference: self.follows_reference,
            counter: self.counter,
        };
        let first = Hands {
            line: Line {
                base: self.start_count.unwrap_or_else(|| tk.counter.read()) & mask,
                switch: 0,
                scale_before: nominal,
                scale_after: nominal,
                slew_len: u64::MAX,
                settled: nominal,
                at_switch: self.start,
            },
            boottime: BinTime::ZERO,
            coarse: coarse_of(self.start),
        };
        tk.slots[0].store(&first, &first.segments(interval, mask), 1);
        Ok(tk)
    }
}

impl<C: Counter> Timekeeper<C> {
    /// A timekeeper with [`DEFAULT_HANDS`] hands and the
    /// [`DEFAULT_WINDUP_INTERVAL`]; see [`Builder::build`] for the errors.
    pub fn new(counter: C) -> Result<Timekeeper<C>, Error> {
        Timekeeper::builder(counter).build()
    }

    /// A builder to choose the ring size and the windup interval.
    pub fn builder(counter: C) -> Builder<C> {
        Builder {
            counter,
            ring: DEFAULT_HANDS,
            windup_interval: DEFAULT_WINDUP_INTERVAL,
            start: BinTime::ZERO,
            start_count: None,
            follows_reference: false,
        }
    }
}
