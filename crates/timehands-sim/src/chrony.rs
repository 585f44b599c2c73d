//! The second anchor: chrony's PPS reference clock, `refclock PPS /dev/pps0`
//! with chrony's defaults as the only source, modelled from chrony's own
//! source (the `mlichvar/chrony` tree at 8f2db839, June 2026) and driving a
//! real `Timekeeper` the way chronyd drives the Linux kernel's clock.
//!
//! # The configuration
//!
//! ```text
//! refclock PPS /dev/pps0
//! local
//! ```
//!
//! A PPS refclock gives no whole seconds, so without `lock` chrony takes a
//! pulse only while its clock is synchronised or its local reference is
//! active (`refclock.c`, `RCL_AddCookedPulse`); alone it would never start.
//! `local` is the alternative chrony's documentation gives for that
//! (`doc/chrony.conf.adoc`, `PPS`): with its defaults (no `waitunsynced`, no
//! `activate`) the local reference is active from the start
//! (`reference.c`, `REF_GetReferenceParams`) and pulses are taken at once.
//! Once the PPS source has updated the clock, chrony is synchronised to it.
//! No `makestep` (the offset is only ever slewed), no driftfile (the
//! frequency starts at 0), `minsamples` 6, `maxsamples` 64.
//!
//! # A pulse's path to the clock
//!
//! - **refclock.c**: the PPS driver is polled every second (`dpoll` 0); a
//!   new pulse's offset is minus its time past the second on the *cooked*
//!   clock (the raw time with the slew still to run taken as run), wrapped into
//!   [-0.5, 0.5) s, with the clock's precision (1 ns: Linux's
//!   `clock_getres`) as its dispersion; every sixteen driver polls (`poll` 4)
//!   the filter's sample goes to the source.
//! - **samplefilt.c**: of the up to 64 samples (`filter` 64) since the last
//!   poll, the 60 % nearest the median offset (at least one dropped at each
//!   end from three on) are averaged, time and offset; their dispersion is a
//!   line's intercept error (four or more) or their standard deviation,
//!   replaced by a long-term average unless significantly smaller.
//! - **sourcestats.c, regress.c**: a weighted least-squares line through
//!   the source's samples (up to 64), its weights from their dispersions;
//!   the oldest are dropped one at a time while the residuals' runs test
//!   fails (down to six samples), with as many older samples as the line
//!   has kept extending the test; the line's intercept at the newest
//!   sample is the offset, its slope the frequency, and the slope's
//!   standard error times Student's t at 99.95 % the skew.
//! - **reference.c**: the new frequency is the old plus the measured one
//!   with a gain of `3 skew_old² / (3 skew_old² + skew²)`, and the skew
//!   follows; the offset, projected to now, is handed to the clock with a
//!   correction rate of `corrtimeratio` (3) × ½ × its standard deviation ×
//!   the time since the last update.
//! - **local.c, sys_generic.c, sys_linux.c**: the frequency is the kernel's
//!   (`ADJ_TICK` and `ADJ_FREQUENCY`, rounded as the kernel takes it); the
//!   offset is slewed by a further frequency offset of the offset over a
//!   duration (the correction rate over the offset, at least 1 s), at most
//!   `maxslewrate` (83 333 ppm), until a timer ends it. Every change of
//!   frequency or offset moves the samples held in the filter and the
//!   source's statistics as chrony moves them.
//!
//! # On the timekeeper
//!
//! chronyd on Linux sets one kernel frequency, the estimate plus the slew's
//! offset, and times the slew itself; the timekeeper has a frequency
//! adjustment (±500 ppm, in ppt) and an `adjtime` slew at a set rate that
//! stops by itself when its amount has run. The kernel's frequency (its
//! 2^-16 ppm steps taken as Linux takes them) becomes the frequency
//! adjustment while the slew's part is under 1 ppm; from 1 ppm on (the
//! first updates of an acquisition, a step's), the frequency adjustment is
//! the estimate and the slew's part runs as `adjtime` at its rate in whole
//! ppb for the amount chrony's timer allows it, so that it stops on time
//! however the windups fall. What differs is the timekeeper's, and every
//! discipline here has it: a change takes effect at its next switch point,
//! up to two windups (250 ms) after chrony made it (Linux: within 10 µs).
//! So an `adjtime` slew begins, and ends, later than chrony counts; what
//! the timekeeper has not run of one beyond what chrony counts as left is
//! added to the next, so that no slew is lost. A new frequency is late by
//! as much: 25 µs at 100 ppm, which the first update of an acquisition
//! leaves on the clock for the next to find. chrony's timers (the end of a
//! slew) run at the first windup after they are due, counted as if on
//! time; under 1 ppm the slew then runs on for that long (0.4 ns at most a
//! ppb).
//!
//! # Left out
//!
//! What cannot matter with one PPS source and these scenarios: source
//! selection and combining (with one source it reduces to "the regression
//! has three samples"), the reachability register, the root distance and
//! its limits (3 s to select; 0.5 s for a pulse to be taken, which an
//! outage reaches only after days), the driver's and the source's time
//! sanity checks, the pulse edge check (no `width`), `maxdispersion`,
//! `maxchange`, the frequency's limit (100 000 ppm), the asymmetry
//! correction (fixed at 0 for refclocks), leap seconds, temperature
//! compensation, the drift file and the tracking logs. The monotonic clock of the update
//! interval is the disciplined clock itself (they differ by the frequency
//! correction: ppm of 16 s).

use timehands::{SimCounter, Timekeeper};

/// Driver polls a source poll: `poll` 4 (16 s) over `dpoll` 0 (1 s)
/// (`conf.c`, `parse_refclock`; `refclock.c`, `poll_timeout`).
const DRIVER_POLLS: u32 = 16;
/// The filter's length, `filter` 64 (`conf.c`, `parse_refclock`).
const FILTER_LENGTH: usize = 64;
/// The share of the filter's samples nearest the median that are combined
/// (`refclock.c`, `RCL_AddRefclock`).
const COMBINE_RATIO: f64 = 0.6;
/// The clock's precision, s: Linux's `clock_getres` gives 1 ns, and chrony
/// takes the smaller of it and the read delay (`local.c`,
/// `measure_clock_precision`).
const PRECISION: f64 = 1e-9;
/// A refclock's delay, s: the `delay` option's default (`conf.c`).
const DELAY: f64 = 1e-9;

/// The source's samples at most, `maxsamples` 0 meaning 64
/// (`sourcestats.c`, `MAX_SAMPLES`).
const MAX_SAMPLES: usize = 64;
/// The fewest samples the runs test may leave, `minsamples` 6 (`conf.c`).
const MIN_SAMPLES: usize = 6;
/// Samples older than the line kept for the runs test: up to as many again
/// (`regress.h`, `REGRESS_RUNS_RATIO`).
const RUNS_RATIO: usize = 2;
/// The fewest samples for a line (`regress.h`).
const MIN_SAMPLES_FOR_REGRESS: usize = 3;
/// The skew's bounds (`sourcestats.c`).
const MIN_SKEW: f64 = 1e-12;
const MAX_SKEW: f64 = 1.0;
/// The ratio of a sample's standard deviation to its distance
/// (`sourcestats.c`, `SD_TO_DIST_RATIO`).
const SD_TO_DIST_RATIO: f64 = 0.7;

/// A skew beyond which the frequency is not updated, `maxupdateskew` 1000
/// ppm (`conf.c`).
const MAX_UPDATE_SKEW: f64 = 1000e-6;
/// `corrtimeratio` (`conf.c`).
const CORRECTION_TIME_RATIO: f64 = 3.0;

/// `maxslewrate`, 83 333 ppm, as a fraction (`conf.c`).
const MAX_SLEW_RATE: f64 = 1.0 / 12.0;
/// `sys_generic.c`: the smallest offset slewed, the slew's length bounds,
/// and the tracking of timers that end late.
const MIN_OFFSET_CORRECTION: f64 = 1e-9;
const MIN_SLEW_DURATION: f64 = 1.0;
const MAX_SLEW_DURATION: f64 = 1e4;
const MAX_SLEW_EXCESS_DURATION: f64 = 100.0;
const MIN_SLEW_DURATION_EXCESS_RATIO: f64 = 5.0;
const SLEW_EXCESS_DURATION_DECAY: f64 = 0.9;
/// `USER_HZ`: `ADJ_TICK` moves the frequency in steps of 100 ppm
/// (`sys_linux.c`, `set_frequency`).
const USER_HZ: f64 = 100.0;
/// `ADJ_FREQUENCY`'s unit: 2^-16 ppm (`sys_timex.c`, `FREQ_SCALE`).
const FREQ_SCALE: f64 = 65536.0;
/// How late a frequency change may take effect: 10 µs on kernels from 4.19
/// (`sys_linux.c`, `tick_update_hz`), widened by the largest frequency,
/// 10 % (`sys_generic.c`, `SYS_Generic_CompleteFreqDriver`).
const MAX_FREQ_CHANGE_DELAY: f64 = 1e-5 * 1.1;
/// The slew's part of the frequency from which the timekeeper runs it as an
/// `adjtime` slew rather than in the frequency adjustment, ppm.
const ADJTIME_FROM_PPM: f64 = 1.0;

/// One sample: a pulse's, or the filter's combination of pulses'.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    /// When, on the cooked clock, s.
    time: f64,
    /// The reference less the clock, s (NTP's sense: positive, the clock
    /// is slow).
    offset: f64,
    /// Its peer dispersion, s.
    dispersion: f64,
}

/// `samplefilt.c`: the median filter between source polls.
#[derive(Debug)]
struct Filter {
    /// The samples since the last poll, oldest first.
    samples: Vec<Sample>,
    /// The long-term average of the filtered samples' variance, and its
    /// degrees of freedom so far.
    avg_var: f64,
    avg_var_n: u32,
}

impl Filter {
    fn new() -> Filter {
        Filter {
            samples: Vec::new(),
            // SPF_CreateInstance: the first estimate is the precision.
            avg_var: PRECISION * PRECISION,
            avg_var_n: 0,
        }
    }

    /// SPF_AccumulateSample: a sample later than the last held
    /// (`check_sample`), the oldest dropped beyond the filter's length.
    fn accumulate(&mut self, sample: Sample) {
        if self
            .samples
            .last()
            .is_some_and(|last| last.time >= sample.time)
        {
            return;
        }
        if self.samples.len() == FILTER_LENGTH {
            self.samples.remove(0);
        }
        self.samples.push(sample);
    }

    /// SPF_DropSamples.
    fn drop_samples(&mut self) {
        self.samples.clear();
    }

    /// SPF_GetFilteredSample: the samples nearest the median combined, the
    /// filter emptied.
    fn filtered(&mut self) -> Option<Sample> {
        let selected = self.select();
        if selected.is_empty() {
            return None;
        }
        let combined = self.combine(&selected);
        self.drop_samples();
        Some(combined)
    }

    /// select_samples: the indices (in time order) of the samples kept.
    fn select(&self) -> Vec<usize> {
        let used = self.samples.len();
        // With more than four samples, those within 1.5 times the smallest
        // dispersion, unless fewer than four are.
        let mut selected: Vec<usize> = Vec::new();
        if used > 4 {
            let min = self
                .samples
                .iter()
                .map(|s| s.dispersion)
                .fold(f64::INFINITY, f64::min);
            selected = (0..used)
                .filter(|&i| self.samples[i].dispersion <= 1.5 * min)
                .collect();
        }
        if selected.len() < 4 {
            selected = (0..used).collect();
        }
        // By offset; from three on, the ends dropped: (1 - ratio) / 2 of
        // them at each (truncated), at least one, at most (j - 1) / 2.
        selected.sort_by(|&a, &b| self.samples[a].offset.total_cmp(&self.samples[b].offset));
        let j = selected.len();
        let from = if j > 2 {
            ((j as f64 * (1.0 - COMBINE_RATIO) / 2.0) as usize).clamp(1, (j - 1) / 2)
        } else {
            0
        };
        let mut kept = selected[from..j - from].to_vec();
        kept.sort_unstable();
        kept
    }

    /// combine_selected_samples: the mean time and offset of `selected`,
    /// and their dispersion.
    fn combine(&mut self, selected: &[usize]) -> Sample {
        let n = selected.len();
        let last = self.samples[selected[n - 1]].time;
        let x: Vec<f64> = selected
            .iter()
            .map(|&i| self.samples[i].time - last)
            .collect();
        let y: Vec<f64> = selected.iter().map(|&i| self.samples[i].offset).collect();
        let w: Vec<f64> = selected
            .iter()
            .map(|&i| self.samples[i].dispersion)
            .collect();
        let mean_x = x.iter().sum::<f64>() / n as f64;
        let mean_y = y.iter().sum::<f64>() / n as f64;
        let (mut var, mut disp, dof) = if n >= 4 {
            // A line through them, its time axis at their mean: the
            // intercept's standard error is the dispersion.
            let centred: Vec<f64> = x.iter().map(|x| x - mean_x).collect();
            let line = weighted_regression(&centred, &y, &w);
            (line.variance, line.intercept_sd, n - 2)
        } else if n >= 2 {
            let var = y.iter().map(|y| (y - mean_y).powi(2)).sum::<f64>() / (n - 1) as f64;
            (var, var.sqrt(), n - 1)
        } else {
            (self.avg_var, self.avg_var.sqrt(), 1)
        };
        // Never a zero dispersion.
        if var < 1e-20 {
            var = 1e-20;
            disp = var.sqrt();
        }
        // The exponential moving average of the variance: a plain mean of
        // the first fifty degrees of freedom.
        let mut prev_avg_var = self.avg_var;
        let dof_f = dof as f64;
        if self.avg_var_n > 50 {
            self.avg_var += dof_f / (dof_f + 50.0) * (var - self.avg_var);
        } else {
            self.avg_var = (self.avg_var * self.avg_var_n as f64 + var * dof_f)
                / (dof_f + self.avg_var_n as f64);
            if self.avg_var_n == 0 {
                prev_avg_var = self.avg_var;
            }
            self.avg_var_n += dof as u32;
        }
        // The long-term average stands for the variance unless this one is
        // significantly smaller (less noise in the source's weights).
        if var * dof_f / chi2_coefficient(dof) < prev_avg_var {
            disp = self.avg_var.sqrt() * disp / var.sqrt();
        }
        let mean_dispersion = w.iter().sum::<f64>() / n as f64;
        Sample {
            time: last + mean_x,
            offset: mean_y,
            dispersion: disp.max(mean_dispersion),
        }
    }

    /// SPF_SlewSamples: the samples as if taken on the clock after a change
    /// of `dfreq` and `doffset` at `when`.
    fn slew(&mut self, when: f64, dfreq: f64, doffset: f64) {
        for sample in &mut self.samples {
            let delta = (when - sample.time) * dfreq - doffset;
            sample.time += delta;
            sample.offset -= delta;
        }
    }

    /// SPF_AddDispersion.
    fn add_dispersion(&mut self, dispersion: f64) {
        for sample in &mut self.samples {
            sample.dispersion += dispersion;
        }
    }
}

/// A weighted least-squares line (regress.c, `RGR_WeightedRegression`).
struct Line {
    intercept: f64,
    slope: f64,
    /// The weighted average of the points' variances.
    variance: f64,
    intercept_sd: f64,
    slope_sd: f64,
}

/// RGR_WeightedRegression: the line through `(x, y)`, each point weighted
/// by the inverse of `w` (three points at least).
fn weighted_regression(x: &[f64], y: &[f64], w: &[f64]) -> Line {
    let fit = Fit::new(x, y, w, 0);
    let n = x.len();
    let ss = (0..n)
        .map(|i| (y[i] - fit.intercept - fit.slope * x[i]).powi(2) / w[i])
        .sum::<f64>()
        / (n - 2) as f64;
    fit.line(ss, n)
}

/// The sums of a weighted fit from index `start` on.
struct Fit {
    intercept: f64,
    slope: f64,
    /// The weighted mean of x, the sum of the weights and of the weighted
    /// squared deviations of x.
    u: f64,
    w: f64,
    v: f64,
}

impl Fit {
    /// RGR_WeightedRegression's and RGR_FindBestRegression's sums.
    fn new(x: &[f64], y: &[f64], w: &[f64], start: usize) -> Fit {
        let points = start..x.len();
        let sum_w: f64 = points.clone().map(|i| 1.0 / w[i]).sum();
        let u = points.clone().map(|i| x[i] / w[i]).sum::<f64>() / sum_w;
        let (mut p, mut q, mut v) = (0.0, 0.0, 0.0);
        for i in points {
            let ui = x[i] - u;
            p += y[i] / w[i];
            q += y[i] * ui / w[i];
            v += ui * ui / w[i];
        }
        let slope = q / v;
        Fit {
            intercept: p / sum_w - slope * u,
            slope,
            u,
            w: sum_w,
            v,
        }
    }

    /// The line's errors from `ss`, the weighted residual variance over
    /// `points` points.
    fn line(&self, ss: f64, points: usize) -> Line {
        let slope_sd = (ss / self.v).sqrt();
        let aa = self.u * slope_sd;
        Line {
            intercept: self.intercept,
            slope: self.slope,
            variance: ss * points as f64 / self.w,
            intercept_sd: (ss / self.w + aa * aa).sqrt(),
            slope_sd,
        }
    }
}

/// regress.c, `critical_runs`: the fewest runs of residuals of one sign
/// that pass the test at 5 %, by number of residuals.
const CRITICAL_RUNS: [u8; 130] = [
    0, 0, 0, 0, 0, 0, 0, 0, 2, 3, 3, 3, 4, 4, 5, 5, 5, 6, 6, 7, 7, 7, 8, 8, 9, 9, 9, 10, 10, 11,
    11, 11, 12, 12, 13, 13, 14, 14, 14, 15, 15, 16, 16, 17, 17, 18, 18, 18, 19, 19, 20, 20, 21, 21,
    21, 22, 22, 23, 23, 24, 24, 25, 25, 26, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 30, 31, 31, 32,
    32, 33, 33, 34, 34, 35, 35, 35, 36, 36, 37, 37, 38, 38, 39, 39, 40, 40, 40, 41, 41, 42, 42, 43,
    43, 44, 44, 45, 45, 46, 46, 46, 47, 47, 48, 48, 49, 49, 50, 50, 51, 51, 52, 52, 52, 53, 53, 54,
    54, 55, 55, 56,
];

/// regress.c, `RGR_GetTCoef`: Student's t at 99.95 % by degrees of freedom.
const T_COEFFICIENTS: [f64; 40] = [
    636.6, 31.6, 12.92, 8.61, 6.869, 5.959, 5.408, 5.041, 4.781, 4.587, 4.437, 4.318, 4.221, 4.140,
    4.073, 4.015, 3.965, 3.922, 3.883, 3.850, 3.819, 3.792, 3.768, 3.745, 3.725, 3.707, 3.690,
    3.674, 3.659, 3.646, 3.633, 3.622, 3.611, 3.601, 3.591, 3.582, 3.574, 3.566, 3.558, 3.551,
];

/// RGR_GetTCoef: 3.5 beyond 40 degrees of freedom.
fn t_coefficient(dof: usize) -> f64 {
    T_COEFFICIENTS.get(dof - 1).copied().unwrap_or(3.5)
}

/// regress.c, `RGR_GetChi2Coef`: the chi-square distribution's 90 %
/// quantile by degrees of freedom, `1.2 dof` beyond 64.
fn chi2_coefficient(dof: usize) -> f64 {
    const COEFFICIENTS: [f64; 64] = [
        2.706, 4.605, 6.251, 7.779, 9.236, 10.645, 12.017, 13.362, 14.684, 15.987, 17.275, 18.549,
        19.812, 21.064, 22.307, 23.542, 24.769, 25.989, 27.204, 28.412, 29.615, 30.813, 32.007,
        33.196, 34.382, 35.563, 36.741, 37.916, 39.087, 40.256, 41.422, 42.585, 43.745, 44.903,
        46.059, 47.212, 48.363, 49.513, 50.660, 51.805, 52.949, 54.090, 55.230, 56.369, 57.505,
        58.641, 59.774, 60.907, 62.038, 63.167, 64.295, 65.422, 66.548, 67.673, 68.796, 69.919,
        71.040, 72.160, 73.279, 74.397, 75.514, 76.630, 77.745, 78.860,
    ];
    COEFFICIENTS
        .get(dof - 1)
        .copied()
        .unwrap_or(1.2 * dof as f64)
}

/// regress.c, `n_runs_from_residuals`: runs of residuals of one sign (a
/// zero ends a run).
fn runs(residuals: &[f64]) -> usize {
    1 + residuals
        .windows(2)
        .filter(|pair| !((pair[0] < 0.0 && pair[1] < 0.0) || (pair[0] > 0.0 && pair[1] > 0.0)))
        .count()
}

/// regress.c, `RGR_FindMedian`: the median, the mean of the middle two of
/// an even count.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let k = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[k]
    } else {
        0.5 * (sorted[k] + sorted[k - 1])
    }
}

/// RGR_FindBestRegression: the line through the points from `start` on,
/// `start` the first from which the residuals pass the runs test (up to
/// `extra` older points, before `x[0]`, extending it), never leaving
/// fewer than [`MIN_SAMPLES`]; with the start and the degrees of freedom.
/// `x`, `y` hold the `extra` older points first; `w` only the others.
fn best_regression(x: &[f64], y: &[f64], w: &[f64], extra: usize) -> Option<(Line, usize, usize)> {
    let n = w.len();
    if n < MIN_SAMPLES_FOR_REGRESS {
        return None;
    }
    let (x_line, y_line) = (&x[extra..], &y[extra..]);
    let mut start = 0;
    loop {
        let fit = Fit::new(x_line, y_line, w, start);
        // Residuals from up to as many points again before the start.
        let resid_start = (extra + start).saturating_sub(n - start);
        let residuals: Vec<f64> = (resid_start..extra + n)
            .map(|i| y[i] - fit.intercept - fit.slope * x[i])
            .collect();
        let passes = runs(&residuals) > CRITICAL_RUNS[residuals.len()] as usize;
        if passes || n - start <= MIN_SAMPLES_FOR_REGRESS || n - start <= MIN_SAMPLES {
            let points = n - start;
            let ss = (start..n)
                .map(|i| residuals[extra + i - resid_start].powi(2) / w[i])
                .sum::<f64>()
                / (points - 2) as f64;
            return Some((fit.line(ss, points), start, points - 2));
        }
        start += 1;
    }
}

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
struct Estimate {
    /// The offset at `time` (positive, the clock is fast), s.
    offset: f64,
    time: f64,
    offset_sd: f64,
    /// The clock's frequency against the source (positive, it gains).
    frequency: f64,
    skew: f64,
}

/// sourcestats.c: the source's samples and their line.
#[derive(Debug)]
struct SourceStats {
    /// The samples, oldest first: the first `extra` only extend the runs
    /// test.
    samples: Vec<StatSample>,
    extra: usize,
    /// The last regression's result, if it had enough samples.
    estimate: Option<Estimate>,
}

impl SourceStats {
    fn new() -> SourceStats {
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
    fn accumulate(&mut self, sample: Sample) {
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
    fn regress(&mut self) {
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
    fn slew(&mut self, when: f64, dfreq: f64, doffset: f64) {
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
    fn add_dispersion(&mut self, dispersion: f64) {
        let extra = self.extra;
        for sample in &mut self.samples[extra..] {
            sample.dispersion += dispersion;
        }
    }
}

/// sys_generic.c's slew over sys_linux.c's kernel frequency, and local.c's
/// absolute frequency.
#[derive(Debug)]
struct Slew {
    /// The frequency estimate, ppm (positive: the clock is slowed, its
    /// oscillator fast): local.c's `current_freq_ppm`, sys_generic.c's
    /// `base_freq`.
    base_freq: f64,
    /// The offset still to slew out (positive: the clock is fast), s.
    offset_register: f64,
    /// The slew's frequency offset, relative to the kernel's frequency.
    slew_freq: f64,
    /// When the current slew began and how long it was to last, s.
    slew_start: f64,
    slew_duration: f64,
    /// How late slews have ended, as a decaying maximum, s.
    excess_duration: f64,
    /// The suggested correction rate, s².
    correction_rate: f64,
    /// The dispersion the last change of slew frequency introduced, s.
    slew_error: f64,
    /// The slew the timekeeper runs as `adjtime`, if any.
    adjtime: Option<Plan>,
}

/// A slew given to the timekeeper's `adjtime`, as chrony counts it.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// When chrony began it, raw s.
    start: f64,
    /// Its frequency offset (chrony's `slew_freq`; 0 for what only the
    /// timekeeper has left of earlier ones) and its length, s.
    rate: f64,
    duration: f64,
}

impl Plan {
    /// What chrony counts as still to run of it at raw time `now`, s
    /// (positive: to slow the clock by).
    fn left(&self, now: f64) -> f64 {
        self.rate * (self.duration - (now - self.start).clamp(0.0, self.duration))
    }
}

/// sys_linux.c, `set_frequency`: the frequency `ppm` as the kernel takes
/// it, whole ticks of `USER_HZ` ppm and the rest in 2^-16 ppm truncated.
fn kernel_frequency(ppm: f64) -> f64 {
    let ticks = (ppm / USER_HZ).round();
    let rest = ppm - USER_HZ * ticks;
    USER_HZ * ticks + (rest * FREQ_SCALE).trunc() / FREQ_SCALE
}

impl Slew {
    fn new() -> Slew {
        Slew {
            base_freq: 0.0,
            offset_register: 0.0,
            slew_freq: 0.0,
            slew_start: 0.0,
            slew_duration: MAX_SLEW_DURATION,
            excess_duration: 0.0,
            correction_rate: 0.0,
            slew_error: 0.0,
            adjtime: None,
        }
    }

    /// offset_convert: the correction from the raw time `raw` to cooked
    /// time, and its error.
    fn correction(&self, raw: f64) -> (f64, f64) {
        let duration = raw - self.slew_start;
        let correction = self.slew_freq * duration - self.offset_register;
        let error = if duration.abs() <= MAX_FREQ_CHANGE_DELAY {
            self.slew_error
        } else {
            0.0
        };
        (correction, error)
    }

    /// When the running slew's timer ends it.
    fn end(&self) -> f64 {
        self.slew_start + self.slew_duration
    }

    /// update_slew, at raw time `now`: what ran taken off the register, a
    /// new slew planned and set on `tk`; the dispersion a change of the
    /// slew's frequency adds, if it counts.
    fn update(&mut self, tk: &Timekeeper<SimCounter>, now: f64) -> Option<f64> {
        let elapsed = now - self.slew_start;
        self.offset_register -= self.slew_freq * elapsed;
        self.excess_duration = (self.excess_duration + 1e-9) * SLEW_EXCESS_DURATION_DECAY;
        let excess = elapsed - self.slew_duration;
        if self.excess_duration < excess && excess <= MAX_SLEW_EXCESS_DURATION {
            self.excess_duration = excess;
        }
        // The correction rate over the offset, at least 1 s (and five
        // times the late ends).
        let register = self.offset_register;
        let duration = if register.abs() < MIN_OFFSET_CORRECTION {
            MAX_SLEW_DURATION
        } else {
            (self.correction_rate / register.abs())
                .max(MIN_SLEW_DURATION)
                .max(MIN_SLEW_DURATION_EXCESS_RATIO * self.excess_duration)
        };
        let correction_freq = (register / duration).clamp(-MAX_SLEW_RATE, MAX_SLEW_RATE);
        let total = kernel_frequency(self.base_freq + correction_freq * (1e6 - self.base_freq));
        let old_slew_freq = self.slew_freq;
        self.slew_freq = (total - self.base_freq) / (1e6 - total);
        self.slew_error = ((old_slew_freq - self.slew_freq) * MAX_FREQ_CHANGE_DELAY).abs();
        // The slew lasts until the register is out at its frequency (1 s to
        // 10^4 s), or, none or the wrong way, till a retry.
        self.slew_duration =
            if register.abs() < MIN_OFFSET_CORRECTION || register * self.slew_freq <= 0.0 {
                MAX_SLEW_DURATION
            } else {
                (register / self.slew_freq).clamp(MIN_SLEW_DURATION, MAX_SLEW_DURATION)
            };
        self.slew_start = now;
        self.set_kernel(tk, total, now);
        (self.slew_error >= MIN_OFFSET_CORRECTION).then_some(self.slew_error)
    }

    /// The kernel's frequency `total` (ppm, slowing) on the timekeeper at
    /// raw time `now`: in its frequency adjustment while the slew's part is
    /// under [`ADJTIME_FROM_PPM`], otherwise the estimate there and the
    /// slew as `adjtime` at its rate for what it is to run before its
    /// timer. The timekeeper begins a slew at its next switch point, later
    /// than chrony counts: what it has not run of earlier ones beyond what
    /// chrony counts as left is run besides.
    fn set_kernel(&mut self, tk: &Timekeeper<SimCounter>, total: f64, now: f64) {
        let base = kernel_frequency(self.base_freq);
        let slew_ppm = total - base;
        let fast = slew_ppm.abs() >= ADJTIME_FROM_PPM;
        if fast {
            tk.set_slew_rate((slew_ppm.abs() * 1e3).round() as i64)
                .expect("maxslewrate is under 10^9 ppb");
        }
        if fast || self.adjtime.is_some() {
            // Seconds to slow the clock by as the timekeeper's nanoseconds.
            let ns = |s: f64| (-s * 1e9).round() as i64;
            let request = if fast {
                self.slew_freq * self.slew_duration
            } else {
                0.0
            };
            let expected = self.adjtime.map_or(0.0, |plan| plan.left(now));
            let left = -(tk.adjtime(ns(request)) as f64) * 1e-9;
            let lag = left - expected;
            if ns(lag) != 0 {
                tk.adjtime(ns(request + lag));
            }
            self.adjtime = (fast || ns(lag) != 0).then_some(Plan {
                start: now,
                rate: if fast { self.slew_freq } else { 0.0 },
                duration: if fast { self.slew_duration } else { 0.0 },
            });
        }
        let frequency = if fast { base } else { total };
        tk.set_frequency_adjustment_ppt((-frequency * 1e6).round() as i64)
            .expect("the frequency is within ±500 ppm");
    }
}

/// chrony's PPS refclock disciplining a clock: the model's state.
#[derive(Debug)]
pub struct Chrony {
    /// Driver polls since the last source poll.
    driver_polls: u32,
    filter: Filter,
    stats: SourceStats,
    /// reference.c: the skew of the frequency in use, and when the last
    /// update was (none yet: the first has no interval).
    our_skew: f64,
    last_update: Option<f64>,
    slew: Slew,
}

impl Default for Chrony {
    fn default() -> Chrony {
        Chrony::new()
    }
}

/// The timekeeper's realtime as seconds.
fn seconds(tk: &Timekeeper<SimCounter>) -> f64 {
    let now = tk.realtime();
    now.sec() as f64 + now.frac() as f64 / 2f64.powi(64)
}

impl Chrony {
    /// chronyd just started: no samples, frequency 0, skew 1 (reference.c,
    /// `REF_Initialise`).
    pub fn new() -> Chrony {
        Chrony {
            driver_polls: 0,
            filter: Filter::new(),
            stats: SourceStats::new(),
            our_skew: 1.0,
            last_update: None,
            slew: Slew::new(),
        }
    }

    /// The frequency estimate as the oscillator's offset, ppb (positive
    /// fast): the clock slowed by `f` runs true on an oscillator `f / (1 -
    /// f)` fast.
    pub fn frequency_ppb(&self) -> f64 {
        let f = self.slew.base_freq * 1e-6;
        f / (1.0 - f) * 1e9
    }

    /// chrony's timers due by now: the end of a slew, run as if on time.
    pub fn timers(&mut self, tk: &Timekeeper<SimCounter>) {
        let end = self.slew.end();
        if seconds(tk) >= end {
            let dispersion = self.slew.update(tk, end);
            self.add_dispersion(dispersion);
        }
    }

    /// The driver's poll, once a second (refclock.c, `poll_timeout`): the
    /// pulse the kernel captured at `capture` since the last poll, if any
    /// (the PPS driver's `pps_poll`: a new sequence number), and every
    /// sixteenth poll the filtered sample to the source and the clock.
    pub fn poll(&mut self, tk: &Timekeeper<SimCounter>, capture: Option<u64>) {
        self.timers(tk);
        if let Some(stamp) = capture.and_then(|count| tk.time_of(count).ok()) {
            let raw = stamp.realtime.sec() as f64 + stamp.realtime.frac() as f64 / 2f64.powi(64);
            self.add_pulse(raw);
        }
        self.driver_polls += 1;
        if self.driver_polls < DRIVER_POLLS {
            return;
        }
        self.driver_polls = 0;
        if let Some(sample) = self.filter.filtered() {
            // sources.c, SRC_AccumulateSample and SRC_SelectSource: with one
            // source, the reference is updated whenever its line has enough
            // samples.
            self.stats.accumulate(sample);
            self.stats.regress();
            if let Some(estimate) = self.stats.estimate {
                self.set_reference(tk, estimate);
            }
        }
    }

    /// RCL_AddPulse and RCL_AddCookedPulse: a pulse at raw time `raw`.
    fn add_pulse(&mut self, raw: f64) {
        // The cooked time: the raw time with the slew still to run.
        let (correction, error) = self.slew.correction(raw);
        let second = raw - raw.floor() + correction;
        // Minus the time past the second, into [-0.5, 0.5) (`rate` 1).
        let mut offset = -second;
        offset -= offset.trunc();
        if offset < -0.5 {
            offset += 1.0;
        } else if offset >= 0.5 {
            offset -= 1.0;
        }
        // Without `lock`, a pulse is taken while the clock is synchronised
        // or the local reference is active (REF_GetReferenceParams): here,
        // always (see the module's doc).
        self.filter.accumulate(Sample {
            time: raw + correction,
            offset,
            dispersion: error + PRECISION,
        });
    }

    /// REF_SetReference: the source's estimate to the clock.
    fn set_reference(&mut self, tk: &Timekeeper<SimCounter>, estimate: Estimate) {
        let now_raw = seconds(tk);
        let now = now_raw + self.slew.correction(now_raw).0;
        let offset = estimate.offset + (now - estimate.time) * estimate.frequency;
        let update_interval = self.last_update.map_or(0.0, |last| now_raw - last);
        // get_clock_estimates: the measured frequency weighted against the
        // one in use (taken as exact) by their skews.
        let gain = if estimate.skew.abs() > MAX_UPDATE_SKEW {
            0.0
        } else {
            let expected = 3.0 * self.our_skew * self.our_skew;
            (expected / (expected + estimate.skew * estimate.skew)).clamp(0.0, 1.0)
        };
        let frequency = gain * estimate.frequency;
        let extra_skew = (frequency * frequency * (1.0 - gain)
            + (estimate.frequency - frequency).powi(2) * gain)
            .sqrt();
        self.our_skew += gain * (estimate.skew - self.our_skew) + extra_skew;
        self.last_update = Some(now_raw);
        // get_correction_rate.
        let correction_rate = CORRECTION_TIME_RATIO * 0.5 * estimate.offset_sd * update_interval;
        self.accumulate(tk, now_raw, frequency, offset, correction_rate);
    }

    /// LCL_AccumulateFrequencyAndOffset: the frequency changed by `dfreq`,
    /// `doffset` to slew out at `correction_rate`, and the samples held moved
    /// to match.
    fn accumulate(
        &mut self,
        tk: &Timekeeper<SimCounter>,
        now: f64,
        dfreq: f64,
        doffset: f64,
        correction_rate: f64,
    ) {
        // The cooked time before the change.
        let cooked = now + self.slew.correction(now).0;
        let old = self.slew.base_freq;
        self.slew.base_freq += dfreq * (1e6 - old);
        // sys_generic.c, set_frequency then accrue_offset: each plans the
        // slew again.
        let first = self.slew.update(tk, now);
        self.add_dispersion(first);
        let dfreq = (self.slew.base_freq - old) / (1e6 - old);
        self.slew.offset_register += doffset;
        self.slew.correction_rate = correction_rate;
        let second = self.slew.update(tk, now);
        self.add_dispersion(second);
        // The parameter change handlers: the source's statistics
        // (sources.c, slew_sources) and the filter (refclock.c,
        // slew_samples).
        self.stats.slew(cooked, dfreq, doffset);
        self.filter.slew(cooked, dfreq, doffset);
    }

    /// The dispersion notify handlers (refclock.c and sources.c,
    /// add_dispersion).
    fn add_dispersion(&mut self, dispersion: Option<f64>) {
        if let Some(dispersion) = dispersion {
            self.filter.add_dispersion(dispersion);
            self.stats.add_dispersion(dispersion);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Config, run};

    /// A sample at `time` s with `offset` µs and 1 ns of dispersion.
    fn sample(time: f64, offset_us: f64) -> Sample {
        Sample {
            time,
            offset: offset_us * 1e-6,
            dispersion: PRECISION,
        }
    }

    #[test]
    fn the_filter_averages_the_samples_nearest_the_median() {
        // Five samples: one of each end is dropped (5 × 0.4 / 2 = 1), the
        // three left (0, 2 and 3 µs at 3, 4 and 0 s) are averaged.
        let mut filter = Filter::new();
        for (time, offset) in [
            (0.0, 3.0),
            (1.0, -1.0),
            (2.0, 100.0),
            (3.0, 0.0),
            (4.0, 2.0),
        ] {
            filter.accumulate(sample(time, offset));
        }
        let combined = filter.filtered().expect("five samples");
        assert!(
            (combined.offset - 5.0 / 3.0 * 1e-6).abs() < 1e-15,
            "{combined:?}"
        );
        assert!((combined.time - 7.0 / 3.0).abs() < 1e-12, "{combined:?}");
        // Their standard deviation, more than the long-term average.
        let sd = ((3.0f64 - 5.0 / 3.0).powi(2)
            + (0.0f64 - 5.0 / 3.0).powi(2)
            + (2.0f64 - 5.0 / 3.0).powi(2))
        .sqrt()
            / 2f64.sqrt()
            * 1e-6;
        assert!((combined.dispersion - sd).abs() < 1e-15, "{combined:?}");
        assert!(filter.filtered().is_none(), "the filter is emptied");
        // Sixteen: three of each end dropped (16 × 0.4 / 2 = 3.2).
        let offsets = [
            5.0, -9.0, 1.0, 2.0, 40.0, -3.0, 0.0, 4.0, 3.0, -30.0, 1.0, 2.0, -1.0, 7.0, 0.5, -2.0,
        ];
        for (second, offset) in offsets.iter().enumerate() {
            filter.accumulate(sample(10.0 + second as f64, *offset));
        }
        let mut sorted = offsets;
        sorted.sort_by(f64::total_cmp);
        let mean = sorted[3..13].iter().sum::<f64>() / 10.0;
        let combined = filter.filtered().expect("sixteen samples");
        assert!(
            (combined.offset - mean * 1e-6).abs() < 1e-15,
            "{combined:?} {mean}"
        );
    }

    #[test]
    fn the_runs_test_drops_samples_off_the_line() {
        // Twenty samples on one line but the first ten 10 µs off it.
        let x: Vec<f64> = (0..20).map(|i| (i - 19) as f64 * 16.0).collect();
        let noise = |i: usize| if i % 2 == 0 { 1e-9 } else { -1e-9 };
        let y: Vec<f64> = (0..20)
            .map(|i| 1e-6 * x[i] * 0.05 + noise(i) + if i < 10 { 10e-6 } else { 0.0 })
            .collect();
        let w = vec![1.0; 20];
        let (line, start, _) = best_regression(&x, &y, &w, 0).expect("twenty points");
        assert!(start >= 10, "start {start}");
        assert!((line.slope - 0.05e-6).abs() < 1e-11, "{}", line.slope);
    }

    #[test]
    fn clean_pulses_converge_to_the_phase_and_the_frequency() {
        let config = Config {
            frequency_ppm: 50.0,
            phase_us: 200.0,
            ..Config::new(1, 1800)
        };
        let trace = run(&config);
        let late = &trace.chrony_ns[1200..];
        let worst = late.iter().fold(0.0f64, |m, e| m.max(e.abs()));
        assert!(worst < 5.0, "phase within {worst} ns");
        let frequency = trace.chrony_frequency_ppb[1799];
        assert!(frequency.abs() < 0.1, "frequency {frequency} ppb off");
    }

    #[test]
    fn a_frequency_error_is_found_through_jitter() {
        let config = Config {
            frequency_ppm: -100.0,
            jitter_ns: 100.0,
            ..Config::new(3, 3600)
        };
        let trace = run(&config);
        let late = &trace.chrony_frequency_ppb[1800..];
        let rms = (late.iter().map(|f| f * f).sum::<f64>() / late.len() as f64).sqrt();
        assert!(rms < 2.0, "frequency {rms} ppb RMS off");
    }

    #[test]
    fn the_kernel_takes_the_frequency_in_ticks_and_2_to_the_minus_16_ppm() {
        assert_eq!(kernel_frequency(100.0), 100.0);
        assert_eq!(kernel_frequency(10.0), 10.0);
        let rest = kernel_frequency(10.00001) - 10.0;
        assert_eq!(rest, 0.0, "under 2^-16 ppm, truncated");
        assert_eq!(kernel_frequency(-149.0), -100.0 - 49.0);
    }
}
