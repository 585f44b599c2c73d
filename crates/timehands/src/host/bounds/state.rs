//! The bounds' state, published by the readers' steps (`steps.rs`) and
//! read by [`realtime_bounds`](super::realtime_bounds) without a lock: a
//! seqlock of our own over a few atomic words, so that a read is a handful
//! of loads and some arithmetic, and safe in a signal handler.
//!
//! Everything is against the kernel's CLOCK_REALTIME, in nanoseconds: how
//! far below and above it UTC can be at `as_of` (a Realtime), how fast that
//! grows after it, and when the state is void.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::Duration;

use super::ticking::CounterClock;
use super::{BoundsSource, BoundsStatus, LeapSecond};
use crate::host::page::layout::BOUNDS_WORDS;

/// How often a read tries to find the newest copy still, before it takes
/// the kernel's word instead: only a writer that publishes twice during
/// a read overtakes it, and a read never waits for the writer (a signal
/// handler may have interrupted it, on its own thread).
const READ_TRIES: usize = 4;

/// One published state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct State {
    /// The Realtime (ns) at which `below` and `above` hold.
    pub as_of: u64,
    /// How far below the kernel's Realtime UTC can be at `as_of`, ns.
    pub below: u64,
    /// How far above it UTC can be at `as_of`, ns.
    pub above: u64,
    /// How fast both grow after `as_of`: ns per 2^32 ns of Realtime
    /// ([`q32`](super::q32) of the rate in ppb).
    pub rate_q32: u64,
    /// From this Realtime (ns) on, the state holds nothing.
    pub void_at: u64,
    /// From this Realtime on, the status is [`BoundsStatus::FreeRunning`]
    /// (the source has not updated the clock for too long).
    pub free_running_at: u64,
    /// Where it comes from.
    pub source: BoundsSource,
    /// Whether a bound exists at all (`None`: the source does not know).
    pub status: Option<BoundsStatus>,
    /// The leap second announced.
    pub leap: LeapSecond,
    /// TAI − UTC, s.
    pub tai_offset_s: i32,
    /// Our Realtime's bound against the kernel's at `as_of`, ns (as
    /// [`getres`](crate::getres) states it).
    pub accuracy_ns: u32,
    /// How fast that grows after `as_of` (as `rate_q32`).
    pub accuracy_q32: u32,
    /// The kernel's maxerror at the refresh.
    pub kernel_max_error: Duration,
    /// The kernel's esterror at the refresh.
    pub kernel_estimated_error: Duration,
    /// The source's clock on the CPU's counter, where it keeps one
    /// (ClockBound 3, VMClock): the bound is computed from it at each read
    /// (`below`, `above` and `rate_q32` are then 0).
    pub counter: Option<CounterClock>,
    /// The VMClock device's disruption marker when the state was taken,
    /// where there is a device: a read that finds another gives no bound.
    pub marker: Option<u64>,
}

/// `d` as one word: whole seconds (high half, saturating) and nanoseconds.
fn split(d: Duration) -> u64 {
    u64::from(u32::try_from(d.as_secs()).unwrap_or(u32::MAX)) << 32 | u64::from(d.subsec_nanos())
}

/// The Duration of a word [`split`] made: no division.
#[inline]
fn joined(word: u64) -> Duration {
    Duration::new(word >> 32, word as u32)
}

/// One state's words, under a sequence of their own.
#[repr(C, align(64))]
struct Words {
    /// Odd while the writer writes; each publication adds 2.
    sequence: AtomicU64,
    as_of: AtomicU64,
    below: AtomicU64,
    above: AtomicU64,
    rate_q32: AtomicU64,
    void_at: AtomicU64,
    free_running_at: AtomicU64,
    /// source, status, leap (a byte each), TAI − UTC (the high half).
    meta: AtomicU64,
    /// The kernel's maxerror and esterror: seconds (high half) and
    /// nanoseconds (low half) each, so that a read divides nothing.
    kernel_max_error: AtomicU64,
    kernel_estimated_error: AtomicU64,
    /// Our accuracy, ns (low half), and its growth, as `rate_q32` (high
    /// half).
    accuracy: AtomicU64,
    /// The counter clock's words (`meta` says whether there is one): its
    /// counter value, time, multiplier, shift, bound and rate.
    counter: [AtomicU64; 6],
    /// The VMClock marker (`meta` says whether there is one).
    marker: AtomicU64,
}

/// The published state. One writer (the read that holds the steps' flag,
/// or the keeper into its page), any readers. Two copies: the writer
/// writes the one not named newest, then names it, so that a writer held
/// up mid-write (preempted, stopped, or the keeper in another process)
/// leaves the newest whole, and readers never wait for it nor go without.
/// Laid out as the keeper's page holds it (`docs/page.md`).
#[repr(C, align(64))]
pub(crate) struct Published {
    copies: [Words; 2],
    /// The copy that holds the newest state (its low bit).
    newest: AtomicU64,
    reserved: [AtomicU64; 7],
}

const _: () = assert!(size_of::<Words>() == 24 * 8);
const _: () = assert!(size_of::<Published>() == BOUNDS_WORDS * 8);

/// `meta`'s flags: a counter clock, a VMClock marker.
const HAS_COUNTER: u64 = 1 << 24;
const HAS_MARKER: u64 = 1 << 25;

/// The process's state: void (all zeros) until the first refresh.
pub(crate) static PUBLISHED: Published = Published::new();

fn source_code(source: BoundsSource) -> u64 {
    match source {
        BoundsSource::Kernel => 0,
        BoundsSource::Chronyd => 1,
        BoundsSource::ClockBound => 2,
        BoundsSource::ClockBound3 => 3,
        BoundsSource::VmClock => 4,
        BoundsSource::Ptp4l => 5,
    }
}

fn status_code(status: Option<BoundsStatus>) -> u64 {
    match status {
        None => 0,
        Some(BoundsStatus::Synchronized) => 1,
        Some(BoundsStatus::FreeRunning) => 2,
    }
}

fn leap_code(leap: LeapSecond) -> u64 {
    match leap {
        LeapSecond::None => 0,
        LeapSecond::Insert => 1,
        LeapSecond::Delete => 2,
        LeapSecond::InProgress => 3,
    }
}

impl Words {
    const fn new() -> Words {
        Words {
            sequence: AtomicU64::new(0),
            as_of: AtomicU64::new(0),
            below: AtomicU64::new(0),
            above: AtomicU64::new(0),
            rate_q32: AtomicU64::new(0),
            void_at: AtomicU64::new(0),
            free_running_at: AtomicU64::new(0),
            meta: AtomicU64::new(0),
            kernel_max_error: AtomicU64::new(0),
            kernel_estimated_error: AtomicU64::new(0),
            accuracy: AtomicU64::new(0),
            counter: [const { AtomicU64::new(0) }; 6],
            marker: AtomicU64::new(0),
        }
    }

    /// Writes `state` (the one writer).
    fn write(&self, state: &State) {
        // Even: a `fork()`ed child may find it odd, its parent's writer
        // gone mid-write; the words are then rewritten whole from here.
        let sequence = self.sequence.load(Ordering::Relaxed) & !1;
        // Invariant: odd while the words change, so that a reader that
        // saw it even before and after its loads saw one whole state.
        self.sequence
            .store(sequence.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.as_of.store(state.as_of, Ordering::Relaxed);
        self.below.store(state.below, Ordering::Relaxed);
        self.above.store(state.above, Ordering::Relaxed);
        self.rate_q32.store(state.rate_q32, Ordering::Relaxed);
        self.void_at.store(state.void_at, Ordering::Relaxed);
        self.free_running_at
            .store(state.free_running_at, Ordering::Relaxed);
        if let Some(clock) = &state.counter {
            let words = [
                clock.at,
                clock.time_ns,
                clock.mult,
                u64::from(clock.shift),
                clock.half_ns,
                clock.rate_q32,
            ];
            for (word, value) in self.counter.iter().zip(words) {
                word.store(value, Ordering::Relaxed);
            }
        }
        self.marker
            .store(state.marker.unwrap_or(0), Ordering::Relaxed);
        let meta = source_code(state.source)
            | status_code(state.status) << 8
            | leap_code(state.leap) << 16
            | if state.counter.is_some() {
                HAS_COUNTER
            } else {
                0
            }
            | if state.marker.is_some() {
                HAS_MARKER
            } else {
                0
            }
            | u64::from(state.tai_offset_s as u32) << 32;
        self.meta.store(meta, Ordering::Relaxed);
        self.kernel_max_error
            .store(split(state.kernel_max_error), Ordering::Relaxed);
        self.kernel_estimated_error
            .store(split(state.kernel_estimated_error), Ordering::Relaxed);
        let accuracy = u64::from(state.accuracy_ns) | u64::from(state.accuracy_q32) << 32;
        self.accuracy.store(accuracy, Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(2), Ordering::Release);
    }

    /// The state written last, if no write overlapped the loads.
    #[inline(always)]
    fn read(&self) -> Option<State> {
        let before = self.sequence.load(Ordering::Acquire);
        if before % 2 == 1 {
            return None;
        }
        let as_of = self.as_of.load(Ordering::Relaxed);
        let below = self.below.load(Ordering::Relaxed);
        let above = self.above.load(Ordering::Relaxed);
        let rate_q32 = self.rate_q32.load(Ordering::Relaxed);
        let void_at = self.void_at.load(Ordering::Relaxed);
        let free_running_at = self.free_running_at.load(Ordering::Relaxed);
        let meta = self.meta.load(Ordering::Relaxed);
        let kernel_max_error = self.kernel_max_error.load(Ordering::Relaxed);
        let kernel_estimated_error = self.kernel_estimated_error.load(Ordering::Relaxed);
        let accuracy = self.accuracy.load(Ordering::Relaxed);
        // Loaded only where there are: the common read skips them.
        let counter = (meta & HAS_COUNTER != 0).then(|| {
            let [at, time_ns, mult, shift, half_ns, rate_q32] =
                self.counter.each_ref().map(|w| w.load(Ordering::Relaxed));
            CounterClock {
                at,
                time_ns,
                mult,
                shift: shift as u8,
                half_ns,
                rate_q32,
            }
        });
        let marker = (meta & HAS_MARKER != 0).then(|| self.marker.load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        if self.sequence.load(Ordering::Relaxed) != before {
            return None;
        }
        Some(State {
            as_of,
            below,
            above,
            rate_q32,
            void_at,
            free_running_at,
            source: match meta & 0xff {
                1 => BoundsSource::Chronyd,
                2 => BoundsSource::ClockBound,
                3 => BoundsSource::ClockBound3,
                4 => BoundsSource::VmClock,
                5 => BoundsSource::Ptp4l,
                _ => BoundsSource::Kernel,
            },
            status: match (meta >> 8) & 0xff {
                1 => Some(BoundsStatus::Synchronized),
                2 => Some(BoundsStatus::FreeRunning),
                _ => None,
            },
            leap: match (meta >> 16) & 0xff {
                1 => LeapSecond::Insert,
                2 => LeapSecond::Delete,
                3 => LeapSecond::InProgress,
                _ => LeapSecond::None,
            },
            tai_offset_s: (meta >> 32) as u32 as i32,
            accuracy_ns: accuracy as u32,
            accuracy_q32: (accuracy >> 32) as u32,
            kernel_max_error: joined(kernel_max_error),
            kernel_estimated_error: joined(kernel_estimated_error),
            counter,
            marker,
        })
    }
}

impl Published {
    pub(crate) const fn new() -> Published {
        Published {
            copies: [Words::new(), Words::new()],
            newest: AtomicU64::new(0),
            reserved: [const { AtomicU64::new(0) }; 7],
        }
    }

    /// The state the keeper's page's bounds words hold, read and written
    /// as a process's own.
    pub(crate) fn over(words: &[AtomicU64; BOUNDS_WORDS]) -> &Published {
        // SAFETY: `Published` is `repr(C)` of atomic words only, as many
        // as `words` has (asserted above), and no more aligned than the
        // page's 64-byte-aligned bounds; any bits are a value of it.
        unsafe { &*std::ptr::from_ref(words).cast::<Published>() }
    }

    /// Publishes `state`. One writer at a time (the step's, or a
    /// test's own `Published`): the sequences are not a lock.
    pub(crate) fn publish(&self, state: &State) {
        let next = (self.newest.load(Ordering::Relaxed) & 1) ^ 1;
        self.copies[next as usize].write(state);
        // Named newest once written whole (the copy's sequence even).
        self.newest.store(next, Ordering::Release);
    }

    /// Every copy's sequence: each publication adds 2 to one.
    fn sequences(&self) -> u64 {
        self.copies
            .iter()
            .map(|copy| copy.sequence.load(Ordering::Acquire))
            .fold(0, u64::wrapping_add)
    }

    /// How many states were published (a forked child's count goes on
    /// from its parent's): for the readers' tests, Linux's.
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn publications(&self) -> u64 {
        self.sequences() / 2
    }

    /// How many states were published: a copy needs no rewrite while it
    /// stands (the keeper's, Linux x86_64's).
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub(crate) fn version(&self) -> u64 {
        self.sequences()
    }

    /// Whether anything was published yet.
    pub(crate) fn ever_published(&self) -> bool {
        self.sequences() != 0
    }

    /// The state last published, whole; `None` when the writer wrote both
    /// copies over at each of a few tries. Lock-free and wait-free: loads
    /// only.
    #[inline]
    pub(crate) fn load(&self) -> Option<State> {
        (0..READ_TRIES).find_map(|_| {
            let newest = self.newest.load(Ordering::Acquire) & 1;
            self.copies[newest as usize].read()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> State {
        State {
            as_of: 1_795_435_200_000_000_000,
            below: 90_000,
            above: 95_000,
            rate_q32: 6_443,
            void_at: 1_795_436_200_000_000_000,
            free_running_at: 1_795_435_216_000_000_000,
            source: BoundsSource::Chronyd,
            status: Some(BoundsStatus::Synchronized),
            leap: LeapSecond::Delete,
            tai_offset_s: -37,
            accuracy_ns: 80,
            accuracy_q32: 13,
            kernel_max_error: Duration::from_secs(16),
            kernel_estimated_error: Duration::from_micros(7),
            counter: None,
            marker: None,
        }
    }

    #[test]
    fn a_state_reads_back_as_published() {
        let published = Published::new();
        assert_eq!(
            published.load().map(|s| s.void_at),
            Some(0),
            "void at first"
        );
        let state = sample();
        published.publish(&state);
        assert_eq!(published.load(), Some(state));
        let unknown = State {
            status: None,
            source: BoundsSource::VmClock,
            leap: LeapSecond::InProgress,
            marker: Some(0),
            ..state
        };
        published.publish(&unknown);
        assert_eq!(published.load(), Some(unknown));
    }

    /// A sequence left odd (a child forked while its parent's writer
    /// wrote) is no obstacle: the next publication is read whole.
    #[test]
    fn a_publication_after_a_writer_vanished_mid_write_is_read() {
        let published = Published::new();
        published.copies[0].sequence.store(7, Ordering::Relaxed);
        assert_eq!(published.load(), None, "mid-write");
        published.publish(&sample());
        assert_eq!(published.load(), Some(sample()));
    }

    /// A writer held up in the middle of a write (preempted, stopped; the
    /// keeper, in another process) leaves the state before it whole: the
    /// copy it writes is not the one readers read.
    #[test]
    fn a_writer_held_up_mid_write_leaves_the_newest_state_whole() {
        let published = Published::new();
        published.publish(&sample());
        let next = (published.newest.load(Ordering::Relaxed) as usize & 1) ^ 1;
        // What `write` leaves while it stands between its first store and
        // its last.
        published.copies[next]
            .sequence
            .fetch_add(1, Ordering::Relaxed);
        published.copies[next].as_of.store(1, Ordering::Relaxed);
        assert_eq!(published.load(), Some(sample()));
        // Its next publication is read whole, where it wrote.
        let later = State {
            as_of: sample().as_of + 1,
            ..sample()
        };
        published.publish(&later);
        assert_eq!(published.load(), Some(later));
        assert!(published.ever_published());
    }

    /// Readers beside a writer that alternates two states never see a mix.
    #[test]
    fn readers_never_see_half_a_state() {
        static SHARED: Published = Published::new();
        let a = sample();
        let b = State {
            as_of: 7,
            below: 8,
            above: 9,
            rate_q32: 10,
            void_at: 11,
            free_running_at: 12,
            source: BoundsSource::ClockBound,
            status: Some(BoundsStatus::FreeRunning),
            leap: LeapSecond::None,
            tai_offset_s: 37,
            accuracy_ns: 4,
            accuracy_q32: 5,
            kernel_max_error: Duration::from_micros(1),
            kernel_estimated_error: Duration::from_micros(2),
            counter: Some(CounterClock {
                at: 1,
                time_ns: 2,
                mult: 3,
                shift: 4,
                half_ns: 5,
                rate_q32: 6,
            }),
            marker: Some(13),
        };
        SHARED.publish(&a);
        std::thread::scope(|s| {
            let writer = s.spawn(move || {
                let rounds = if cfg!(miri) { 200 } else { 20_000 };
                for i in 0..rounds {
                    SHARED.publish(if i % 2 == 0 { &b } else { &a });
                }
            });
            while !writer.is_finished() {
                if let Some(seen) = SHARED.load() {
                    assert!(seen == a || seen == b, "{seen:?}");
                }
            }
        });
    }
}
