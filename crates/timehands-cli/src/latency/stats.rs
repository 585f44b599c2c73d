//! What one measuring thread learns: cyclictest's figures, an HDR histogram
//! for the percentiles, cyclictest's fixed histogram, and the missed periods.
//!
//! cyclictest works in whole microseconds (whole nanoseconds with `-N`): each
//! sample is truncated to the unit, and Min, Act, Avg and Max are taken over
//! the truncated samples (Avg is their sum over the count, truncated again).
//! The same rule is kept here so that the two tools print comparable numbers.
//! The HDR histogram keeps nanoseconds (three significant digits), so the
//! percentiles are not limited to the µs grid.

use hdrhistogram::Histogram;

/// The unit of cyclictest's figures: µs, or ns with `-N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Microseconds, cyclictest's default.
    Micros,
    /// Nanoseconds (`-N`).
    Nanos,
}

impl Unit {
    /// Nanoseconds in one unit.
    pub fn nanos(self) -> u64 {
        match self {
            Unit::Micros => 1000,
            Unit::Nanos => 1,
        }
    }
}

/// The numbers of cyclictest's per-thread line, in the run's [`Unit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Wakeups measured.
    pub cycles: u64,
    /// The smallest latency; 0 before the first wakeup.
    pub min: u64,
    /// The latest latency.
    pub act: u64,
    /// The mean latency, truncated as cyclictest truncates it.
    pub avg: u64,
    /// The largest latency.
    pub max: u64,
    /// SMIs counted (`--smi`).
    pub smis: u64,
}

/// cyclictest's histogram (`-h US`): one bucket per unit (µs, or ns) below the
/// bound, and a count of the samples at or above it with the cycle numbers of
/// the first of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buckets {
    counts: Vec<u64>,
    overflows: u64,
    overflow_cycles: Vec<u64>,
}

impl Buckets {
    /// A histogram of `bound` one-unit buckets.
    pub fn new(bound: usize) -> Buckets {
        Buckets {
            counts: vec![0; bound],
            overflows: 0,
            overflow_cycles: Vec::new(),
        }
    }

    fn record(&mut self, latency_us: u64, cycle: u64) {
        match self.counts.get_mut(latency_us as usize) {
            Some(count) => *count += 1,
            None => {
                self.overflows += 1;
                // cyclictest keeps as many overflow cycle numbers as there are
                // buckets, and counts the rest as "others".
                if self.overflow_cycles.len() < self.counts.len() {
                    self.overflow_cycles.push(cycle);
                }
            }
        }
    }

    /// The count of each bucket; bucket `i` holds latencies in `[i, i + 1)` units.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Samples at or above the bound.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// The (0-based) cycle numbers of the first overflows.
    pub fn overflow_cycles(&self) -> &[u64] {
        &self.overflow_cycles
    }
}

/// Everything one measuring thread records.
#[derive(Clone, Debug)]
pub struct ThreadStats {
    summary: Summary,
    unit: Unit,
    sum: u64,
    missed: u64,
    hdr: Histogram<u64>,
    buckets: Option<Buckets>,
}

impl ThreadStats {
    /// Empty statistics in `unit`; with `bound`, also cyclictest's histogram
    /// of that many buckets of one unit.
    pub fn new(bound: Option<usize>, unit: Unit) -> ThreadStats {
        ThreadStats {
            summary: Summary::default(),
            unit,
            sum: 0,
            missed: 0,
            // Auto-resizing, so that no latency is out of range.
            hdr: Histogram::new(3).expect("3 significant digits is a valid precision"),
            buckets: bound.map(Buckets::new),
        }
    }

    /// Records one wakeup `latency_ns` late.
    pub fn record(&mut self, latency_ns: u64) {
        let value = latency_ns / self.unit.nanos();
        let s = &mut self.summary;
        if let Some(b) = &mut self.buckets {
            b.record(value, s.cycles);
        }
        s.min = if s.cycles == 0 {
            value
        } else {
            s.min.min(value)
        };
        s.max = s.max.max(value);
        s.act = value;
        s.cycles += 1;
        self.sum += value;
        s.avg = self.sum / s.cycles;
        // `record` grows the histogram to fit; it fails only past u64 range,
        // where the clamped value is the best there is.
        if self.hdr.record(latency_ns).is_err() {
            self.hdr.saturating_record(latency_ns);
        }
    }

    /// Adds SMIs counted during a period.
    pub fn add_smis(&mut self, smis: u64) {
        self.summary.smis += smis;
    }

    /// Adds periods that passed without a wakeup.
    pub fn add_missed(&mut self, periods: u64) {
        self.missed += periods;
    }

    /// The figures of cyclictest's line.
    pub fn summary(&self) -> Summary {
        self.summary
    }

    /// The mean latency in the run's unit, unrounded (cyclictest's JSON
    /// `avg`).
    pub fn mean(&self) -> f64 {
        match self.summary.cycles {
            0 => 0.0,
            n => self.sum as f64 / n as f64,
        }
    }

    /// Periods that passed without a wakeup.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The latency below which a fraction `quantile` of the wakeups fell, in
    /// ns (to the HDR histogram's three significant digits); `None` before the
    /// first wakeup.
    pub fn percentile_ns(&self, quantile: f64) -> Option<u64> {
        (self.summary.cycles > 0).then(|| self.hdr.value_at_quantile(quantile))
    }

    /// cyclictest's histogram, when one was asked for.
    pub fn buckets(&self) -> Option<&Buckets> {
        self.buckets.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(bound_us: Option<usize>, samples_ns: &[u64]) -> ThreadStats {
        let mut stats = ThreadStats::new(bound_us, Unit::Micros);
        for &ns in samples_ns {
            stats.record(ns);
        }
        stats
    }

    #[test]
    fn the_line_figures_are_over_samples_truncated_to_microseconds() {
        let stats = recorded(None, &[11_999, 18_001, 30_500]);
        // 11 + 18 + 30 = 59, over 3 = 19 (truncated), as cyclictest computes.
        assert_eq!(
            stats.summary(),
            Summary {
                cycles: 3,
                min: 11,
                act: 30,
                avg: 19,
                max: 30,
                smis: 0,
            }
        );
        assert!((stats.mean() - 59.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn before_the_first_wakeup_everything_is_zero_and_there_is_no_percentile() {
        let stats = ThreadStats::new(Some(10), Unit::Micros);
        assert_eq!(stats.summary(), Summary::default());
        assert_eq!(stats.percentile_ns(0.99), None);
        assert_eq!(stats.mean(), 0.0);
    }

    #[test]
    fn percentiles_come_from_the_nanosecond_samples() {
        // 1000 samples: 1..=1000 µs, in ns.
        let samples: Vec<u64> = (1..=1000).map(|us| us * 1000).collect();
        let stats = recorded(None, &samples);
        let within = |got: Option<u64>, want: u64| {
            let got = got.expect("has samples");
            // Three significant digits: within 0.1%.
            assert!(got.abs_diff(want) * 1000 <= want, "{got} vs {want}");
        };
        within(stats.percentile_ns(0.5), 500_000);
        within(stats.percentile_ns(0.99), 990_000);
        within(stats.percentile_ns(0.999), 999_000);
    }

    #[test]
    fn the_fixed_histogram_counts_per_microsecond_and_overflows_at_the_bound() {
        let stats = recorded(Some(4), &[0, 999, 1_000, 3_999, 4_000, 250_000]);
        let b = stats.buckets().expect("asked for");
        assert_eq!(b.counts(), &[2, 1, 0, 1]);
        assert_eq!(b.overflows(), 2);
        // Cycles are numbered from 0, in the order of the wakeups.
        assert_eq!(b.overflow_cycles(), &[4, 5]);
    }

    #[test]
    fn overflow_cycle_numbers_are_kept_up_to_the_bucket_count() {
        let stats = recorded(Some(2), &[5_000; 7]);
        let b = stats.buckets().expect("asked for");
        assert_eq!(b.overflows(), 7);
        assert_eq!(b.overflow_cycles(), &[0, 1]);
    }

    #[test]
    fn with_nanoseconds_the_figures_and_buckets_are_in_ns() {
        let mut stats = ThreadStats::new(Some(3), Unit::Nanos);
        for ns in [2, 1, 1_000] {
            stats.record(ns);
        }
        assert_eq!(
            stats.summary(),
            Summary {
                cycles: 3,
                min: 1,
                act: 1_000,
                avg: 334,
                max: 1_000,
                smis: 0,
            }
        );
        let b = stats.buckets().expect("asked for");
        assert_eq!((b.counts(), b.overflows()), (&[0, 1, 1][..], 1));
    }

    #[test]
    fn missed_periods_add_up_apart_from_the_samples() {
        let mut stats = recorded(None, &[1_000, 2_000]);
        stats.add_missed(3);
        stats.add_missed(0);
        stats.add_missed(2);
        assert_eq!(stats.missed(), 5);
        assert_eq!(stats.summary().cycles, 2);
    }
}
