//! Tracking: how each clock's time runs against the kernel's monotonic clock
//! (`KernelClock::Monotonic`, Linux's CLOCK_MONOTONIC, whose name it has
//! below).
//!
//! Every 100 ms, one loop samples every clock that counts time since an origin
//! (raw counters are left out: their rate is our own calibration). A sample is
//! the clock's reading bracketed by two CLOCK_MONOTONIC reads, the tightest of
//! three brackets, and stands for the bracket's midpoint. The offset change
//! since the first sample, (clock - monotonic) - (clock₀ - monotonic₀), is fitted
//! by least squares against monotonic time: the slope is the rate error, and
//! the fitted line's rise over the run is the offset's drift; the residuals'
//! spread is what the line does not explain (a coarse clock's ticks). For clocks
//! on CLOCK_MONOTONIC's origin the mean offset itself is reported too.

use std::thread;
use std::time::Duration;

use serde::Serialize;

use crate::clocks::{Clock, Origin, monotonic_name, monotonic_ns};

const SAMPLE_INTERVAL_NS: u64 = 100_000_000;
const BRACKETS: usize = 3;

/// One clock's result.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The clock's name.
    pub clock: String,
    /// Samples taken.
    pub samples: usize,
    /// The rate error against CLOCK_MONOTONIC, in parts per million.
    pub rate_ppm: f64,
    /// The fitted offset change over the run, in nanoseconds.
    pub drift_ns: f64,
    /// The residuals' max less their min, in nanoseconds.
    pub residual_spread_ns: f64,
    /// The mean of clock - monotonic in nanoseconds, for clocks on
    /// CLOCK_MONOTONIC's origin.
    pub offset_ns: Option<f64>,
    /// The widest bracket kept, in nanoseconds: the samples' uncertainty.
    pub worst_bracket_ns: u64,
}

/// One bracketed reading: monotonic midpoint and the clock's raw value.
struct Sample {
    monotonic: u64,
    raw: u64,
    bracket: u64,
}

/// Samples every tracked clock for `seconds`.
pub fn run(clocks: &[Clock], seconds: u64) -> Vec<Row> {
    let tracked: Vec<&Clock> = clocks
        .iter()
        .filter(|clock| clock.origin != Origin::Counter)
        .collect();
    let count = (seconds * 1_000_000_000 / SAMPLE_INTERVAL_NS + 1) as usize;
    let mut samples: Vec<Vec<Sample>> = tracked.iter().map(|_| Vec::with_capacity(count)).collect();
    eprintln!("tracking: {} clocks for {seconds} s", tracked.len());
    let start = monotonic_ns();
    for i in 0..count as u64 {
        let due = start + i * SAMPLE_INTERVAL_NS;
        let now = monotonic_ns();
        if due > now {
            thread::sleep(Duration::from_nanos(due - now));
        }
        for (clock, samples) in tracked.iter().zip(&mut samples) {
            samples.push(sample(clock.read));
        }
    }
    tracked
        .iter()
        .zip(&samples)
        .map(|(clock, samples)| fit(clock, samples))
        .collect()
}

fn sample(read: fn() -> u64) -> Sample {
    (0..BRACKETS)
        .map(|_| {
            let before = monotonic_ns();
            let raw = read();
            let after = monotonic_ns();
            Sample {
                monotonic: before + (after - before) / 2,
                raw,
                bracket: after - before,
            }
        })
        .min_by_key(|sample| sample.bracket)
        .expect("BRACKETS > 0")
}

fn fit(clock: &Clock, samples: &[Sample]) -> Row {
    let first = &samples[0];
    // Differences first, so that large readings (ns since 1970) keep their
    // precision in f64.
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| {
            let x = (s.monotonic - first.monotonic) as f64;
            let clock_ns = s.raw.wrapping_sub(first.raw) as i64 as f64 * clock.ns_per_unit;
            (x, clock_ns - x)
        })
        .collect();
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let intercept = mean_y - slope * mean_x;
    let residuals = points.iter().map(|p| p.1 - (intercept + slope * p.0));
    let (low, high) = residuals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
        (lo.min(r), hi.max(r))
    });
    let span = points.last().map_or(0.0, |p| p.0);
    // The first offset in full, then the mean of the changes from it.
    let offset_ns = (clock.origin == Origin::Monotonic)
        .then_some(first.raw as f64 * clock.ns_per_unit - first.monotonic as f64 + mean_y);
    Row {
        clock: clock.name.to_string(),
        samples: samples.len(),
        rate_ppm: slope * 1e6,
        drift_ns: slope * span,
        residual_spread_ns: high - low,
        offset_ns,
        worst_bracket_ns: samples.iter().map(|s| s.bracket).max().unwrap_or(0),
    }
}

/// Prints the table.
pub fn print(rows: &[Row]) {
    println!(
        "Tracking against {} (offset = clock - monotonic)",
        monotonic_name()
    );
    println!(
        "  {:<28} {:>7} {:>10} {:>11} {:>12} {:>13} {:>9}",
        "clock", "samples", "rate ppm", "drift ns", "spread ns", "offset ns", "bracket"
    );
    for row in rows {
        let offset = row.offset_ns.map_or("-".to_string(), |o| format!("{o:.0}"));
        println!(
            "  {:<28} {:>7} {:>10.3} {:>11.0} {:>12.0} {:>13} {:>9}",
            row.clock,
            row.samples,
            row.rate_ppm,
            row.drift_ns,
            row.residual_spread_ns,
            offset,
            row.worst_bracket_ns
        );
    }
}
