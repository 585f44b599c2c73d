//! One data set and its summary statistics, defined as ministat defines them.
//!
//! The points are kept sorted, so the minimum, maximum and median are reads.
//! The sum is taken in input order, as ministat takes it, so that the mean is
//! the same double. Two definitions follow ministat (20150715, Debian's
//! package) rather than the textbook, so that the numbers agree:
//!
//! - the median is the point at index N/2 of the sorted set: for an even N
//!   that is the upper of the two middle points, not their mean;
//! - the standard deviation is the sample one (divided by N - 1).
//!
//! One departs from it: the variance is computed from the deviations to the
//! mean (two passes) where ministat subtracts the squared sum from the sum of
//! squares, which cancels catastrophically when the spread is small against
//! the magnitude (a stddev of `-nan` for 1e9 + 0.1, 0.2, 0.3). Both agree to
//! the printed digits on ordinary data.

use std::cmp::Ordering;

use anyhow::{Result, bail};

/// Fewest points a data set may have, as in ministat: the standard deviation
/// needs two, and a comparison needs N - 1 >= 2 degrees of freedom from each.
pub const MIN_POINTS: usize = 3;

/// One data set: its name (the file, or `<stdin>`) and its points, sorted.
#[derive(Debug, Clone)]
pub struct Sample {
    name: String,
    points: Vec<f64>,
    mean: f64,
    variance: f64,
}

impl Sample {
    /// A data set from finite `points` in input order; an error when there
    /// are fewer than [`MIN_POINTS`] or their sum or variance overflows.
    pub fn new(name: impl Into<String>, mut points: Vec<f64>) -> Result<Sample> {
        let name = name.into();
        if points.len() < MIN_POINTS {
            bail!(
                "data set {name} must contain at least {MIN_POINTS} data points (it has {})",
                points.len()
            );
        }
        let n = points.len() as f64;
        let mean = points.iter().sum::<f64>() / n;
        let variance = points.iter().map(|p| (p - mean) * (p - mean)).sum::<f64>() / (n - 1.0);
        if !mean.is_finite() {
            bail!("data set {name}: the values are too large to sum in a double");
        }
        if !variance.is_finite() {
            bail!(
                "data set {name}: the values are too far apart for their variance to fit in a double"
            );
        }
        // Numeric order with -0 equal to 0, and equal points in input order:
        // the order ministat's qsort (glibc's merge sort, stable) leaves, which
        // shows when the median or the minimum is a zero of either sign.
        points.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
        Ok(Sample {
            name,
            points,
            mean,
            variance,
        })
    }

    /// The file the points came from, or `<stdin>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The points in ascending order.
    pub fn points(&self) -> &[f64] {
        &self.points
    }

    /// How many points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// The smallest point.
    pub fn min(&self) -> f64 {
        self.points[0]
    }

    /// The largest point.
    pub fn max(&self) -> f64 {
        self.points[self.points.len() - 1]
    }

    /// ministat's median: the point at index N/2 of the sorted set.
    pub fn median(&self) -> f64 {
        self.points[self.points.len() / 2]
    }

    /// The arithmetic mean.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The sample variance (divided by N - 1).
    pub fn variance(&self) -> f64 {
        self.variance
    }

    /// The sample standard deviation.
    pub fn stddev(&self) -> f64 {
        self.variance.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::Sample;
    use proptest::prelude::*;

    fn sample(points: &[f64]) -> Sample {
        Sample::new("test", points.to_vec()).expect("a valid sample")
    }

    #[test]
    fn order_statistics_of_an_odd_set() {
        let s = sample(&[5.0, 1.0, 4.0, 2.0, 3.0]);
        assert_eq!(s.points(), [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((s.min(), s.max(), s.median()), (1.0, 5.0, 3.0));
    }

    #[test]
    fn the_median_of_an_even_set_is_the_upper_middle_point() {
        // ministat 20150715 prints 3 for 1 2 3 4 (FreeBSD since 2019: 2.5).
        assert_eq!(sample(&[4.0, 3.0, 2.0, 1.0]).median(), 3.0);
    }

    #[test]
    fn signed_zeros_keep_their_input_order() {
        let s = sample(&[0.0, 150.0, -0.0]);
        assert!(s.min().is_sign_positive() && s.median().is_sign_negative());
    }

    #[test]
    fn mean_and_sample_stddev() {
        // The classic example: mean 5, population sd 2, sample sd sqrt(32/7).
        let s = sample(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean(), 5.0);
        assert_eq!(s.variance(), 32.0 / 7.0);
        assert_eq!(s.stddev(), (32.0f64 / 7.0).sqrt());
    }

    #[test]
    fn a_small_spread_on_a_large_magnitude_keeps_its_stddev() {
        // ministat prints -nan here: its sum of squares cancels.
        let s = sample(&[1e9 + 0.1, 1e9 + 0.2, 1e9 + 0.3]);
        assert!((s.stddev() - 0.1).abs() < 1e-6, "{}", s.stddev());
    }

    #[test]
    fn fewer_than_three_points_is_an_error_naming_the_set() {
        let err = Sample::new("two.txt", vec![1.0, 2.0]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "data set two.txt must contain at least 3 data points (it has 2)"
        );
    }

    #[test]
    fn an_overflowing_sum_is_an_error() {
        let err = Sample::new("huge", vec![f64::MAX; 3]).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
        let err = Sample::new("wide", vec![1e200, 1e200, 2e200]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "data set wide: the values are too far apart for their variance to fit in a double"
        );
    }

    proptest! {
        #[test]
        fn summary_is_ordered_and_shift_invariant(
            points in prop::collection::vec(-1e6f64..1e6, 3..200),
            shift in -1e3f64..1e3,
        ) {
            let s = sample(&points);
            prop_assert!(s.min() <= s.median() && s.median() <= s.max());
            // The mean is a rounded quotient: it may pass a bound by an ulp.
            let slack = 1e-9 * (s.min().abs() + s.max().abs());
            prop_assert!(s.min() - slack <= s.mean() && s.mean() <= s.max() + slack);
            prop_assert!(s.stddev() >= 0.0);
            let moved: Vec<f64> = points.iter().map(|p| p + shift).collect();
            let t = sample(&moved);
            prop_assert!((t.stddev() - s.stddev()).abs() <= 1e-6 * (1.0 + s.stddev()));
            prop_assert!((t.mean() - s.mean() - shift).abs() <= 1e-6 * (1.0 + s.mean().abs()));
        }
    }
}
