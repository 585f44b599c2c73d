//! `Noise`: the jitter and wander the PPS discipline's filter assumes,
//! measured from the pulses themselves.
//!
//! The jitter σ comes from the second differences of consecutive raw phases
//! (variance `6σ²`): their median over the last fifteen at first, then the
//! mean square of those within ten of its standard deviations. The wander
//! `w` comes from second differences of raw phases `T` apart for `T` of 16
//! to 256 s (variance `6σ² + w²(2T³+T)/3`), at the shortest `T` where it is
//! at least three times the jitter's part; while there is none, from a
//! prior, or the tightest upper bound the spans give if lower (a wander
//! hidden in the jitter is bounded, never taken for none). The prior is
//! 1 ppb/√s, grown fourfold whenever five of the last sixteen innovations
//! are beyond two standard deviations (a prior too small would otherwise
//! reject good pulses). Both statistics start again with the filter, the
//! prior then being the last wander.
//!
//! The discipline (`pps`) gives it every pulse ([`Noise::observe`]) and
//! those its filter took ([`Noise::accept`]), and starts it again with the
//! filter ([`Noise::forget`]).

use super::kalman::ONE;
use super::pulse::{GATE, Pulse};

/// The jitter's variance assumed until it is measured, and the most the
/// median of fewer than [`MEDIAN_TRUSTED`] second differences may say:
/// (1 µs)².
pub(super) const PRIOR_JITTER: i128 = 1_000_000 * ONE;
/// Second differences whose median is the robust jitter (odd).
const MEDIAN_WINDOW: usize = 15;
/// Second differences in the median before it is trusted alone: one
/// outlier spoils three.
const MEDIAN_TRUSTED: usize = 7;
/// Gated second differences before their mean square is the jitter.
const JITTER_SAMPLES: i128 = 16;
/// The wander assumed until it has been measured: 1 ppb/√s.
const PRIOR_WANDER: i128 = ONE;
/// The largest the prior grows to: (1 ppm/√s)², which keeps every
/// prediction's covariance within an `i128`.
const MAX_PRIOR: i128 = 1_000_000 * ONE;
/// Of the last sixteen innovations, how many beyond two standard
/// deviations (one in twenty-two when the model is right) show a prior
/// too small, which then grows by [`PRIOR_GROWTH`].
const WIDE_INNOVATIONS: u32 = 5;
const PRIOR_GROWTH: i128 = 4;
/// The smallest wander the filter assumes: 0.01 ppb/√s (an oven), and its
/// variance, rounded up so that the status reads it whole.
const MIN_WANDER: i128 = ONE / 100;
const MIN_VARIANCE: i128 = (MIN_WANDER * MIN_WANDER + ONE - 1) / ONE;
/// Seconds between the raw phases kept for the wander, and how many.
const BLOCK: i64 = 16;
const BLOCKS: usize = 33;
/// The spacings (in blocks) at which the wander is measured.
const SPANS: [usize; 5] = [1, 2, 4, 8, 16];
/// Samples of a spacing before it says anything of the wander.
const SPAN_SAMPLES: i128 = 8;
/// The longest memory of the running means, in samples: the jitter's is
/// then within 2 % (a 300 s holdover magnifies the frequency estimate's
/// error, and the estimate's gains follow the jitter).
const MEMORY: i128 = 2048;

/// The fixed-point square of `x`, saturating: pulses seconds apart square
/// beyond an `i128`, and the most there is then compares as it should.
pub(super) fn square(x: i128) -> i128 {
    x.saturating_mul(x) / ONE
}

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

/// The last [`MEDIAN_WINDOW`] samples, for their median.
#[derive(Clone, Copy, Debug)]
struct Window {
    samples: [i128; MEDIAN_WINDOW],
    len: usize,
    next: usize,
}

impl Window {
    const EMPTY: Window = Window {
        samples: [0; MEDIAN_WINDOW],
        len: 0,
        next: 0,
    };

    fn push(&mut self, sample: i128) {
        self.samples[self.next] = sample;
        self.next = (self.next + 1) % MEDIAN_WINDOW;
        self.len = (self.len + 1).min(MEDIAN_WINDOW);
    }

    /// The lower median, `None` when empty.
    fn median(&self) -> Option<i128> {
        let mut sorted = self.samples;
        let sorted = &mut sorted[..self.len];
        sorted.sort_unstable();
        sorted.get(self.len.saturating_sub(1) / 2).copied()
    }
}

/// The jitter and wander statistics; see the module docs.
#[derive(Clone, Debug)]
pub(super) struct Noise {
    /// The last two pulses, taken or not, the newer first: for the median.
    recent: [Option<Pulse>; 2],
    /// The last two accepted pulses, the newer first: for the mean.
    accepted: [Option<Pulse>; 2],
    /// Magnitudes of the last second differences of consecutive phases.
    spread: Window,
    /// Mean squared second difference of consecutive accepted phases,
    /// within the gate of the median: `6σ²`.
    jitter: Mean,
    /// Raw phases every [`BLOCK`] seconds, by block number modulo [`BLOCKS`].
    blocks: [Option<Pulse>; BLOCKS],
    /// Mean squared second difference at each of the [`SPANS`].
    spans: [Mean; SPANS.len()],
    /// The wander's variance assumed while no span has measured it.
    prior: i128,
    /// The last sixteen accepted innovations, a bit each: set when beyond
    /// two standard deviations.
    wide: u16,
    /// The counter's quantization noise, `(1 count)² / 12` in ns²: the
    /// least jitter there is (an exact edge still has it).
    resolution: i128,
}

impl Noise {
    /// No pulse yet: the priors.
    pub(super) fn new() -> Noise {
        Noise {
            recent: [None; 2],
            accepted: [None; 2],
            spread: Window::EMPTY,
            jitter: Mean::default(),
            blocks: [None; BLOCKS],
            spans: [Mean::default(); SPANS.len()],
            prior: PRIOR_WANDER,
            wide: 0,
            resolution: 0,
        }
    }

    /// The counter's period, `count_ns` (fixed-point ns): the least jitter.
    pub(super) fn set_count(&mut self, count_ns: i128) {
        self.resolution = count_ns * count_ns / 12 / ONE;
    }

    /// Forgets the jitter and wander statistics, the filter starting again
    /// on a new line whose last two pulses are `newer` and `older` (the
    /// median of every pulse's second differences, and the pulses it was
    /// taken from, stay).
    pub(super) fn forget(&mut self, newer: Pulse, older: Option<Pulse>) {
        self.jitter = Mean::default();
        self.blocks = [None; BLOCKS];
        self.spans = [Mean::default(); SPANS.len()];
        self.wide = 0;
        self.accepted = [Some(newer), older];
    }

    /// The wander measured so far becomes the prior: the filter starts
    /// again, on the same oscillator.
    pub(super) fn assume_last_wander(&mut self) {
        self.prior = self.wander();
    }

    /// Every pulse, taken or not: the median of second differences of
    /// consecutive phases.
    pub(super) fn observe(&mut self, pulse: Pulse) {
        if let [Some(b), Some(c)] = self.recent {
            if pulse.second - b.second == 1 && b.second - c.second == 1 {
                self.spread
                    .push((pulse.phase - 2 * b.phase + c.phase).abs());
            }
        }
        self.recent = [Some(pulse), self.recent[0]];
    }

    /// A pulse the filter took (`wide`: its innovation beyond two standard
    /// deviations): the jitter and wander statistics, and the prior.
    pub(super) fn accept(&mut self, pulse: Pulse, wide: bool) {
        if let [Some(b), Some(c)] = self.accepted {
            let d = pulse.phase - 2 * b.phase + c.phase;
            let squared = square(d);
            // Within twice the gate of the median's jitter (a median of
            // few is rough): an outlier the filter let in (before the gate
            // was tight) stays out.
            let gate = 4 * GATE * GATE * 6 * self.robust_jitter();
            if pulse.second - b.second == 1 && b.second - c.second == 1 && squared <= gate {
                self.jitter.add(squared);
            }
        }
        self.accepted = [Some(pulse), self.accepted[0]];
        // While the wander is assumed, innovations that run wide say the
        // assumption is too small (the spans' bounds still cap it).
        if self.measured_wander().is_err() {
            self.wide = self.wide << 1 | wide as u16;
            if self.wide.count_ones() >= WIDE_INNOVATIONS {
                self.prior = (self.prior * PRIOR_GROWTH).min(MAX_PRIOR);
                self.wide = 0;
            }
        }
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
            mean.add(square(d));
        }
    }

    /// The jitter's variance from the median second difference, ns²: the
    /// prior while there is none, capped by it while it could be an
    /// outlier's.
    fn robust_jitter(&self) -> i128 {
        let Some(median) = self.spread.median() else {
            return PRIOR_JITTER;
        };
        // A normal d's median magnitude is 0.6745 of its deviation √6 σ:
        // σ² = median² / 2.73.
        let variance = (square(median) / 273 * 100).max(self.resolution);
        if self.spread.len < MEDIAN_TRUSTED {
            // A median of few is a rough one, either way: widened by the
            // shortfall squared, and capped.
            let short = (MEDIAN_TRUSTED / self.spread.len) as i128;
            (variance * short * short).min(PRIOR_JITTER)
        } else {
            variance
        }
    }

    /// The jitter's variance `r`, ns²: never below the counter's
    /// quantization, so that the filter never takes a pulse as exact.
    pub(super) fn jitter_variance(&self) -> i128 {
        let mean = (self.jitter.value / 6).max(self.resolution);
        if self.jitter.samples < JITTER_SAMPLES {
            // Both are rough: the larger, so that no good pulse is gated.
            return self.robust_jitter().max(mean);
        }
        mean
    }

    /// The wander's variance `q`, ppb² a second.
    pub(super) fn wander(&self) -> i128 {
        self.measured_wander().unwrap_or_else(|assumed| assumed)
    }

    /// The wander's variance from the shortest span at which it is at
    /// least three times the jitter's part (measured, not a draw of the
    /// jitter); while there is none, `Err` with the prior, or the tightest
    /// of the upper bounds the spans give (three standard errors above
    /// their excess over the jitter's part) if lower.
    fn measured_wander(&self) -> Result<i128, i128> {
        let noise = 6 * self.jitter_variance();
        // The jitter part's own variance, ns⁴ (overlapping differences:
        // half as many independent ones).
        // (Saturating: pulses a good part of a second apart square beyond
        // an `i128`, and then a bound of the most there is is right.)
        let noise_ns = noise / ONE;
        let noise_variance =
            noise_ns.saturating_mul(noise_ns).saturating_mul(4) / self.jitter.samples.max(1);
        let mut bound = self.prior;
        for (mean, span) in self.spans.iter().zip(SPANS) {
            if mean.samples < SPAN_SAMPLES {
                continue;
            }
            let t = (span as i64 * BLOCK) as i128;
            let scale = 2 * t * t * t + t;
            let excess = mean.value - noise;
            if mean.value >= 4 * noise {
                return Ok((3 * excess / scale).max(MIN_VARIANCE));
            }
            // A sample's variance is twice its mean squared, the mean at
            // least the jitter's part (a low mean is a low draw, not a
            // small error); a span of `s` blocks overlaps its neighbours:
            // one in `s` is independent.
            let mean_ns = mean.value.max(noise) / ONE;
            let variance = mean_ns
                .saturating_mul(mean_ns)
                .saturating_mul(2 * span as i128)
                / mean.samples;
            let error = variance.saturating_add(noise_variance).isqrt() * ONE;
            bound = bound.min(3 * (excess + 3 * error) / scale);
        }
        Err(bound.max(MIN_VARIANCE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The jitter is the prior until pulses come; a median of fewer than
    /// seven second differences is widened by the shortfall squared, in
    /// whole times (7 / 1, 7 / 2, 7 / 3, then 1), never beyond the prior,
    /// and then it is the median's alone: a normal difference's median
    /// magnitude is 0.6745 of its deviation, `√6 σ`.
    #[test]
    fn the_jitter_is_the_median_second_differences_widened_while_few() {
        const J: i128 = 100 * ONE;
        let mut noise = Noise::new();
        assert_eq!(noise.jitter_variance(), PRIOR_JITTER);
        // Phases 0, J, 0, J, ...: each second difference is ±2J.
        let pulse = |second: i64| Pulse {
            count: 0,
            second,
            phase: J * (second % 2) as i128,
        };
        let median_says = square(2 * J) / 273 * 100;
        let mut widened = Vec::new();
        for second in 0..9 {
            noise.observe(pulse(second));
            if second >= 2 {
                widened.push(noise.jitter_variance());
            }
        }
        let shortfall = [49, 9, 4].map(|times| (median_says * times).min(PRIOR_JITTER));
        assert_eq!(widened[..3], shortfall);
        assert_eq!(widened[3..], [median_says; 4]);
    }
}
