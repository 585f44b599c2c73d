//! What ministat does not offer, behind flags it does not have: percentiles
//! (`--percentiles`), Welch's t test for unequal variances (`--welch`) and the
//! Mann-Whitney U test (`--mann-whitney`).
//!
//! - A percentile is Hyndman and Fan's definition 7 (R's and NumPy's
//!   default): for the fraction p of n sorted points, h = (n - 1) p, and the
//!   value is x[floor h] plus (h - floor h) of the way to the next point.
//! - Welch's t is the difference of the means over
//!   `sqrt(v1/n1 + v2/n2)`, with the Welch-Satterthwaite degrees of freedom
//!   `(v1/n1 + v2/n2)^2 / ((v1/n1)^2/(n1-1) + (v2/n2)^2/(n2-1))`, and the
//!   two-sided p from Student's t distribution with those (fractional)
//!   degrees.
//! - Mann-Whitney's U of a set is the sum of its ranks in both sets pooled
//!   (ties get the mean of their ranks) less `n1 (n1 + 1) / 2`; the two-sided
//!   p is the normal approximation with the tie correction of the variance
//!   and a continuity correction of 1/2 (as SciPy's `mannwhitneyu` with
//!   `method="asymptotic"`).
//!
//! Each test proves a difference when p is below 1 - the confidence level as
//! labelled (99.5% is 99.5% here, not ministat's 99.8%).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::c_format;
use super::sample::Sample;

/// A test of one set against another that ends in a p value.
pub trait PairTest {
    /// The two-sided p value.
    fn p(&self) -> f64;

    /// The test's name and figures, as the text prints them (C's `%g`).
    fn figures(&self) -> String;
}

impl PairTest for Welch {
    fn p(&self) -> f64 {
        self.p
    }

    fn figures(&self) -> String {
        let g = |v: f64| c_format::g(v, 6);
        format!("Welch's t {}, df {}", g(self.t), g(self.df))
    }
}

impl PairTest for MannWhitney {
    fn p(&self) -> f64 {
        self.p
    }

    fn figures(&self) -> String {
        let g = |v: f64| c_format::g(v, 6);
        format!("Mann-Whitney U {}, z {}", g(self.u), g(self.z))
    }
}

/// The value below which a fraction `p` (0 to 1) of the sorted `points`
/// fall, by definition 7. `points` must not be empty.
pub fn percentile(points: &[f64], p: f64) -> f64 {
    let h = (points.len() - 1) as f64 * p;
    let below = h.floor() as usize;
    let above = (below + 1).min(points.len() - 1);
    points[below] + (h - h.floor()) * (points[above] - points[below])
}

/// Welch's t test of a set against the reference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Welch {
    /// The set's mean minus the reference's, over its standard error.
    pub t: f64,
    /// The Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    /// The two-sided p value.
    pub p: f64,
}

impl Welch {
    /// `set` against `reference`.
    pub fn new(set: &Sample, reference: &Sample) -> Welch {
        let (n1, n2) = (set.len() as f64, reference.len() as f64);
        let (a, b) = (set.variance() / n1, reference.variance() / n2);
        let difference = set.mean() - reference.mean();
        let error = (a + b).sqrt();
        if error == 0.0 {
            // Two constant sets: the same value, or a difference with no
            // noise at all.
            let (t, p) = if difference == 0.0 {
                (0.0, 1.0)
            } else {
                (f64::INFINITY.copysign(difference), 0.0)
            };
            return Welch {
                t,
                df: n1 + n2 - 2.0,
                p,
            };
        }
        let t = difference / error;
        let df = (a + b).powi(2) / (a * a / (n1 - 1.0) + b * b / (n2 - 1.0));
        let p = StudentsT::new(0.0, 1.0, df)
            .map_or(f64::NAN, |dist| 2.0 * dist.sf(t.abs()))
            .min(1.0);
        Welch { t, df, p }
    }
}

/// The Mann-Whitney U test of a set against the reference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MannWhitney {
    /// The set's U: how many (set, reference) pairs the set's point wins,
    /// ties counting a half.
    pub u: f64,
    /// The normal approximation's z of the larger U, with the corrections.
    pub z: f64,
    /// The two-sided p value.
    pub p: f64,
}

impl MannWhitney {
    /// `set` against `reference`.
    pub fn new(set: &Sample, reference: &Sample) -> MannWhitney {
        let (n1, n2) = (set.len() as f64, reference.len() as f64);
        // Both sets pooled and sorted, each point marked with its set.
        let mut pooled: Vec<(f64, bool)> = set
            .points()
            .iter()
            .map(|&x| (x, true))
            .chain(reference.points().iter().map(|&x| (x, false)))
            .collect();
        pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut rank_sum, mut ties) = (0.0, 0.0);
        let mut start = 0;
        while start < pooled.len() {
            let end = start
                + pooled[start..]
                    .iter()
                    .take_while(|p| p.0 == pooled[start].0)
                    .count();
            let tied = (end - start) as f64;
            // Ranks start + 1 ..= end, their mean for every tied point.
            let rank = (start + 1 + end) as f64 / 2.0;
            rank_sum += rank * pooled[start..end].iter().filter(|p| p.1).count() as f64;
            ties += tied * tied * tied - tied;
            start = end;
        }
        let u = rank_sum - n1 * (n1 + 1.0) / 2.0;
        let n = n1 + n2;
        let mean = n1 * n2 / 2.0;
        let sigma = (n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)))).sqrt();
        if sigma == 0.0 {
            // Every point the same value: nothing tells the sets apart.
            return MannWhitney { u, z: 0.0, p: 1.0 };
        }
        let larger = u.max(n1 * n2 - u);
        let z = (larger - mean - 0.5) / sigma;
        let p = (2.0 * Normal::new(0.0, 1.0).map_or(f64::NAN, |normal| normal.sf(z))).min(1.0);
        MannWhitney { u, z, p }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(points: &[f64]) -> Sample {
        Sample::new("test", points.to_vec()).expect("a valid sample")
    }

    fn close(got: f64, want: f64, within: f64) {
        assert!(
            (got - want).abs() <= within,
            "{got} is not {want} within {within}"
        );
    }

    #[test]
    fn percentiles_are_definition_7() {
        // R: quantile(1:10, c(0, .25, .5, .9, 1)) (type 7, R's default).
        let one_to_ten: Vec<f64> = (1..=10).map(f64::from).collect();
        for (p, want) in [
            (0.0, 1.0),
            (0.25, 3.25),
            (0.5, 5.5),
            (0.9, 9.1),
            (1.0, 10.0),
        ] {
            close(percentile(&one_to_ten, p), want, 1e-12);
        }
        // NumPy: np.percentile([15, 20, 35, 40, 50], [40, 99]) -> 29, 49.6.
        close(
            percentile(&[15.0, 20.0, 35.0, 40.0, 50.0], 0.4),
            29.0,
            1e-12,
        );
        close(
            percentile(&[15.0, 20.0, 35.0, 40.0, 50.0], 0.99),
            49.6,
            1e-12,
        );
    }

    /// A1, A2, the published [t, df, p], SciPy's [t, df, p] and SciPy's
    /// Mann-Whitney [U, p].
    type Example = (&'static [f64], &'static [f64], [f64; 3], [f64; 3], [f64; 2]);

    /// The three examples of Wikipedia's "Welch's t-test" article (A1
    /// against A2), with its published t, degrees of freedom and p (to its
    /// digits), and SciPy 1.10's `ttest_ind(a1, a2, equal_var=False)` and
    /// `mannwhitneyu(a1, a2, method="asymptotic")` on them (to 1e-9).
    const EXAMPLES: [Example; 3] = [
        (
            &[
                27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7,
                21.4,
            ],
            &[
                27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5,
                24.4,
            ],
            [-2.46, 25.0, 0.021],
            [-2.455356398286006, 24.988529290231416, 0.021378001462866985],
            [53.5, 0.015201303821215302],
        ),
        (
            &[17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8],
            &[
                21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5,
                23.6, 21.5, 22.5, 23.5, 21.5, 21.8,
            ],
            [-1.57, 9.9, 0.149],
            [-1.5654335235985037, 9.904741248650831, 0.14884169660532834],
            [75.0, 0.27991793650898855],
        ),
        (
            &[19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0],
            &[
                28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7, 23.2, 17.5, 20.6, 18.0,
                23.9, 21.6, 24.3, 20.4, 23.9, 13.3,
            ],
            [-2.22, 24.5, 0.036],
            [-2.225512039969852, 24.524634944257343, 0.035484530830010325],
            [55.5, 0.05279379552204588],
        ),
    ];

    #[test]
    fn welch_gives_the_published_t_freedom_and_p() {
        for (a1, a2, published, scipy, _) in EXAMPLES {
            let w = Welch::new(&sample(a1), &sample(a2));
            // The article gives two or three digits, not always rounded.
            close(w.t, published[0], 0.01);
            close(w.df, published[1], 0.1);
            close(w.p, published[2], 0.001);
            close(w.t, scipy[0], 1e-9);
            close(w.df, scipy[1], 1e-9);
            close(w.p, scipy[2], 1e-9);
        }
    }

    #[test]
    fn mann_whitney_gives_scipys_u_and_p() {
        for (a1, a2, _, _, scipy) in EXAMPLES {
            let m = MannWhitney::new(&sample(a1), &sample(a2));
            assert_eq!(m.u, scipy[0]);
            close(m.p, scipy[1], 1e-9);
        }
        // Ties across the sets: SciPy gives U 8.5, p 0.025279736885893914.
        let m = MannWhitney::new(
            &sample(&[1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0]),
            &sample(&[2.0, 3.0, 4.0, 4.0, 5.0, 5.0, 6.0, 7.0]),
        );
        assert_eq!(m.u, 8.5);
        close(m.p, 0.025279736885893914, 1e-9);
    }

    #[test]
    fn constant_sets_are_equal_or_apart_without_noise() {
        let fives = sample(&[5.0; 4]);
        let sixes = sample(&[6.0; 3]);
        assert_eq!(Welch::new(&fives, &fives).p, 1.0);
        let apart = Welch::new(&sixes, &fives);
        assert_eq!((apart.t, apart.p), (f64::INFINITY, 0.0));
        assert_eq!(MannWhitney::new(&fives, &fives).p, 1.0);
        // All six pairs won by the sixes: U = 3 * 4 = 12.
        assert_eq!(MannWhitney::new(&sixes, &fives).u, 12.0);
    }
}
