//! A sample's figures: ministat's (min, max, median, average, standard
//! deviation) and the quartiles of a box plot.

use serde::Serialize;

/// The figures of one sample.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The number of values.
    pub n: usize,
    /// The least value.
    pub min: f64,
    /// The first quartile.
    pub q1: f64,
    /// The middle value (the mean of the two middle ones for an even count).
    pub median: f64,
    /// The third quartile.
    pub q3: f64,
    /// The greatest value.
    pub max: f64,
    /// The arithmetic mean.
    pub avg: f64,
    /// The sample standard deviation (n - 1 in the denominator, as ministat);
    /// 0 for fewer than two values.
    pub stddev: f64,
}

impl Summary {
    /// The figures of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let avg = sorted.iter().sum::<f64>() / n as f64;
        let squares: f64 = sorted.iter().map(|v| (v - avg) * (v - avg)).sum();
        let stddev = if n > 1 {
            (squares / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Summary {
            n,
            min: sorted[0],
            q1: quantile(&sorted, 0.25),
            median: quantile(&sorted, 0.5),
            q3: quantile(&sorted, 0.75),
            max: sorted[n - 1],
            avg,
            stddev,
        })
    }
}

/// The `p` quantile of sorted values, interpolating linearly between the two
/// nearest ranks (R's and numpy's default), so the median of an even count is
/// the mean of the middle two.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let rank = p * (sorted.len() - 1) as f64;
    let below = rank.floor() as usize;
    let above = rank.ceil() as usize;
    sorted[below] + (sorted[above] - sorted[below]) * (rank - below as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_a_small_sample() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).expect("values");
        assert_eq!((s.n, s.min, s.max), (4, 1.0, 4.0));
        assert_eq!((s.q1, s.median, s.q3), (1.75, 2.5, 3.25));
        assert_eq!(s.avg, 2.5);
        assert!((s.stddev - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn one_value_and_none() {
        let s = Summary::of(&[7.0]).expect("a value");
        assert_eq!((s.min, s.median, s.max, s.stddev), (7.0, 7.0, 7.0, 0.0));
        assert!(Summary::of(&[]).is_none());
    }
}
