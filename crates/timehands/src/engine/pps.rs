//! The PPS discipline: a pulse a second from a reference (a GPS receiver's
//! PPS on a capture pin) steers the timekeeper's phase and frequency.
//!
//! # How it beats `hardpps`
//!
//! FreeBSD's `hardpps` takes the median of three pulses for the phase and
//! measures the frequency over calibration intervals of 4 s, doubled after
//! four good ones up to 256 s: minutes to lock, and a frequency that stops
//! improving at 256 s. Here each pulse's raw counter value is the
//! measurement of a [Kalman filter](super::kalman) of the oscillator (phase,
//! frequency, random-walk wander): its gains are those of a least-squares
//! line at first (two pulses give the frequency to the jitter, a few more
//! to a fraction of it) and settle at the optimum for the jitter and the
//! wander it measures, so its steady-state error is the physical limit.
//!
//! The filter runs in the oscillator's own frame (raw counts at the nominal
//! frequency), open loop: what the clock was told does not feed back into
//! it. The clock is then steered to the estimate at every pulse: its error
//! is the pulse's timestamp minus the measurement's estimated noise, slewed
//! out at up to 500 ppm (`adjtime`, or a step of realtime beyond the step
//! threshold), and its frequency adjustment set to cancel the oscillator's.
//!
//! # What it rejects
//!
//! - a pulse whose innovation is beyond five standard deviations of what
//!   the filter expects (a late interrupt, a glitch): an outlier, dropped;
//! - three such pulses in a row that agree with each other: a frequency or
//!   phase step of the oscillator, and the filter starts again from them;
//! - a pulse less than half a second after the last: spurious.
//!
//! Missing pulses are gaps the filter predicts across; when pulses stop,
//! the clock holds its last frequency (holdover) until they come back.
//!
//! # Measuring jitter and wander
//!
//! The jitter σ comes from the second differences of consecutive raw phases
//! (variance `6σ²`), the wander `w` from second differences of raw phases
//! `T` apart for `T` of 16 to 256 s (variance `6σ² + w²(2T³+T)/3`), at the
//! shortest `T` where the wander dominates.

use super::bintime::BinTime;
use super::counter::Counter;
use super::discipline::MAX_PPB;
use super::kalman::{Kalman, MAX_GAP, ONE};
use super::timekeeper::Timekeeper;
use crate::Error;

/// Nanoseconds in a second, as the filter's fixed point.
const SECOND: i128 = 1_000_000_000 * ONE;
/// Innovations beyond this many standard deviations are outliers.
const GATE: i128 = 5;
/// Rejected pulses in a row that agree with each other: a step.
const STEP_RUN: usize = 3;
/// Pulses after a fit before the discipline says it is locked.
const LOCK_PULSES: u32 = 8;
/// Seconds without a pulse before the discipline says it is in holdover.
const HOLDOVER_AFTER: u64 = 2;
/// The jitter's variance assumed until four second differences have been
/// seen: (1 µs)².
const PRIOR_JITTER: i128 = 1_000_000 * ONE;
/// The wander assumed until it has been measured: 1 ppb/√s.
const PRIOR_WANDER: i128 = ONE;
/// The smallest wander the filter assumes: 0.01 ppb/√s (an oven).
const MIN_WANDER: i128 = ONE / 10_000;
/// Seconds between the raw phases kept for the wander, and how many.
const BLOCK: i64 = 16;
const BLOCKS: usize = 33;
/// The spacings (in blocks) at which the wander is measured.
const SPANS: [usize; 5] = [1, 2, 4, 8, 16];
/// The longest memory of the running means, in samples.
const MEMORY: i128 = 512;

/// A running mean over the last [`MEMORY`] samples or so.
#[derive(Clone, Copy, Debug, Default)]
struct Mean {
    value: i128,
    samples: i128,
}

impl Mean {
    fn add(&mut self, sample: i128) {
        self.samples = (self.samples + 1).min(MEMORY);
        self.value += (sample - self.value) / self.samples;
    }
}

/// A pulse as the filter counts it: its counter value, the second it marks
/// (from the first pulse), and the oscillator's raw phase there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pulse {
    count: u64,
    second: i64,
    phase: i128,
}

/// The discipline's state, as [`Pps::status`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PpsState {
    /// No pulse yet, or one: the frequency is not known.
    Waiting,
    /// Pulses come, and the filter is converging.
    Acquiring,
    /// The clock follows the pulses.
    Locked,
    /// Pulses stopped: the clock runs on at the last frequency.
    Holdover,
}

/// What the PPS discipline knows, for a user to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PpsStatus {
    /// Where the discipline stands.
    pub state: PpsState,
    /// The clock's error at the last pulse as estimated there (before the
    /// correction), in ns: positive ahead.
    pub phase_ns: i64,
    /// The estimate's own uncertainty (one standard deviation), ns.
    pub phase_uncertainty_ns: u64,
    /// The oscillator's frequency error as estimated, ppb: positive fast.
    pub frequency_ppb: i64,
    /// The frequency estimate's uncertainty (stability), in thousandths of
    /// a ppb.
    pub stability_ppt: u64,
    /// The pulses' timestamp jitter (one standard deviation), ns.
    pub jitter_ns: u64,
    /// The oscillator's wander, in thousandths of a ppb per √s.
    pub wander_ppt: u64,
    /// Seconds since the last pulse.
    pub since_pulse: u64,
    /// Pulses taken.
    pub pulses: u64,
    /// Pulses rejected as outliers (or spurious).
    pub outliers: u64,
    /// Pulses that did not come.
    pub missing: u64,
    /// Times the filter started again: a step of the oscillator, or a gap
    /// longer than it carries over.
    pub restarts: u64,
    /// Realtime steps the discipline made.
    pub steps: u64,
}

/// Disciplines a timekeeper to a pulse per second: give it the counter
/// value captured at each pulse's edge, with [`event`](Pps::event).
///
/// No allocation and no floating point; the timekeeper's writer does the
/// steering (`adjtime`, the frequency adjustment, a realtime step), so
/// readers stay lock-free and see no step back.
///
/// ```
/// use timehands::{Pps, PpsState, SimCounter, Timekeeper};
///
/// // An oscillator 100 ppm fast, 300 µs ahead, and a perfect pulse.
/// let counter = SimCounter::new(1_000_000_000);
/// let tk = Timekeeper::new(counter.clone())?;
/// counter.advance(300_000);
/// let mut pps = Pps::new();
/// for _ in 0..20 {
///     for _ in 0..1000 {
///         counter.advance(1_000_100); // a millisecond
///         tk.windup();
///     }
///     pps.event(&tk, counter.value())?;
/// }
/// let status = pps.status(&tk);
/// assert_eq!(status.state, PpsState::Locked);
/// assert!((99_999..=100_001).contains(&status.frequency_ppb), "{status:?}");
/// assert!(status.phase_ns.abs() < 10, "{status:?}");
/// # Ok::<(), timehands::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Pps {
    step_threshold: i128,
    filter: Option<Kalman>,
    last: Option<Pulse>,
    /// The last two accepted pulses, the newer first: for the jitter.
    accepted: [Option<Pulse>; 2],
    /// The last rejected pulses in a row, the newer first: for a step.
    rejected: [Option<Pulse>; STEP_RUN],
    /// Mean squared second difference of consecutive raw phases: `6σ²`.
    jitter: Mean,
    /// Raw phases every [`BLOCK`] seconds, by block number modulo [`BLOCKS`].
    blocks: [Option<Pulse>; BLOCKS],
    /// Mean squared second difference at each of the [`SPANS`].
    spans: [Mean; SPANS.len()],
    since_fit: u32,
    /// The counter's quantization noise, `(1 count)² / 12` in ns²: the
    /// least jitter there is (an exact edge still has it).
    resolution: i128,
    status: PpsStatus,
}

impl Default for Pps {
    fn default() -> Pps {
        Pps::new()
    }
}

impl Pps {
    /// A discipline with no pulse yet, that steps realtime when the clock
    /// is more than 128 ms off (as ntpd does) and slews otherwise.
    pub fn new() -> Pps {
        Pps {
            step_threshold: 128_000_000 * ONE,
            filter: None,
            last: None,
            accepted: [None; 2],
            rejected: [None; STEP_RUN],
            jitter: Mean::default(),
            blocks: [None; BLOCKS],
            spans: [Mean::default(); SPANS.len()],
            since_fit: 0,
            resolution: 0,
            status: PpsStatus {
                state: PpsState::Waiting,
                phase_ns: 0,
                phase_uncertainty_ns: 0,
                frequency_ppb: 0,
                stability_ppt: 0,
                jitter_ns: 0,
                wander_ppt: 0,
                since_pulse: 0,
                pulses: 0,
                outliers: 0,
                missing: 0,
                restarts: 0,
                steps: 0,
            },
        }
    }

    /// Steps realtime (rather than slewing at 500 ppm) when the clock is
    /// more than `ns` off a pulse; `u64::MAX` never steps.
    pub fn step_threshold(mut self, ns: u64) -> Pps {
        self.step_threshold = ns as i128 * ONE;
        self
    }

    /// Takes the pulse whose edge the counter captured at `count` (on
    /// realtime's whole second), and steers the clock.
    ///
    /// # Errors
    /// [`Error::Capture`] when the count is older than the ring's hands
    /// (see [`Timekeeper::time_of`]); nothing changes then.
    pub fn event<C: Counter>(&mut self, tk: &Timekeeper<C>, count: u64) -> Result<(), Error> {
        let stamp = tk.time_of(count)?;
        let frequency = tk.counter().frequency() as i128;
        let count_ns = SECOND / frequency;
        self.resolution = count_ns * count_ns / 12 / ONE;
        self.status.pulses += 1;
        let Some(last) = self.last else {
            self.last = Some(Pulse {
                count,
                second: 0,
                phase: 0,
            });
            self.steer(tk, stamp.realtime, 0);
            return Ok(());
        };
        // The counts since the last pulse, in ns at the nominal frequency,
        // and the whole seconds they span at the estimated one.
        let counts = (count.wrapping_sub(last.count) & tk.mask) as i128;
        let raw = counts * SECOND / frequency;
        let y = self.filter.map_or(0, |filter| filter.y);
        let seconds = (2 * raw + SECOND + y) / (2 * (SECOND + y));
        if seconds == 0 {
            // Half a second or less after the last: not a pulse.
            self.status.outliers += 1;
            return Ok(());
        }
        let pulse = Pulse {
            count,
            second: last.second + seconds as i64,
            phase: last.phase + raw - seconds * SECOND,
        };
        self.last = Some(pulse);
        self.status.missing += seconds as u64 - 1;
        match self.filter.filter(|_| seconds <= MAX_GAP) {
            Some(mut filter) => {
                filter.predict(seconds, self.wander());
                let r = self.jitter_variance();
                let innovation = pulse.phase - filter.x;
                // Until the jitter is measured (four second differences)
                // every pulse is taken: there is no gate to hold it to.
                let gated = self.jitter.samples >= 4
                    && innovation * innovation / ONE > GATE * GATE * filter.innovation_variance(r);
                if !gated {
                    filter.update(pulse.phase, r);
                }
                // Kept even when the pulse is not: the prediction to its second.
                self.filter = Some(filter);
                if gated {
                    self.reject(pulse);
                } else {
                    self.since_fit += 1;
                    self.accept(pulse);
                }
            }
            None => self.fit(last, pulse),
        }
        self.steer(tk, stamp.realtime, pulse.phase);
        Ok(())
    }

    /// What the discipline knows, with the seconds since the last pulse as
    /// `tk`'s counter reads now.
    pub fn status<C: Counter>(&self, tk: &Timekeeper<C>) -> PpsStatus {
        let mut status = self.status;
        status.since_pulse = self.last.map_or(0, |last| {
            (tk.counter().read().wrapping_sub(last.count) & tk.mask) / tk.counter().frequency()
        });
        status.state = match self.filter {
            None => PpsState::Waiting,
            Some(_) if status.since_pulse > HOLDOVER_AFTER => PpsState::Holdover,
            Some(_) if self.since_fit < LOCK_PULSES => PpsState::Acquiring,
            Some(_) => PpsState::Locked,
        };
        status
    }

    /// Starts the filter again from the line through `from` and `to`.
    fn fit(&mut self, from: Pulse, to: Pulse) {
        let seconds = (to.second - from.second) as i128;
        self.status.restarts += self.filter.is_some() as u64;
        if seconds > MAX_GAP {
            // Too long ago to say anything of the frequency: `to` is a
            // first pulse again.
            self.filter = None;
            self.accepted = [Some(to), None];
            return;
        }
        self.filter = Some(Kalman::fit(
            from.phase,
            to.phase,
            seconds,
            self.jitter_variance(),
        ));
        self.since_fit = 0;
        self.rejected = [None; STEP_RUN];
        self.accepted = [Some(to), Some(from)];
    }

    /// A pulse the gate kept out; a run of them that agree is a step.
    fn reject(&mut self, pulse: Pulse) {
        self.status.outliers += 1;
        self.rejected.rotate_right(1);
        self.rejected[0] = Some(pulse);
        let [Some(a), Some(b), Some(c)] = self.rejected else {
            return;
        };
        // Do the three lie on a line, to within the gate? (Spacings in
        // seconds may differ: compare the slopes.)
        let (ab, bc) = ((a.second - b.second) as i128, (b.second - c.second) as i128);
        let bend = (a.phase - b.phase) * bc - (b.phase - c.phase) * ab;
        let limit = GATE * (6 * self.jitter_variance() * ONE).isqrt() * ab * bc;
        if bend.abs() <= limit {
            self.fit(b, a);
        }
    }

    /// A pulse the filter took: the jitter and wander statistics.
    fn accept(&mut self, pulse: Pulse) {
        self.rejected = [None; STEP_RUN];
        if let [Some(b), Some(c)] = self.accepted {
            if pulse.second - b.second == 1 && b.second - c.second == 1 {
                let d = pulse.phase - 2 * b.phase + c.phase;
                self.jitter.add(d * d / ONE);
            }
        }
        self.accepted = [Some(pulse), self.accepted[0]];
        if pulse.second % BLOCK != 0 {
            return;
        }
        let block = pulse.second / BLOCK;
        let at = |back: i64| (block - back).rem_euclid(BLOCKS as i64) as usize;
        self.blocks[at(0)] = Some(pulse);
        for (mean, span) in self.spans.iter_mut().zip(SPANS) {
            let second = |back: i64| pulse.second - back * span as i64 * BLOCK;
            let [Some(b), Some(c)] = [1, 2].map(|back| {
                self.blocks[at(back * span as i64)].filter(|p| p.second == second(back))
            }) else {
                continue;
            };
            let d = pulse.phase - 2 * b.phase + c.phase;
            mean.add(d * d / ONE);
        }
    }

    /// The jitter's variance `r`, ns²: never below the counter's
    /// quantization, so that the filter never takes a pulse as exact.
    fn jitter_variance(&self) -> i128 {
        if self.jitter.samples < 4 {
            return PRIOR_JITTER;
        }
        (self.jitter.value / 6).max(self.resolution)
    }

    /// The wander's variance `q`, ppb² a second: from the shortest span at
    /// which it is at least three times the jitter's part, or the longest
    /// measured.
    fn wander(&self) -> i128 {
        let noise = 6 * self.jitter_variance();
        let mut estimate = None;
        for (mean, span) in self.spans.iter().zip(SPANS) {
            if mean.samples < 8 {
                continue;
            }
            let t = (span as i64 * BLOCK) as i128;
            let q = 3 * (mean.value - noise) / (2 * t * t * t + t);
            estimate = Some(q);
            if mean.value >= 4 * noise {
                break;
            }
        }
        estimate.map_or(PRIOR_WANDER, |q| q.max(MIN_WANDER * MIN_WANDER / ONE))
    }

    /// Steers the clock, whose realtime at the pulse was `realtime`, to the
    /// filter's estimate (the pulse's raw phase being `phase`).
    fn steer<C: Counter>(&mut self, tk: &Timekeeper<C>, realtime: BinTime, phase: i128) {
        // The clock's error at the pulse: how far realtime is past the
        // nearest whole second, less the measurement's estimated noise.
        let frac = realtime.frac() as i64 as i128; // ±half a second
        let measured = (frac * 1_000_000_000) >> 32;
        let estimate = self.filter.map_or(phase, |filter| filter.x);
        let error = measured - (phase - estimate);
        let ns = error.div_euclid(ONE) as i64;
        if error.abs() > self.step_threshold {
            let boottime = tk.current(|slot| slot.boottime()).1;
            tk.set_boottime(boottime.saturating_sub(BinTime::from_nanos(ns as i128)));
            tk.adjtime(0);
            self.status.steps += 1;
        } else {
            tk.adjtime(-ns);
        }
        let Some(filter) = self.filter else {
            return;
        };
        // The adjustment that cancels the oscillator's frequency y:
        // (1 + y)(1 + a) = 1, so a = -y / (1 + y), in ppb rounded.
        let y = filter.y;
        let (num, den) = (-(y * 1_000_000_000), SECOND + y);
        let a = (num + num.signum() * den / 2) / den;
        let ppb = (a as i64).clamp(-MAX_PPB, MAX_PPB);
        // Within ±500 ppm by the clamp: never refused.
        let _ = tk.set_frequency_adjustment(ppb);
        self.status.phase_ns = ns;
        self.status.phase_uncertainty_ns = (filter.pxx / ONE).max(0).isqrt() as u64;
        self.status.frequency_ppb = (y / ONE) as i64;
        self.status.stability_ppt = (filter.pyy * 1_000_000 / ONE).max(0).isqrt() as u64;
        self.status.jitter_ns = (self.jitter_variance() / ONE).max(0).isqrt() as u64;
        self.status.wander_ppt = (self.wander() * 1_000_000 / ONE).max(0).isqrt() as u64;
    }
}
