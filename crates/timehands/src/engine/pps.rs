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
//! threshold), and its frequency adjustment set to cancel the oscillator's,
//! to the ppt (a whole ppb held through a five-minute outage is 300 ns).
//! The correction is made a while after the edge (when the pulse is
//! processed): it is the error as of then, what the clock gained since the
//! edge against the oscillator at the estimated frequency counted in, and
//! what the old frequency adds until the new one takes effect (the next
//! windup's switch point).
//!
//! # What it rejects
//!
//! - a pulse whose innovation is beyond five standard deviations of what
//!   the filter expects (a late interrupt, a glitch, a receiver without a
//!   fix): an outlier, dropped. The gate holds from the third pulse: the
//!   jitter it is set by is the median of the second differences so far
//!   (one outlier spoils three of them, so the median needs seven before it
//!   is trusted alone; before, it is capped at a 1 µs prior);
//! - an outlier among the two pulses a line starts on: for its first ten
//!   pulses the filter follows the most of them that lie on a line, all
//!   or all but one ([the robust start](super::start)), so a late second
//!   pulse is found out at the third, a late first one at the fourth. The
//!   clock follows the filter only once three pulses lie on its line:
//!   before, it is slewed to each pulse alone and keeps its frequency, so
//!   that a line of two, an outlier's as likely as not, never steers it;
//! - a run of such pulses on one line is a step only when, from its fourth
//!   pulse, its slope is not the filter's frequency (the oscillator's
//!   frequency stepped), or when it has lasted ten pulses (the reference's
//!   phase stepped): pulses late by the same amount a few times in a row
//!   are outliers. The filter and its statistics start again from the run;
//! - a pulse less than half a second after the last: spurious.
//!
//! Missing pulses are gaps the filter predicts across; when pulses stop,
//! the clock holds its last frequency (holdover) until they come back.
//!
//! # Measuring jitter and wander
//!
//! The filter's jitter and wander are measured from the pulses themselves
//! ([`Noise`]): the jitter from second differences of
//! consecutive phases, the wander from second differences 16 to 256 s
//! apart, each with a prior until it is measured.

use super::bintime::BinTime;
use super::capture::Stamp;
use super::counter::Counter;
use super::discipline::MAX_PPB;
use super::kalman::{Kalman, MAX_GAP, ONE};
use super::noise::{Noise, PRIOR_JITTER, square};
use super::pulse::{GATE, Pulse, collinear};
use super::start::Start;
use super::timekeeper::Timekeeper;
use crate::Error;

/// Nanoseconds in a second, as the filter's fixed point.
const SECOND: i128 = 1_000_000_000 * ONE;
/// Rejected pulses in a row on one line before their slope is judged: a
/// step of the oscillator's frequency when it is not the filter's. (Three
/// outliers of random lateness lie on a line within the gate about once in
/// a thousand bursts; four, a thousand times less often.)
const STEP_RUN: u32 = 4;
/// Rejected pulses in a row on a line of the filter's slope before they
/// are a step of the reference's phase, not a run of outliers.
const PHASE_STEP_RUN: u32 = 10;
/// Pulses after a fit before the discipline says it is locked.
const LOCK_PULSES: u32 = 8;
/// Seconds without a pulse before the discipline says it is in holdover.
const HOLDOVER_AFTER: u64 = 2;

/// Rejected pulses in a row that lie on one line: its first and last.
#[derive(Clone, Copy, Debug)]
struct Run {
    first: Pulse,
    last: Pulse,
    pulses: u32,
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
    /// The rejected pulses in a row since the last taken, if on a line.
    run: Option<Run>,
    /// The pulses since the filter's line began, while few.
    start: Option<Start>,
    /// The jitter and wander the filter assumes.
    noise: Noise,
    /// Pulses the filter took since its line began, beyond the two it was
    /// fit through.
    since_fit: u32,
    /// Pulses that lie on the filter's line (a run's all do): it steers
    /// the clock from three on.
    line_pulses: u32,
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
            run: None,
            start: None,
            noise: Noise::new(),
            since_fit: 0,
            line_pulses: 0,
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
        self.noise.set_count(count_ns);
        self.status.pulses += 1;
        let Some(last) = self.last else {
            let first = Pulse {
                count,
                second: 0,
                phase: 0,
            };
            self.last = Some(first);
            self.start = Some(Start::new(&[first]));
            self.noise.observe(first);
            self.steer(tk, stamp, count, 0);
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
        self.noise.observe(pulse);
        match self.filter.filter(|_| seconds <= MAX_GAP) {
            Some(mut filter) => {
                filter.predict(seconds, self.noise.wander());
                let r = self.noise.jitter_variance();
                let innovation = pulse.phase - filter.x;
                let squared = square(innovation);
                let variance = filter.innovation_variance(r);
                let gated = squared > GATE * GATE * variance;
                if !gated {
                    filter.update(pulse.phase, r);
                }
                // Kept even when the pulse is not: the prediction to its second.
                self.filter = Some(filter);
                if self.judge_start(pulse, !gated) {
                    // The filter follows the start's better line instead.
                } else if gated {
                    self.reject(pulse);
                } else {
                    self.since_fit += 1;
                    self.line_pulses += 1;
                    self.run = None;
                    self.noise.accept(pulse, squared > 4 * variance);
                }
            }
            None => self.fit(last, pulse, 2),
        }
        self.steer(tk, stamp, count, pulse.phase);
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

    /// Starts the filter again from the line through `from` and `to`
    /// (`pulses` lie on it, those two among them), and its statistics with
    /// it (a step spoils every second difference across it); the wander
    /// assumed until measured is the last one's.
    fn fit(&mut self, from: Pulse, to: Pulse, pulses: u32) {
        let seconds = (to.second - from.second) as i128;
        if self.filter.is_some() {
            self.status.restarts += 1;
            self.noise.assume_last_wander();
        }
        self.run = None;
        if seconds > MAX_GAP {
            // Too long ago to say anything of the frequency: `to` is a
            // first pulse again.
            self.noise.forget(to, None);
            self.filter = None;
            self.start = Some(Start::new(&[to]));
            return;
        }
        self.noise.forget(to, Some(from));
        self.start = Some(Start::new(&[from, to]));
        self.filter = Some(Kalman::fit(
            from.phase,
            to.phase,
            seconds,
            self.noise.jitter_variance(),
        ));
        self.since_fit = 0;
        self.line_pulses = pulses;
    }

    /// Adds `pulse` (`taken` by the filter or not) to the line's start
    /// while it lasts, and when the gate kept it out and another line
    /// through the start's pulses fits them better than what the filter
    /// took, starts the filter again on that line's pulses (predicted to
    /// `pulse`'s second) and its statistics with it: whether it did. (A
    /// wrong line shows in the good pulses it keeps out; judging only then
    /// keeps the interrupt handler's work to those.)
    fn judge_start(&mut self, pulse: Pulse, taken: bool) -> bool {
        let Some(mut start) = self.start else {
            return false;
        };
        start.push(pulse, taken);
        self.start = (!start.is_over()).then_some(start);
        if taken {
            return false;
        }
        // Held to the prior jitter at most: a jitter measured over a burst
        // of outliers or a step would have every pulse on a line; beyond
        // the prior, no line is, and the gate alone decides.
        let Some(better) = start.better(self.noise.jitter_variance().min(PRIOR_JITTER)) else {
            return false;
        };
        // The outliers counted are the better line's: those the filter had
        // kept out (this one not counted yet) are counted again.
        let counted = start.kept_out(start.taken) - !taken as u32;
        self.status.outliers =
            self.status.outliers - counted as u64 + start.kept_out(better) as u64;
        let (pulses, len) = start.pulses_of(better);
        let newest_taken = pulses[len - 1];
        self.run = None;
        self.noise.forget(newest_taken, Some(pulses[len - 2]));
        let (r, q) = (self.noise.jitter_variance(), self.noise.wander());
        let gap = |from: Pulse, to: Pulse| (to.second - from.second) as i128;
        let mut filter = Kalman::fit(
            pulses[0].phase,
            pulses[1].phase,
            gap(pulses[0], pulses[1]),
            r,
        );
        for pair in pulses[1..len].windows(2) {
            filter.predict(gap(pair[0], pair[1]), q);
            filter.update(pair[1].phase, r);
        }
        if newest_taken != pulse {
            filter.predict(gap(newest_taken, pulse), q);
        }
        self.filter = Some(filter);
        self.since_fit = len as u32 - 2;
        self.line_pulses = len as u32;
        start.taken = better;
        self.start = (!start.is_over()).then_some(start);
        true
    }

    /// A pulse the gate kept out. A run of them on one line is a step when
    /// what the run says of the frequency is not what the filter says, or
    /// when it has lasted [`PHASE_STEP_RUN`] pulses.
    fn reject(&mut self, pulse: Pulse) {
        self.status.outliers += 1;
        let Some(mut run) = self.run.filter(|run| self.on_line(run, pulse)) else {
            // The first of a run, or one off the run's line: a new run.
            self.run = Some(Run {
                first: pulse,
                last: pulse,
                pulses: 1,
            });
            return;
        };
        run.last = pulse;
        run.pulses += 1;
        self.run = Some(run);
        let Some(filter) = self.filter.filter(|_| run.pulses >= STEP_RUN) else {
            return;
        };
        // The run's slope against the filter's frequency, each with its
        // variance: the two ends' jitter over the span, and `pyy`.
        let span = (run.last.second - run.first.second) as i128;
        let slope = (run.last.phase - run.first.phase) / span;
        let variance = 2 * self.noise.jitter_variance() / (span * span) + filter.pyy;
        let apart = square(slope - filter.y);
        if apart > GATE * GATE * variance || run.pulses >= PHASE_STEP_RUN {
            self.fit(run.first, run.last, run.pulses);
        }
    }

    /// Whether `pulse` lies on the line through the run's first and last
    /// pulses (one pulse: any line), to within the gate.
    fn on_line(&self, run: &Run, pulse: Pulse) -> bool {
        run.pulses == 1 || collinear([run.first, run.last, pulse], self.noise.jitter_variance())
    }

    /// Steers the clock, whose time at the pulse's edge (`count`) was
    /// `edge`, to the filter's estimate (the pulse's raw phase being
    /// `phase`): its phase, and its frequency once the filter's line rests
    /// on three pulses.
    fn steer<C: Counter>(&mut self, tk: &Timekeeper<C>, edge: Stamp, count: u64, phase: i128) {
        // The clock's error at the pulse: how far realtime is past the
        // nearest whole second, less the measurement's estimated noise.
        let frac = edge.realtime.frac() as i64 as i128; // ±half a second
        let measured = (frac * 1_000_000_000) >> 32;
        // A line through two pulses is an outlier's as likely as not (a
        // late first pulse and a late third one look alike until the
        // fourth): until a third lies on it, the clock is slewed to each
        // pulse alone and keeps the frequency it has.
        let line = self.filter.filter(|_| self.line_pulses >= 3);
        let estimate = line.map_or(phase, |filter| filter.x);
        let error = measured - (phase - estimate);
        self.status.phase_ns = error.div_euclid(ONE) as i64;
        if let Some(filter) = self.filter {
            self.report(&filter);
        }
        // The correction is made now, a while after the edge: it is the
        // error as of now, and what the old frequency adds until the new
        // one takes effect.
        let now = tk.counter().read() & tk.mask;
        let mut correction = error + self.gained_since(tk, edge, count, now);
        if let Some(filter) = line {
            correction += self.steer_frequency(tk, now, &filter);
        }
        let ns = correction.div_euclid(ONE) as i64;
        if correction.abs() > self.step_threshold {
            let boottime = tk.current(|slot| slot.boottime()).1;
            tk.set_boottime(boottime.saturating_sub(BinTime::from_nanos(ns as i128)));
            tk.adjtime(0);
            self.status.steps += 1;
        } else {
            tk.adjtime(-ns);
        }
    }

    /// What the clock gained (fixed-point ns) from the edge (`count`, at
    /// `edge`) to `now`, a count just read, against the oscillator at the
    /// filter's frequency: whatever ran meanwhile (a slew, a frequency
    /// adjustment, a step of neither clock's uptime) is in the clock's own
    /// time. (The nominal frequency before there is a filter: up to 500
    /// ppm of the wait, 1 µs for a 2 ms one.)
    fn gained_since<C: Counter>(
        &self,
        tk: &Timekeeper<C>,
        edge: Stamp,
        count: u64,
        now: u64,
    ) -> i128 {
        // A count ahead of now (read on a CPU whose counter lags) has had
        // nothing run since.
        let counts = tk.delta(count, now);
        let Some(at_now) = (counts > 0).then(|| tk.time_of(now).ok()).flatten() else {
            return 0;
        };
        let ran = at_now.uptime.saturating_sub(edge.uptime).as_units();
        let clock = ran.saturating_mul(1_000_000_000) >> 32;
        let raw = counts as i128 * SECOND / tk.counter().frequency() as i128;
        let y = self.filter.map_or(0, |filter| filter.y);
        clock - (raw - raw.saturating_mul(y) / (SECOND + y))
    }

    /// Sets the frequency adjustment that cancels the filter's estimate of
    /// the oscillator's, and returns what the clock gains (fixed-point ns)
    /// from `now`, a count just read, until it takes effect.
    fn steer_frequency<C: Counter>(
        &mut self,
        tk: &Timekeeper<C>,
        now: u64,
        filter: &Kalman,
    ) -> i128 {
        // The adjustment that cancels the oscillator's frequency y:
        // (1 + y)(1 + a) = 1, so a = -y / (1 + y), in ppt rounded (a whole
        // ppb held through an outage would be its error).
        let y = filter.y;
        let (num, den) = (-(y * 1_000_000_000_000), SECOND + y);
        let a = (num + num.signum() * den / 2) / den;
        let ppt = (a as i64).clamp(-MAX_PPB * 1000, MAX_PPB * 1000);
        // The new adjustment runs from the next windup's switch point; up
        // to there the old one runs on, a fraction of a second at the
        // difference of the two: the first line of an acquisition from 100
        // ppm would leave 12 µs to the next pulse.
        let old = tk.frequency_adjustment_ppt();
        let counts = tk.counts_to_next_rate(now) as i128;
        let gained =
            ((old - ppt) as i128) * counts * (ONE / 1000) / tk.counter().frequency() as i128;
        // Within ±500 ppm by the clamp: never refused.
        let _ = tk.set_frequency_adjustment_ppt(ppt);
        gained
    }

    /// The filter's figures in the status.
    fn report(&mut self, filter: &Kalman) {
        self.status.phase_uncertainty_ns = (filter.pxx / ONE).max(0).isqrt() as u64;
        self.status.frequency_ppb = (filter.y / ONE) as i64;
        self.status.stability_ppt = (filter.pyy * 1_000_000 / ONE).max(0).isqrt() as u64;
        self.status.jitter_ns = (self.noise.jitter_variance() / ONE).max(0).isqrt() as u64;
        self.status.wander_ppt = (self.noise.wander() * 1_000_000 / ONE).max(0).isqrt() as u64;
    }
}
