//! Student's t test of two data sets, as ministat does it.
//!
//! Two sets with means m1, m2, variances v1, v2 and sizes n1, n2 share a
//! pooled standard deviation `s = sqrt(((n1-1) v1 + (n2-1) v2) / (n1+n2-2))`;
//! the difference of the means has the standard error `s sqrt(1/n1 + 1/n2)`,
//! and it is proven at a confidence level when it is larger than that error
//! times the two-sided t quantile with n1+n2-2 degrees of freedom.
//!
//! ministat reads t from a table with three decimals, for 1 to 100 degrees of
//! freedom and the normal distribution beyond. The quantiles here come from
//! statrs, rounded to three decimals the same way, so the margins agree digit
//! for digit. Two quirks of that table are kept, because the numbers people
//! compare with (OpenBSD's clock_gettime figures among them) were made
//! with it:
//!
//! - its "99.5%" column holds the 0.999 quantile (two-sided 99.8%), so that
//!   level is stricter than its label;
//! - seven entries of that column differ from the rounded quantile in the
//!   last digits ([`TABLE_ERRATA`]).

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::sample::Sample;

/// A confidence level ministat offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    /// 80%.
    P80,
    /// 90%.
    P90,
    /// 95%, the default.
    P95,
    /// 98%.
    P98,
    /// 99%.
    P99,
    /// 99.5% as labelled, 99.8% in fact (see the module docs).
    P99_5,
}

/// Beyond this many degrees of freedom ministat takes the normal quantile.
const TABLE_DEGREES: u64 = 100;

/// Entries of ministat's 99.5% column that are not the rounded quantile:
/// (degrees of freedom, ministat's value).
const TABLE_ERRATA: [(u64, f64); 7] = [
    (1, 318.313),
    (7, 4.782),
    (8, 4.499),
    (9, 4.296),
    (10, 4.143),
    (11, 4.024),
    (12, 3.929),
];

impl Confidence {
    /// Every level, in ministat's order.
    pub const ALL: [Confidence; 6] = [
        Confidence::P80,
        Confidence::P90,
        Confidence::P95,
        Confidence::P98,
        Confidence::P99,
        Confidence::P99_5,
    ];

    /// The level as ministat prints it, in percent.
    pub fn percent(self) -> f64 {
        match self {
            Confidence::P80 => 80.0,
            Confidence::P90 => 90.0,
            Confidence::P95 => 95.0,
            Confidence::P98 => 98.0,
            Confidence::P99 => 99.0,
            Confidence::P99_5 => 99.5,
        }
    }

    /// The probability whose quantile ministat's table holds for this level.
    fn quantile_probability(self) -> f64 {
        match self {
            Confidence::P99_5 => 0.999,
            level => 0.5 + level.percent() / 200.0,
        }
    }

    /// The level written as `percent`, compared as a double the way ministat
    /// compares the `strtod` of its `-c` argument.
    pub fn from_percent(percent: f64) -> Option<Confidence> {
        Confidence::ALL.into_iter().find(|c| c.percent() == percent)
    }

    /// The t value ministat uses at this level for `degrees` of freedom (at
    /// least 1).
    pub fn t(self, degrees: u64) -> f64 {
        let p = self.quantile_probability();
        if self == Confidence::P99_5 {
            if let Some(&(_, t)) = TABLE_ERRATA.iter().find(|(d, _)| *d == degrees) {
                return t;
            }
        }
        let quantile = if degrees > TABLE_DEGREES {
            Normal::new(0.0, 1.0)
                .expect("the standard normal is valid")
                .inverse_cdf(p)
        } else {
            StudentsT::new(0.0, 1.0, degrees as f64)
                .expect("one degree of freedom or more is valid")
                .inverse_cdf(p)
        };
        (quantile * 1000.0).round() / 1000.0
    }
}

/// The t test of one data set against the reference (the first).
#[derive(Debug, Clone, Copy)]
pub struct Comparison {
    /// The set's mean minus the reference's.
    pub difference: f64,
    /// Half the width of the confidence interval of the difference.
    pub margin: f64,
    /// The pooled standard deviation.
    pub pooled_stddev: f64,
    /// The reference's mean, which the percentages divide by.
    pub reference_mean: f64,
}

impl Comparison {
    /// `set` against `reference` at `confidence`.
    pub fn new(set: &Sample, reference: &Sample, confidence: Confidence) -> Comparison {
        let (n1, n2) = (set.len() as f64, reference.len() as f64);
        let degrees = set.len() + reference.len() - 2;
        let pooled_variance =
            ((n1 - 1.0) * set.variance() + (n2 - 1.0) * reference.variance()) / degrees as f64;
        let pooled_stddev = pooled_variance.sqrt();
        let standard_error = pooled_stddev * (1.0 / n1 + 1.0 / n2).sqrt();
        Comparison {
            difference: set.mean() - reference.mean(),
            margin: confidence.t(degrees as u64) * standard_error,
            pooled_stddev,
            reference_mean: reference.mean(),
        }
    }

    /// Whether the difference is larger than the margin.
    pub fn proven(&self) -> bool {
        self.difference.abs() > self.margin
    }
}

#[cfg(test)]
mod tests {
    use super::{Comparison, Confidence};
    use crate::stat::sample::Sample;
    use proptest::prelude::*;

    #[test]
    fn t_matches_ministats_table() {
        // Rows of ministat's table (degrees of freedom, the six levels).
        let rows: [(u64, [f64; 6]); 6] = [
            (1, [3.078, 6.314, 12.706, 31.821, 63.657, 318.313]),
            (2, [1.886, 2.920, 4.303, 6.965, 9.925, 22.327]),
            (10, [1.372, 1.812, 2.228, 2.764, 3.169, 4.143]),
            (30, [1.310, 1.697, 2.042, 2.457, 2.750, 3.385]),
            (100, [1.290, 1.660, 1.984, 2.364, 2.626, 3.174]),
            (101, [1.282, 1.645, 1.960, 2.326, 2.576, 3.090]),
        ];
        for (degrees, row) in rows {
            for (level, want) in Confidence::ALL.into_iter().zip(row) {
                assert_eq!(level.t(degrees), want, "{level:?} at {degrees}");
            }
        }
        assert_eq!(Confidence::P95.t(1998), 1.960);
    }

    #[test]
    fn levels_parse_as_ministat_compares_them() {
        assert_eq!(Confidence::from_percent(99.5), Some(Confidence::P99_5));
        assert_eq!(Confidence::from_percent(80.0), Some(Confidence::P80));
        assert_eq!(Confidence::from_percent(97.0), None);
    }

    #[test]
    fn the_manual_page_example() {
        // ministat(1): iguana against chameleon at 80%.
        let iguana =
            Sample::new("iguana", vec![50., 200., 150., 400., 750., 400., 150.]).expect("valid");
        let chameleon =
            Sample::new("chameleon", vec![150., 400., 720., 500., 930.]).expect("valid");
        let c = Comparison::new(&chameleon, &iguana, Confidence::P80);
        assert!(c.proven());
        assert_eq!(c.difference, 240.0);
        assert!((c.margin - 212.215).abs() < 5e-4, "{}", c.margin);
        assert!((c.pooled_stddev - 264.159).abs() < 5e-4);
        assert!(!Comparison::new(&chameleon, &iguana, Confidence::P95).proven());
    }

    proptest! {
        #[test]
        fn t_falls_as_freedom_grows_and_rises_with_confidence(degrees in 1u64..150) {
            for pair in Confidence::ALL.windows(2) {
                prop_assert!(pair[0].t(degrees) < pair[1].t(degrees));
            }
            for level in Confidence::ALL {
                prop_assert!(level.t(degrees + 1) <= level.t(degrees));
            }
        }
    }
}
