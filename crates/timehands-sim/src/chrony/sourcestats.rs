//! `sourcestats.c`: chrony's statistics of a source, its samples and the
//! line through them (offset, frequency, skew).

use super::filter::{PRECISION, Sample};
use super::regress::{best_regression, median, t_coefficient};

/// A refclock's delay, s: the `delay` option's default (`conf.c`).
const DELAY: f64 = 1e-9;

/// The source's samples at most, `maxsamples` 0 meaning 64
/// (`sourcestats.c`, `MAX_SAMPLES`).
const MAX_SAMPLES: usize = 64;
/// Samples older than the line kept for the runs test: up to as many again
/// (`regress.h`, `REGRESS_RUNS_RATIO`).
const RUNS_RATIO: usize = 2;
/// The skew's bounds (`sourcestats.c`).
const MIN_SKEW: f64 = 1e-12;
const MAX_SKEW: f64 = 1.0;
/// The ratio of a sample's standard deviation to its distance
/// (`sourcestats.c`, `SD_TO_DIST_RATIO`).
const SD_TO_DIST_RATIO: f64 = 0.7;

/// One of the source's samples (sourcestats.c).
#[derive(Clone, Copy, Debug)]
struct StatSample {
    /// When, on the clock, s.
    time: f64,
    /// The clock less the reference, s (sourcestats' sense: positive, the
    /// clock is fast).
    offset: f64,
    /// Its peer dispersion, s.
    dispersion: f64,
}

/// What the last regression gave (sourcestats.c).
#[derive(Clone, Copy, Debug)]
pub(super) struct Estimate {
    /// The offset at `time` (positive, the clock is fast), s.
    pub(super) offset: f64,
    pub(super) time: f64,
    pub(super) offset_sd: f64,
    /// The clock's frequency against the source (positive, it gains).
    pub(super) frequency: f64,
    pub(super) skew: f64,
}

/// sourcestats.c: the source's samples and their line.
#[derive(Debug)]
pub(super) struct SourceStats {
    /// The samples, oldest first: the first `extra` only extend the runs
    /// test.
    samples: Vec<StatSample>,
    extra: usize,
    /// The last regression's result, if it had enough samples.
    pub(super) estimate: Option<Estimate>,
}

impl SourceStats {
    pub(super) fn new() -> SourceStats {
        SourceStats {
            samples: Vec::new(),
            extra: 0,
            estimate: None,
        }
    }

    /// The samples the line is through.
    fn n(&self) -> usize {
        self.samples.len() - self.extra
    }

    /// prune_register: the `oldest` samples of the line's kept for the runs
    /// test only, up to as many as the line has.
    fn prune(&mut self, oldest: usize) {
        self.extra += oldest;
        let n = self.n();
        let most = n * (RUNS_RATIO - 1);
        if self.extra > most {
            self.samples.drain(..self.extra - most);
            self.extra = most;
        }
    }

    /// SST_AccumulateSample: the filtered sample, its offset's sign turned
    /// ("it is here that the sense of offset is flipped").
    pub(super) fn accumulate(&mut self, sample: Sample) {
        if self.n() == MAX_SAMPLES {
            self.prune(1);
        }
        self.samples.push(StatSample {
            time: sample.time,
            offset: -sample.offset,
            dispersion: sample.dispersion,
        });
    }

    /// SST_DoNewRegression: the weights from the samples' distances, the
    /// line, and the samples before its start kept for the runs test only.
    pub(super) fn regress(&mut self) {
        let newest = self.samples.last().map_or(0.0, |s| s.time);
        let x: Vec<f64> = self.samples.iter().map(|s| s.time - newest).collect();
        let y: Vec<f64> = self.samples.iter().map(|s| s.offset).collect();
        let distances: Vec<f64> = self.samples[self.extra..]
            .iter()
            .map(|s| 0.5 * DELAY + s.dispersion)
            .collect();
        let weights = if distances.is_empty() {
            Vec::new()
        } else {
            // A sample's weight grows with its distance beyond the
            // smallest, in units of the median's excess over it / 0.7.
            let mut min = distances.iter().copied().fold(f64::INFINITY, f64::min);
            let sd = ((median(&distances) - min) / SD_TO_DIST_RATIO)
                .min(min)
                .max(PRECISION);
            min += PRECISION;
            distances
                .iter()
                .map(|&d| {
                    let weight = if d > min { 1.0 + (d - min) / sd } else { 1.0 };
                    weight * weight
                })
                .collect()
        };
        match best_regression(&x, &y, &weights, self.extra) {
            Some((line, start, dof)) => {
                self.estimate = Some(Estimate {
                    offset: line.intercept,
                    time: newest,
                    offset_sd: line.intercept_sd,
                    frequency: line.slope,
                    skew: (line.slope_sd * t_coefficient(dof)).clamp(MIN_SKEW, MAX_SKEW),
                });
                self.prune(start);
            }
            None => self.estimate = None,
        }
    }

    /// SST_SlewSamples: the samples and the estimate as if taken on the
    /// clock after a change of `dfreq` and `doffset` at `when`.
    pub(super) fn slew(&mut self, when: f64, dfreq: f64, doffset: f64) {
        for sample in &mut self.samples {
            let delta = (when - sample.time) * dfreq - doffset;
            sample.time += delta;
            sample.offset += delta;
        }
        if let Some(estimate) = &mut self.estimate {
            let delta = (when - estimate.time) * dfreq - doffset;
            estimate.time += delta;
            estimate.offset += delta;
            estimate.frequency = (estimate.frequency - dfreq) / (1.0 - dfreq);
        }
    }

    /// SST_AddDispersion: to the line's samples.
    pub(super) fn add_dispersion(&mut self, dispersion: f64) {
        let extra = self.extra;
        for sample in &mut self.samples[extra..] {
            sample.dispersion += dispersion;
        }
    }
}
