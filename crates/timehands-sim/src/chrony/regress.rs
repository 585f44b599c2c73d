//! `regress.c`: chrony's weighted least-squares line, the runs test that
//! finds where the residuals stop fitting it, Student's t and the
//! chi-square quantiles, and the median.

/// The fewest samples the runs test may leave, `minsamples` 6 (`conf.c`).
const MIN_SAMPLES: usize = 6;
/// The fewest samples for a line (`regress.h`).
const MIN_SAMPLES_FOR_REGRESS: usize = 3;

/// A weighted least-squares line (regress.c, `RGR_WeightedRegression`).
pub(super) struct Line {
    pub(super) intercept: f64,
    pub(super) slope: f64,
    /// The weighted average of the points' variances.
    pub(super) variance: f64,
    pub(super) intercept_sd: f64,
    pub(super) slope_sd: f64,
}

/// RGR_WeightedRegression: the line through `(x, y)`, each point weighted
/// by the inverse of `w` (three points at least).
pub(super) fn weighted_regression(x: &[f64], y: &[f64], w: &[f64]) -> Line {
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
pub(super) fn t_coefficient(dof: usize) -> f64 {
    T_COEFFICIENTS.get(dof - 1).copied().unwrap_or(3.5)
}

/// regress.c, `RGR_GetChi2Coef`: the chi-square distribution's 90 %
/// quantile by degrees of freedom, `1.2 dof` beyond 64.
pub(super) fn chi2_coefficient(dof: usize) -> f64 {
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
pub(super) fn median(values: &[f64]) -> f64 {
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
pub(super) fn best_regression(
    x: &[f64],
    y: &[f64],
    w: &[f64],
    extra: usize,
) -> Option<(Line, usize, usize)> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
