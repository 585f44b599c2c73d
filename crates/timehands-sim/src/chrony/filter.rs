//! `samplefilt.c`: chrony's median filter between source polls, the
//! refclock's samples combined into one for the source.

use super::regress::{chi2_coefficient, weighted_regression};

/// The filter's length, `filter` 64 (`conf.c`, `parse_refclock`).
const FILTER_LENGTH: usize = 64;
/// The share of the filter's samples nearest the median that are combined
/// (`refclock.c`, `RCL_AddRefclock`).
const COMBINE_RATIO: f64 = 0.6;
/// The clock's precision, s: Linux's `clock_getres` gives 1 ns, and chrony
/// takes the smaller of it and the read delay (`local.c`,
/// `measure_clock_precision`).
pub(super) const PRECISION: f64 = 1e-9;

/// One sample: a pulse's, or the filter's combination of pulses'.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Sample {
    /// When, on the cooked clock, s.
    pub(super) time: f64,
    /// The reference less the clock, s (NTP's sense: positive, the clock
    /// is slow).
    pub(super) offset: f64,
    /// Its peer dispersion, s.
    pub(super) dispersion: f64,
}

/// `samplefilt.c`: the median filter between source polls.
#[derive(Debug)]
pub(super) struct Filter {
    /// The samples since the last poll, oldest first.
    samples: Vec<Sample>,
    /// The long-term average of the filtered samples' variance, and its
    /// degrees of freedom so far.
    avg_var: f64,
    avg_var_n: u32,
}

impl Filter {
    pub(super) fn new() -> Filter {
        Filter {
            samples: Vec::new(),
            // SPF_CreateInstance: the first estimate is the precision.
            avg_var: PRECISION * PRECISION,
            avg_var_n: 0,
        }
    }

    /// SPF_AccumulateSample: a sample later than the last held
    /// (`check_sample`), the oldest dropped beyond the filter's length.
    pub(super) fn accumulate(&mut self, sample: Sample) {
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
    pub(super) fn filtered(&mut self) -> Option<Sample> {
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
    pub(super) fn slew(&mut self, when: f64, dfreq: f64, doffset: f64) {
        for sample in &mut self.samples {
            let delta = (when - sample.time) * dfreq - doffset;
            sample.time += delta;
            sample.offset -= delta;
        }
    }

    /// SPF_AddDispersion.
    pub(super) fn add_dispersion(&mut self, dispersion: f64) {
        for sample in &mut self.samples {
            sample.dispersion += dispersion;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
