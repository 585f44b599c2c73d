//! How far apart the CPUs' TSCs are: bounds on the offset of each pair,
//! measured by handing a message back and forth.
//!
//! # The model
//!
//! Say CPU b's TSC reads `d` counts more than CPU a's at the same instant. Two
//! threads, one pinned to each CPU, take turns: the sender reads its TSC and
//! hands the turn over through one shared atomic; the receiver, as soon as it
//! sees the turn (an `Acquire` load), reads its own. The receiver's read comes
//! after the sender's by some transit time `t > 0`, so for a message from a to
//! b, read `s` on a and `r` on b:
//!
//! ```text
//! r - s = d + t            so   d < r - s
//! ```
//!
//! and for a message from b to a, read `s` on b and `r` on a, `r - s = t - d`,
//! so `d > s - r`. Every message narrows one end of the bound: `hi` is the least
//! `r - s` from a to b, `lo` the greatest `s - r` from b to a. The width
//! `hi - lo` is the shortest transit one way plus the shortest the other way,
//! about the shortest round trip, so the bound can say nothing finer than the
//! cost of a cache line crossing between the two CPUs. This is the check Linux
//! runs at boot (`check_tsc_sync_source`), which reports a warp when it sees a
//! receiver's read behind the sender's.
//!
//! The TSCs are *synchronized* for the pair when 0 lies in `[lo, hi]`: nothing
//! measured tells them apart. A message whose receiver read less than its
//! sender is a *backward* observation: what an application that hands
//! timestamps between threads on those CPUs would see.
//!
//! The reads are the crate's fenced ones ([`Tsc`]), so the receiver's read cannot
//! run ahead of its load of the turn, nor the sender's fall behind its store:
//! a backward observation is the TSCs', not the CPU's reordering.
//!
//! Only spawned threads are pinned; the caller's thread keeps its affinity. A
//! pair whose threads run but cannot finish their hand-offs within
//! [`PAIR_TIME_LIMIT`] (a CPU gone offline, its peer starved) gives up with an
//! error; a pinned thread that is never scheduled at all (its CPU held by a
//! real-time task) cannot notice the limit, and the call waits for it.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::Counter;
use crate::hw::Tsc;

/// How long one pair may take for all its hand-offs before
/// [`measure_pair`] gives up with [`SyncError::TimedOut`].
pub const PAIR_TIME_LIMIT: Duration = Duration::from_secs(10);

/// A waiting thread looks at the clock and at its peer's halt flag once in
/// this many polls of the turn: seldom enough to cost nothing in the
/// hand-offs, often enough (some hundred microseconds) to stop promptly.
const POLLS_PER_CHECK: u64 = 4096;

/// What the hand-offs between two CPUs say about their TSCs.
///
/// The offset is that of the second CPU's TSC minus the first's: `lo <= d <= hi`
/// (strictly, `lo < d < hi`) for the `d` with `TSC_second = TSC_first + d`.
#[derive(Clone, Debug, PartialEq)]
pub struct PairBounds {
    /// The two CPUs, first and second.
    pub cpus: (usize, usize),
    /// The lower bound on the offset, in TSC counts.
    pub lo: i64,
    /// The upper bound on the offset, in TSC counts.
    pub hi: i64,
    /// `lo` in nanoseconds, at the frequency given.
    pub lo_ns: f64,
    /// `hi` in nanoseconds, at the frequency given.
    pub hi_ns: f64,
    /// The shortest round trip either thread saw (its send to its next
    /// receipt, on its own TSC), in counts.
    pub min_round_trip: u64,
    /// `min_round_trip` in nanoseconds, at the frequency given.
    pub min_round_trip_ns: f64,
    /// The hand-offs made, as many as asked for.
    pub handoffs: u64,
    /// The hand-offs whose receiver read its TSC below the sender's reading.
    pub backward: u64,
}

impl PairBounds {
    /// Whether an offset of 0 is within the bounds: as far as this measurement
    /// can tell, the pair's TSCs agree.
    pub fn synchronized(&self) -> bool {
        self.lo <= 0 && 0 <= self.hi
    }
}

/// The bounds for every pair of CPUs, from [`measure_all`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// One entry per pair of CPUs, the lower-numbered CPU first; empty when the
    /// process may run on one CPU only.
    pub pairs: Vec<PairBounds>,
}

impl Report {
    /// Whether every pair is [synchronized](PairBounds::synchronized) (true
    /// for no pairs at all).
    pub fn synchronized(&self) -> bool {
        self.pairs.iter().all(PairBounds::synchronized)
    }
}

/// Why a measurement could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum SyncError {
    /// Fewer than 2 hand-offs asked for: the bound needs one each way.
    Handoffs {
        /// The number asked for.
        handoffs: u64,
    },
    /// A frequency of 0 Hz, which no count converts from.
    Frequency,
    /// The same CPU given for both ends of a pair.
    SameCpu {
        /// The CPU given twice.
        cpu: usize,
    },
    /// A thread could not be pinned to a CPU.
    Pin {
        /// The CPU.
        cpu: usize,
        /// What the OS said (`sched_setaffinity` on Linux).
        error: io::Error,
    },
    /// The CPUs this thread may run on could not be read.
    Affinity {
        /// What the OS said (`sched_getaffinity` on Linux; an OS without
        /// CPU affinity says so).
        error: io::Error,
    },
    /// A measuring thread could not be started.
    Spawn {
        /// What the system said.
        error: io::Error,
    },
    /// A pinned thread ended on another CPU: the kernel moved it, as it does
    /// when the CPU goes offline, so its readings are not all that CPU's.
    Moved {
        /// The CPU the thread was pinned to.
        cpu: usize,
    },
    /// The pair did not finish its hand-offs within [`PAIR_TIME_LIMIT`].
    TimedOut {
        /// The two CPUs.
        cpus: (usize, usize),
        /// The hand-offs made before giving up.
        completed: u64,
        /// The hand-offs asked for.
        handoffs: u64,
    },
}

impl fmt::Display for SyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncError::Handoffs { handoffs } => write!(
                f,
                "{handoffs} hand-offs asked for: bounding a TSC offset takes at least 2 (one each way), and thousands give a tight bound"
            ),
            SyncError::Frequency => f.write_str(
                "TSC frequency of 0 Hz: give the TSC's frequency (TscFacts::stated_frequency, or one measured against CLOCK_MONOTONIC_RAW)",
            ),
            SyncError::SameCpu { cpu } => write!(
                f,
                "CPU {cpu} given for both ends of the pair: give two different CPUs"
            ),
            SyncError::Pin { cpu, error } => write!(
                f,
                "cannot pin a thread to CPU {cpu}: {error}: give a CPU that is online and that this process may run on (`taskset -cp <pid>` lists them)"
            ),
            SyncError::Affinity { error } => write!(
                f,
                "cannot read the CPUs this thread may run on: {error}: measure the pairs one by one with measure_pair, where threads can be pinned"
            ),
            SyncError::Moved { cpu } => write!(
                f,
                "the thread pinned to CPU {cpu} was moved off it during the measurement (did the CPU go offline?): measure again with every CPU online"
            ),
            SyncError::Spawn { error } => write!(
                f,
                "cannot start a thread to measure the TSC with: {error}: free some threads or memory and retry"
            ),
            SyncError::TimedOut {
                cpus: (a, b),
                completed,
                handoffs,
            } => write!(
                f,
                "CPUs {a} and {b} made {completed} of {handoffs} hand-offs in {PAIR_TIME_LIMIT:?}: one of them went offline or is too busy; ask for fewer hand-offs or measure on a quieter machine"
            ),
        }
    }
}

impl std::error::Error for SyncError {}

/// The messages one way between two CPUs: the least of (receiver's reading −
/// sender's reading), and how many were negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Gaps {
    least: i64,
    backward: u64,
}

impl Gaps {
    /// No message yet: the least gap is unbounded.
    const NONE: Gaps = Gaps {
        least: i64::MAX,
        backward: 0,
    };

    /// Takes in one message, read at `sent` by its sender and at `received` by
    /// its receiver.
    fn record(&mut self, sent: u64, received: u64) {
        // Two's complement: the difference of two TSCs within 2^63 counts (a
        // century at 3 GHz) of each other is exact whichever is larger.
        let gap = received.wrapping_sub(sent) as i64;
        self.least = self.least.min(gap);
        self.backward += u64::from(gap < 0);
    }
}

/// The bounds `(lo, hi)` on the offset of the second CPU's TSC minus the
/// first's, from the messages first to second and second to first.
fn offset_bounds(first_to_second: Gaps, second_to_first: Gaps) -> (i64, i64) {
    (
        second_to_first.least.saturating_neg(),
        first_to_second.least,
    )
}

/// TSC counts as nanoseconds at `frequency_hz`.
fn nanos(counts: f64, frequency_hz: u64) -> f64 {
    counts * 1e9 / frequency_hz as f64
}

/// Refuses a count or a frequency no measurement can use.
fn check_arguments(handoffs: u64, frequency_hz: u64) -> Result<(), SyncError> {
    if handoffs < 2 {
        return Err(SyncError::Handoffs { handoffs });
    }
    if frequency_hz == 0 {
        return Err(SyncError::Frequency);
    }
    Ok(())
}

/// Bounds the TSC offset of CPU `b` relative to CPU `a` with `handoffs`
/// messages (alternately a to b and b to a), reading a TSC of `frequency_hz`
/// (used only to express the figures in nanoseconds).
///
/// Two threads are spawned, pinned and joined; the caller's thread is not
/// pinned. Each hand-off takes a cache line crossing (some hundred nanoseconds),
/// so 20 000 take some milliseconds; a pair that has not finished within
/// [`PAIR_TIME_LIMIT`] gives up.
pub fn measure_pair(
    a: usize,
    b: usize,
    handoffs: u64,
    frequency_hz: u64,
) -> Result<PairBounds, SyncError> {
    check_arguments(handoffs, frequency_hz)?;
    if a == b {
        return Err(SyncError::SameCpu { cpu: a });
    }
    let tsc = Tsc::new(frequency_hz);
    let baton = Baton::new();
    let deadline = Instant::now() + PAIR_TIME_LIMIT;
    let (first, second) = thread::scope(|scope| {
        let spawn = |cpu, role| {
            let baton = &baton;
            thread::Builder::new()
                .name(format!("tsc-sync-cpu{cpu}"))
                .spawn_scoped(scope, move || {
                    play(baton, tsc, cpu, role, handoffs, deadline)
                })
                .map_err(|error| SyncError::Spawn { error })
        };
        let first = spawn(a, Role::First)?;
        let second = spawn(b, Role::Second).inspect_err(|_| baton.halt())?;
        Ok((join(first), join(second)))
    })?;
    let (first, second) = match (first, second) {
        (Ok(first), Ok(second)) => (first, second),
        (Err(Halt::Pin { cpu, error }), _) | (_, Err(Halt::Pin { cpu, error })) => {
            return Err(SyncError::Pin { cpu, error });
        }
        (Err(Halt::Moved { cpu }), _) | (_, Err(Halt::Moved { cpu })) => {
            return Err(SyncError::Moved { cpu });
        }
        _ => {
            return Err(SyncError::TimedOut {
                cpus: (a, b),
                completed: baton.turn.load(Ordering::Relaxed),
                handoffs,
            });
        }
    };
    let (lo, hi) = offset_bounds(second.received, first.received);
    let min_round_trip = first.min_round_trip.min(second.min_round_trip);
    Ok(PairBounds {
        cpus: (a, b),
        lo,
        hi,
        lo_ns: nanos(lo as f64, frequency_hz),
        hi_ns: nanos(hi as f64, frequency_hz),
        min_round_trip,
        min_round_trip_ns: nanos(min_round_trip as f64, frequency_hz),
        handoffs,
        backward: first.received.backward + second.received.backward,
    })
}

/// Bounds the TSC offset of every pair of CPUs this thread may run on (the
/// process's, unless the caller pinned the thread), each with `handoffs`
/// messages as [`measure_pair`] does. One CPU gives an empty report.
pub fn measure_all(handoffs: u64, frequency_hz: u64) -> Result<Report, SyncError> {
    measure_pairs(handoffs, frequency_hz, |cpus| {
        cpus.iter()
            .enumerate()
            .flat_map(|(i, &a)| cpus[i + 1..].iter().map(move |&b| (a, b)))
            .collect()
    })
}

/// Bounds the TSC offset of every CPU this thread may run on against the
/// first of them, as Linux checks each CPU against the boot CPU: `n - 1`
/// pairs where [`measure_all`] makes `n(n - 1)/2`, and enough to tell whether
/// all agree (to within the bounds' widths).
pub fn measure_against_first(handoffs: u64, frequency_hz: u64) -> Result<Report, SyncError> {
    measure_pairs(handoffs, frequency_hz, |cpus| {
        cpus.iter().skip(1).map(|&b| (cpus[0], b)).collect()
    })
}

/// Measures the pairs that `pairs` makes of the CPUs this thread may run on.
fn measure_pairs(
    handoffs: u64,
    frequency_hz: u64,
    pairs: impl Fn(&[usize]) -> Vec<(usize, usize)>,
) -> Result<Report, SyncError> {
    check_arguments(handoffs, frequency_hz)?;
    let cpus = crate::os::allowed_cpus().map_err(|error| SyncError::Affinity { error })?;
    let pairs = pairs(&cpus)
        .into_iter()
        .map(|(a, b)| measure_pair(a, b, handoffs, frequency_hz))
        .collect::<Result<_, _>>()?;
    Ok(Report { pairs })
}

/// What the two threads share. The turn and the sender's reading share a cache
/// line, so that a hand-off moves one line; the alignment keeps other data off
/// it (128 bytes: Intel CPUs fetch lines in pairs).
#[repr(align(128))]
struct Baton {
    /// How many messages have been sent: message `k` is the first thread's
    /// when `k` is even, the second's when odd.
    turn: AtomicU64,
    /// The sender's TSC reading for the last message.
    stamp: AtomicU64,
    /// Set by a thread that stops early, so that its peer stops too.
    halted: AtomicBool,
}

impl Baton {
    fn new() -> Baton {
        Baton {
            turn: AtomicU64::new(0),
            stamp: AtomicU64::new(0),
            halted: AtomicBool::new(false),
        }
    }

    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
    }

    /// Waits until `count` messages have been sent, polling the clock and the
    /// halt flag now and then; `polls` counts across calls, so that the clock
    /// is looked at also when every wait is short.
    fn wait_for(&self, count: u64, polls: &mut u64, deadline: Instant) -> Result<(), Halt> {
        loop {
            *polls += 1;
            if *polls % POLLS_PER_CHECK == 0
                && (self.halted.load(Ordering::Relaxed) || Instant::now() >= deadline)
            {
                return Err(Halt::Stopped);
            }
            if self.turn.load(Ordering::Acquire) == count {
                return Ok(());
            }
            std::hint::spin_loop();
        }
    }
}

/// Which end of the pair a thread plays: the first sends the even messages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    First,
    Second,
}

/// What one thread saw.
struct Seen {
    /// The messages it received.
    received: Gaps,
    /// Its shortest round trip, in its own TSC's counts.
    min_round_trip: u64,
}

/// Why a thread's part failed.
enum Halt {
    /// It could not be pinned.
    Pin { cpu: usize, error: io::Error },
    /// It ended on another CPU.
    Moved { cpu: usize },
    /// The time ran out, or its peer stopped.
    Stopped,
}

/// One thread's part: pin to `cpu`, send and receive alternately, and check
/// that the thread is still on `cpu` (the kernel breaks the pin of a CPU that
/// goes offline, and the thread then runs on: only the end tells).
fn play(
    baton: &Baton,
    tsc: Tsc,
    cpu: usize,
    role: Role,
    handoffs: u64,
    deadline: Instant,
) -> Result<Seen, Halt> {
    let played = crate::os::pin_to_cpus(&[cpu])
        .map_err(|error| Halt::Pin { cpu, error })
        .and_then(|()| exchange(baton, tsc, role, handoffs, deadline))
        .and_then(|seen| {
            // Where the OS does not say which CPU a thread is on, the pin
            // is taken at its word.
            match crate::os::current_cpu() {
                Some(current) if current != cpu => Err(Halt::Moved { cpu }),
                _ => Ok(seen),
            }
        });
    if played.is_err() {
        baton.halt();
    }
    played
}

/// The hand-offs themselves, on a pinned thread.
fn exchange(
    baton: &Baton,
    tsc: Tsc,
    role: Role,
    handoffs: u64,
    deadline: Instant,
) -> Result<Seen, Halt> {
    // The parity of the messages this thread sends.
    let parity = u64::from(role == Role::Second);
    let mut seen = Seen {
        received: Gaps::NONE,
        min_round_trip: u64::MAX,
    };
    let mut last_sent = None;
    let mut polls = 0;
    for message in 0..handoffs {
        if message % 2 == parity {
            // The previous message was this thread's to receive, so the turn
            // is ours already.
            // No `order_after_read` needed here: x86 keeps this store after
            // the fenced read that produced it.
            let sent = tsc.read();
            baton.stamp.store(sent, Ordering::Relaxed);
            baton.turn.store(message + 1, Ordering::Release);
            last_sent = Some(sent);
        } else {
            baton.wait_for(message + 1, &mut polls, deadline)?;
            let received = tsc.read();
            let sent = baton.stamp.load(Ordering::Relaxed);
            seen.received.record(sent, received);
            if let Some(own) = last_sent {
                seen.min_round_trip = seen.min_round_trip.min(received.saturating_sub(own));
            }
        }
    }
    Ok(seen)
}

/// A scoped thread's result; a panic in it goes on in the caller.
fn join<T>(handle: thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    use super::{Gaps, PairBounds, Report, offset_bounds};

    /// Messages each way between CPUs whose second TSC is `offset` counts
    /// ahead, with transits cycling through `transits`.
    fn exchange(offset: u64, transits: &[u64], messages: u64) -> (Gaps, Gaps) {
        let (mut first_to_second, mut second_to_first) = (Gaps::NONE, Gaps::NONE);
        // `now` is the first CPU's TSC; the second's reads `now + offset`.
        let mut now = 1_000_000;
        for (message, &transit) in (0..messages).zip(transits.iter().cycle()) {
            if message % 2 == 0 {
                first_to_second.record(now, now + transit + offset);
            } else {
                second_to_first.record(now + offset, now + transit);
            }
            now += transit;
        }
        (first_to_second, second_to_first)
    }

    #[test]
    fn the_bounds_hold_the_offset_within_the_transits() {
        let transits: Vec<u64> = (50..=60).collect();
        let (first_to_second, second_to_first) = exchange(1_000, &transits, 1_000);
        let (lo, hi) = offset_bounds(first_to_second, second_to_first);
        assert!(lo <= 1_000 && 1_000 <= hi, "[{lo}, {hi}]");
        // The width is the shortest transit each way.
        assert_eq!((lo, hi), (950, 1_050));
        assert_eq!(first_to_second.backward, 0);
        // The second CPU is ahead: its messages arrive "before" they were sent.
        assert_eq!(second_to_first.backward, 500);
    }

    #[test]
    fn synchronized_tscs_give_bounds_around_zero_and_no_backward_reading() {
        let (first_to_second, second_to_first) = exchange(0, &[80, 120, 95], 99);
        let (lo, hi) = offset_bounds(first_to_second, second_to_first);
        assert_eq!((lo, hi), (-80, 80));
        assert_eq!(first_to_second.backward + second_to_first.backward, 0);
    }

    #[test]
    fn a_tsc_behind_gives_negative_bounds() {
        // The first CPU 5000 counts ahead of the second: the offset is -5000.
        let (mut first_to_second, mut second_to_first) = (Gaps::NONE, Gaps::NONE);
        first_to_second.record(10_000, 5_070);
        second_to_first.record(5_100, 10_170);
        assert_eq!(
            offset_bounds(first_to_second, second_to_first),
            (-5_070, -4_930)
        );
        assert_eq!(first_to_second.backward, 1);
    }

    #[test]
    fn a_report_is_synchronized_when_every_pair_is() {
        let pair = |lo, hi| PairBounds {
            cpus: (0, 1),
            lo,
            hi,
            lo_ns: 0.0,
            hi_ns: 0.0,
            min_round_trip: 100,
            min_round_trip_ns: 0.0,
            handoffs: 2,
            backward: 0,
        };
        assert!(pair(-10, 10).synchronized());
        assert!(pair(0, 10).synchronized());
        assert!(!pair(5, 10).synchronized());
        assert!(!pair(-10, -5).synchronized());
        assert!(Report::default().synchronized());
        assert!(
            Report {
                pairs: vec![pair(-1, 1), pair(-2, 2)]
            }
            .synchronized()
        );
        assert!(
            !Report {
                pairs: vec![pair(-1, 1), pair(3, 4)]
            }
            .synchronized()
        );
    }
}
