//! The scenarios of the targets table: each runs the simulation and turns
//! its traces into rows (ours, the oracle on the same draws, the `hardpps`
//! model at its default and at its best tuning, chrony's PPS refclock, the
//! limit or target), each with whether ours meets its target.

use serde::Serialize;

use crate::limit::limit;
use crate::receiver::Receiver;
use crate::run::{Config, NtpSource, Trace, run};

/// One line of the targets table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The scenario it comes from.
    pub scenario: &'static str,
    /// What is measured, with its unit.
    pub metric: String,
    /// Our discipline's figure (`None`: never within the run).
    pub ours: Option<f64>,
    /// The oracle's figure on the same draws, where it applies.
    pub oracle: Option<f64>,
    /// The `hardpps` model's figure at its default tuning, where it applies.
    pub model: Option<f64>,
    /// The model's best figure over `pps_shiftmax` 4 to 8, where it applies.
    pub tuned: Option<f64>,
    /// The figure of chrony's PPS refclock model, where it applies.
    pub chrony: Option<f64>,
    /// The physical limit, where there is one.
    pub limit: Option<f64>,
    /// The target ours is held to.
    pub target: String,
    /// The figure ours is held at or under (`None`: no target).
    pub bound: Option<f64>,
    /// Whether ours meets it.
    pub met: bool,
}

/// The scenarios by name, for the command line.
pub const NAMES: [&str; 5] = ["acquire", "steady", "robust", "receiver", "ntp"];

/// The rows of scenario `name` with `seed`; `hours` sets the steady
/// state's length (24 for the targets).
///
/// # Errors
/// A scenario name that is not one of [`NAMES`], named in the message.
pub fn rows(name: &str, seed: u64, hours: u64) -> Result<Vec<Row>, String> {
    match name {
        "acquire" => Ok(acquire(seed)),
        "steady" => Ok(steady(seed, hours)),
        "robust" => Ok(robust(seed)),
        "receiver" => Ok(receiver(seed)),
        "ntp" => Ok(ntp(seed)),
        _ => Err(unknown(name)),
    }
}

/// The trace of scenario `name`'s main run, for a plot: acquisition, the
/// steady state at σ = 100 ns and w = 1 ppb/√s, robustness with
/// everything, the receiver with its bursts, NTP.
///
/// # Errors
/// A scenario name that is not one of [`NAMES`], named in the message.
pub fn trace(name: &str, seed: u64, hours: u64) -> Result<Trace, String> {
    let config = match name {
        "acquire" => acquire_config(seed),
        "steady" => steady_config(seed + 2, 100.0, 1.0, hours),
        "robust" => robust_configs(seed).1,
        "receiver" => receiver_configs(seed).1,
        "ntp" => ntp_config(seed),
        _ => return Err(unknown(name)),
    };
    Ok(run(&config))
}

/// The error for a scenario that does not exist.
fn unknown(name: &str) -> String {
    format!("no scenario {name:?}: choose one of {}", NAMES.join(", "))
}

impl Row {
    /// A row of `scenario` whose target, `target` in words, is ours at or
    /// under `bound`; the other columns empty.
    fn new(
        scenario: &'static str,
        metric: impl Into<String>,
        ours: Option<f64>,
        target: impl Into<String>,
        bound: f64,
    ) -> Row {
        Row {
            scenario,
            metric: metric.into(),
            ours,
            oracle: None,
            model: None,
            tuned: None,
            chrony: None,
            limit: None,
            target: target.into(),
            bound: Some(bound),
            met: ours.is_some_and(|ours| ours <= bound),
        }
    }

    /// With the oracle's, the model's and the tuned model's figures.
    fn beside(mut self, oracle: Option<f64>, model: Option<f64>, tuned: Option<f64>) -> Row {
        (self.oracle, self.model, self.tuned) = (oracle, model, tuned);
        self
    }

    /// With chrony's figure.
    fn with_chrony(mut self, chrony: Option<f64>) -> Row {
        self.chrony = chrony;
        self
    }
}

/// The first second from which every later sample is within `bound`, if
/// any (and a sample after it).
fn settles(samples: &[f64], bound: f64) -> Option<f64> {
    let last_out = samples.iter().rposition(|e| e.abs() >= bound);
    match last_out {
        None => Some(0.0),
        Some(i) if i + 1 < samples.len() => Some((i + 1) as f64),
        Some(_) => None,
    }
}

/// The root mean square.
fn rms(samples: &[f64]) -> f64 {
    (samples.iter().map(|e| e * e).sum::<f64>() / samples.len() as f64).sqrt()
}

/// The largest magnitude.
fn max_abs(samples: &[f64]) -> f64 {
    samples.iter().fold(0.0, |m, e| m.max(e.abs()))
}

/// The RMS of the per-second difference of two traces: what one run's
/// events add to the other's error, second by second.
fn rms_difference(a: &[f64], b: &[f64]) -> f64 {
    let differences: Vec<f64> = a.iter().zip(b).map(|(a, b)| a - b).collect();
    rms(&differences)
}

/// `figure` over `window` of the `hardpps` model at its best tuning (the
/// smallest over its default and the [`TUNINGS`](crate::TUNINGS)).
fn best_tuning(trace: &Trace, figure: impl Fn(&[f64]) -> f64) -> f64 {
    trace
        .tuned_ns
        .iter()
        .chain([&trace.model_ns])
        .map(|errors| figure(errors))
        .fold(f64::INFINITY, f64::min)
}

/// The acquisition's run.
fn acquire_config(seed: u64) -> Config {
    Config {
        frequency_ppm: 100.0,
        phase_us: 300.0,
        jitter_ns: 100.0,
        wander_ppb: 1.0,
        ..Config::new(seed, 600)
    }
}

/// How late the outlier among the first pulses comes, µs.
const EARLY_OUTLIER_US: f64 = 20.0;

/// The pulse (from 1) that comes late in the acquisition of `seed`: each
/// of the first ten, seed by seed.
fn early_outlier(seed: u64) -> u64 {
    1 + seed % 10
}

/// Acquisition: 100 ppm fast, 300 µs ahead, σ = 100 ns, w = 1 ppb/√s, for
/// ten minutes; and the same run with one pulse of the first ten (the
/// seed's last digit's, the tenth for 0) 20 µs late: how much further off it puts the
/// clock than both the clean run and the run without that pulse (what a
/// discipline that knew it for an outlier would have) are, at the worst.
/// (A late first pulse and a late third look alike until the fourth: a
/// discipline that follows a line of two would be off by one of them.)
pub fn acquire(seed: u64) -> Vec<Row> {
    let clean = acquire_config(seed);
    let early = early_outlier(seed);
    let late = Config {
        late: Some((early, EARLY_OUTLIER_US)),
        ..clean.clone()
    };
    let missing = Config {
        missing: Some(early),
        ..clean.clone()
    };
    let (trace, dirty, dropped) = (run(&clean), run(&late), run(&missing));
    let lock = |e: &[f64]| settles(e, 1_000.0);
    // The frequency error from 120 s on: RMS, as a single second's error
    // is a draw (the optimal estimate's own deviation is a few ppb).
    let frequency = |f: &[f64]| rms(&f[120..]);
    // The first minute: how much further off the outlier put the clock
    // than both the clean run and the run without that pulse are.
    let moved = |late: &[f64], clean: &[f64], missing: &[f64]| -> Vec<f64> {
        (0..60)
            .map(|i| late[i].abs() - clean[i].abs().max(missing[i].abs()))
            .collect()
    };
    let worst = |moved: Vec<f64>| moved.into_iter().fold(0.0, f64::max);
    let ours_moved = moved(&dirty.ours_ns, &trace.ours_ns, &dropped.ours_ns);
    let model_moved = moved(&dirty.model_ns, &trace.model_ns, &dropped.model_ns);
    let chrony_moved = moved(&dirty.chrony_ns, &trace.chrony_ns, &dropped.chrony_ns);
    vec![
        Row::new(
            "acquire",
            "time to |phase| < 1 µs for good, s",
            lock(&trace.ours_ns),
            "≤ 3",
            3.0,
        )
        .beside(None, lock(&trace.model_ns), None)
        .with_chrony(lock(&trace.chrony_ns)),
        Row::new(
            "acquire",
            "RMS frequency error from 120 s on, ppb",
            Some(frequency(&trace.ours_frequency_ppb)),
            "≤ 10",
            10.0,
        )
        .beside(None, Some(frequency(&trace.model_frequency_ppb)), None)
        .with_chrony(Some(frequency(&trace.chrony_frequency_ppb))),
        Row::new(
            "acquire",
            "error a 20 µs outlier among pulses 1-10 adds, ns",
            Some(worst(ours_moved)),
            "≤ 300 (3σ)",
            EARLY_BOUND_NS,
        )
        .beside(None, Some(worst(model_moved)), None)
        .with_chrony(Some(worst(chrony_moved))),
        backward("acquire", &trace),
    ]
}

/// How much further off an outlier among the first pulses may put the
/// clock: 3σ, at σ = 100 ns.
const EARLY_BOUND_NS: f64 = 300.0;

/// The run's backward steps as a row (the target is none).
fn backward(scenario: &'static str, trace: &Trace) -> Row {
    Row::new(
        scenario,
        "reads that stepped back",
        Some(trace.backward_steps as f64),
        "0",
        0.0,
    )
}

/// The steady-state cases: σ (ns) and w (ppb/√s).
pub const STEADY: [(f64, f64); 4] = [(1_000.0, 1.0), (1_000.0, 10.0), (100.0, 1.0), (100.0, 10.0)];

/// The first hour, left out of the steady state: `hardpps` needs about
/// 1000 s to reach its longest interval.
const SETTLING: usize = 3_600;

/// Ours against the oracle on the same draws: at most this many times its
/// figure.
const ORACLE_RATIO: f64 = 1.25;

/// A steady state's run: `hours` past the settling, from 10 ppm.
fn steady_config(seed: u64, sigma: f64, wander: f64, hours: u64) -> Config {
    Config {
        frequency_ppm: 10.0,
        jitter_ns: sigma,
        wander_ppb: wander,
        ..Config::new(seed, SETTLING as u64 + hours * 3_600)
    }
}

/// Steady state: `hours` (past a first hour of settling) at each of the
/// [`STEADY`] cases, from a 10 ppm offset.
pub fn steady(seed: u64, hours: u64) -> Vec<Row> {
    let mut rows = Vec::new();
    for (case, (sigma, wander)) in STEADY.into_iter().enumerate() {
        let trace = run(&steady_config(seed + case as u64, sigma, wander, hours));
        let after = |errors: &[f64]| errors[SETTLING..].to_vec();
        let (ours, oracle) = (after(&trace.ours_ns), after(&trace.oracle_ns));
        let bound = limit(sigma, wander);
        let (ours_rms, ours_max) = (rms(&ours), max_abs(&ours));
        let tuned_rms = best_tuning(&trace, |e| rms(&e[SETTLING..]));
        let chrony = after(&trace.chrony_ns);
        let chrony_rms = rms(&chrony);
        let name = format!("σ = {sigma} ns, w = {wander} ppb/√s");
        let mut rms_row = Row::new(
            "steady",
            format!("RMS phase error, ns ({name})"),
            Some(ours_rms),
            format!("≤ {:.0} (1.25 × limit)", 1.25 * bound),
            1.25 * bound,
        )
        .beside(
            Some(rms(&oracle)),
            Some(rms(&trace.model_ns[SETTLING..])),
            Some(tuned_rms),
        )
        .with_chrony(Some(chrony_rms));
        rms_row.limit = Some(bound);
        rows.push(rms_row);
        let oracle_max = max_abs(&oracle);
        rows.push(
            Row::new(
                "steady",
                format!("maximum phase error, ns ({name})"),
                Some(ours_max),
                format!("≤ {:.0} (1.25 × oracle's)", ORACLE_RATIO * oracle_max),
                ORACLE_RATIO * oracle_max,
            )
            .beside(
                Some(oracle_max),
                Some(max_abs(&trace.model_ns[SETTLING..])),
                None,
            )
            .with_chrony(Some(max_abs(&chrony))),
        );
        rows.push(
            Row::new(
                "steady",
                format!("RMS against the best hardpps, ns ({name})"),
                Some(ours_rms),
                format!("≤ {tuned_rms:.0} (hardpps's best)"),
                tuned_rms,
            )
            .beside(None, None, Some(tuned_rms)),
        );
        rows.push(
            Row::new(
                "steady",
                format!("RMS against chrony's PPS refclock, ns ({name})"),
                Some(ours_rms),
                format!("≤ {chrony_rms:.0} (chrony's)"),
                chrony_rms,
            )
            .with_chrony(Some(chrony_rms)),
        );
        rows.push(backward("steady", &trace));
    }
    rows
}

/// The robustness scenario's outage and step, s from the start, and its
/// length.
const OUTAGE: usize = 2_400;
const OUTAGE_LEN: usize = 300;
const STEP: usize = 3_600;
const ROBUST_SECONDS: u64 = 5_400;
/// The robustness scenario's first ten minutes, left out of its figures.
const ROBUST_SETTLING: usize = 600;

/// The robustness scenario's runs: clean, and with everything.
fn robust_configs(seed: u64) -> (Config, Config) {
    let clean = Config {
        jitter_ns: 100.0,
        wander_ppb: 1.0,
        frequency_ppm: 10.0,
        ..Config::new(seed, ROBUST_SECONDS)
    };
    let dirty = Config {
        outliers: 0.02,
        outlier_us: (20.0, 50.0),
        drops: 0.05,
        outage: Some((OUTAGE as u64, OUTAGE_LEN as u64)),
        step: Some((STEP as u64, 2.0)),
        ..clean.clone()
    };
    (clean, dirty)
}

/// Robustness, over an hour and a half at σ = 100 ns, w = 1 ppb/√s (as
/// acquisition): 2 % of pulses 20 to 50 µs late and 5 % dropped, against a
/// clean run on the same draws; a 300 s outage; a +2 ppm frequency step.
/// Each is held to the oracle on the same draws (which knows the outliers,
/// and when the step comes).
pub fn robust(seed: u64) -> Vec<Row> {
    let (clean, dirty) = robust_configs(seed);
    let (clean, dirty) = (run(&clean), run(&dirty));
    // Outliers and drops alone: from the settling to the outage, the RMS
    // of what they add to each second's error.
    let extra = |c: &[f64], d: &[f64]| {
        rms_difference(&c[ROBUST_SETTLING..OUTAGE], &d[ROBUST_SETTLING..OUTAGE])
    };
    let ours_extra = extra(&clean.ours_ns, &dirty.ours_ns);
    let mut rows = vec![
        Row::new(
            "robust",
            "RMS of the per-second error outliers and drops add, ns",
            Some(ours_extra),
            "≤ 50",
            50.0,
        )
        .beside(
            Some(extra(&clean.oracle_ns, &dirty.oracle_ns)),
            Some(extra(&clean.model_ns, &dirty.model_ns)),
            None,
        )
        .with_chrony(Some(extra(&clean.chrony_ns, &dirty.chrony_ns))),
    ];
    // The step's first minute (three pulses to tell it from outliers, then
    // a line from scratch) is the step row's, not the whole run's.
    let everything: Vec<usize> = (ROBUST_SETTLING..STEP)
        .chain(STEP + 60..ROBUST_SECONDS as usize)
        .collect();
    let windows = [
        (
            "RMS with everything, from 10 minutes on but a step's first, ns",
            everything,
        ),
        (
            "RMS over a 300 s outage, ns",
            (OUTAGE..OUTAGE + OUTAGE_LEN).collect(),
        ),
        (
            "RMS from 60 s after a +2 ppm step, for 10 minutes, ns",
            (STEP + 60..STEP + 660).collect(),
        ),
    ];
    for (metric, window) in windows {
        let figure = |errors: &[f64]| rms(&window.iter().map(|&i| errors[i]).collect::<Vec<_>>());
        let (ours, oracle) = (figure(&dirty.ours_ns), figure(&dirty.oracle_ns));
        rows.push(
            Row::new(
                "robust",
                metric,
                Some(ours),
                format!("≤ {:.0} (1.25 × oracle's)", ORACLE_RATIO * oracle),
                ORACLE_RATIO * oracle,
            )
            .beside(
                Some(oracle),
                Some(figure(&dirty.model_ns)),
                Some(best_tuning(&dirty, figure)),
            )
            .with_chrony(Some(figure(&dirty.chrony_ns))),
        );
    }
    let whole = |errors: &[f64]| rms(&errors[ROBUST_SETTLING..]);
    let tuned = best_tuning(&dirty, whole);
    rows.push(
        Row::new(
            "robust",
            "RMS with everything against the best hardpps, ns",
            Some(whole(&dirty.ours_ns)),
            format!("≤ {tuned:.0} (hardpps's best)"),
            tuned,
        )
        .beside(None, None, Some(tuned)),
    );
    let chrony = whole(&dirty.chrony_ns);
    rows.push(
        Row::new(
            "robust",
            "RMS with everything against chrony's PPS refclock, ns",
            Some(whole(&dirty.ours_ns)),
            format!("≤ {chrony:.0} (chrony's)"),
            chrony,
        )
        .with_chrony(Some(chrony)),
    );
    let recovery = |e: &[f64]| settles(&e[STEP..], 1_000.0);
    rows.push(
        Row::new(
            "robust",
            "time back under 1 µs after a +2 ppm step, s",
            recovery(&dirty.ours_ns),
            "≤ 30",
            30.0,
        )
        .beside(None, recovery(&dirty.model_ns), None)
        .with_chrony(recovery(&dirty.chrony_ns)),
    );
    rows.push(backward("robust", &dirty));
    rows
}

/// The receiver's fix, s from the start, and the run's length.
const FIX: usize = 30;
const RECEIVER_SECONDS: u64 = 7_200;
/// From the fix, the receiver scenario's settling, left out of its RMS.
const RECEIVER_SETTLING: usize = 600;

/// The receiver scenario's runs: without its bursts of outliers, and with.
fn receiver_configs(seed: u64) -> (Config, Config) {
    let receiver = Receiver {
        sawtooth_ns: 15.0,
        receiver_ppm: 0.37,
        fix_after: FIX as u64,
        burst_chance: 0.0,
        burst_seconds: 5,
        flicker_ppb: 0.5,
    };
    let clean = Config {
        frequency_ppm: 10.0,
        jitter_ns: 20.0,
        wander_ppb: 0.1,
        receiver: Some(receiver),
        ..Config::new(seed, RECEIVER_SECONDS)
    };
    let bursts = Config {
        receiver: Some(Receiver {
            burst_chance: 0.002,
            ..receiver
        }),
        ..clean.clone()
    };
    (clean, bursts)
}

/// The second world, a GPS receiver's pulses for two hours: a ±15 ns
/// sawtooth that drifts 370 ns a second, 20 ns of interrupt jitter, 30 s of
/// free-running pulses before the fix, a burst of five outliers (10 to 200
/// µs late) every 500 s on average, and flicker frequency noise of 0.5 ppb
/// a decade beside a 0.1 ppb/√s random walk; against the oracle told all
/// of it (the sawtooth as white noise of its variance, the flicker as a
/// random walk of its one-second variance).
pub fn receiver(seed: u64) -> Vec<Row> {
    let (clean, bursts) = receiver_configs(seed);
    let (clean, bursts) = (run(&clean), run(&bursts));
    let lock = |e: &[f64]| settles(&e[FIX..], 1_000.0);
    let settled = FIX + RECEIVER_SETTLING;
    let figure = |errors: &[f64]| rms(&errors[settled..]);
    let (ours, oracle) = (figure(&bursts.ours_ns), figure(&bursts.oracle_ns));
    let extra = |c: &[f64], b: &[f64]| rms_difference(&c[settled..], &b[settled..]);
    let ours_extra = extra(&clean.ours_ns, &bursts.ours_ns);
    let tuned = best_tuning(&bursts, figure);
    let chrony = figure(&bursts.chrony_ns);
    vec![
        Row::new(
            "receiver",
            "time from the fix to |phase| < 1 µs for good, s",
            lock(&bursts.ours_ns),
            "≤ 10",
            10.0,
        )
        .beside(None, lock(&bursts.model_ns), None)
        .with_chrony(lock(&bursts.chrony_ns)),
        Row::new(
            "receiver",
            "RMS from 10 minutes after the fix, ns",
            Some(ours),
            format!("≤ {:.1} (1.25 × oracle's)", ORACLE_RATIO * oracle),
            ORACLE_RATIO * oracle,
        )
        .beside(Some(oracle), Some(figure(&bursts.model_ns)), Some(tuned))
        .with_chrony(Some(chrony)),
        Row::new(
            "receiver",
            "RMS of the per-second error bursts of outliers add, ns",
            Some(ours_extra),
            format!("≤ {:.1} (¼ of the oracle's RMS)", oracle / 4.0),
            oracle / 4.0,
        )
        .beside(
            Some(extra(&clean.oracle_ns, &bursts.oracle_ns)),
            Some(extra(&clean.model_ns, &bursts.model_ns)),
            None,
        )
        .with_chrony(Some(extra(&clean.chrony_ns, &bursts.chrony_ns))),
        Row::new(
            "receiver",
            "RMS against the best hardpps, ns",
            Some(ours),
            format!("≤ {tuned:.0} (hardpps's best)"),
            tuned,
        )
        .beside(None, None, Some(tuned)),
        Row::new(
            "receiver",
            "RMS against chrony's PPS refclock, ns",
            Some(ours),
            format!("≤ {chrony:.1} (chrony's)"),
            chrony,
        )
        .with_chrony(Some(chrony)),
        backward("receiver", &bursts),
    ]
}

/// chrony's published RMS phase error for NTP offsets every 64 s with
/// 100 µs exponential network jitter, µs.
const CHRONY_NTP_RMS_US: f64 = 109.0;

/// The NTP scenario's run.
fn ntp_config(seed: u64) -> Config {
    Config {
        frequency_ppm: 100.0,
        jitter_ns: 100.0,
        wander_ppb: 1.0,
        ntp: Some(NtpSource {
            poll: 64,
            delay_us: 100.0,
            constant: 2,
        }),
        ..Config::new(seed, 6 * 3_600)
    }
}

/// NTP: offsets every 64 s with 100 µs exponential delays each way, from a
/// 100 ppm offset, through `ntp_adjtime`'s PLL at time constant 2 (what
/// ntpd sets at that poll), for six hours.
pub fn ntp(seed: u64) -> Vec<Row> {
    let trace = run(&ntp_config(seed));
    let us = |e: &[f64]| rms(e) / 1e3;
    let steady = us(&trace.ours_ns[SETTLING..]);
    let mut acquisition = Row::new(
        "ntp",
        "RMS phase error over all six hours, from 100 ppm, µs",
        Some(us(&trace.ours_ns)),
        "none: the PLL's acquisition",
        f64::INFINITY,
    );
    acquisition.bound = None;
    vec![
        Row::new(
            "ntp",
            "RMS phase error after the first hour, µs",
            Some(steady),
            format!(
                "≤ {} (2 × chrony's {CHRONY_NTP_RMS_US})",
                2.0 * CHRONY_NTP_RMS_US
            ),
            2.0 * CHRONY_NTP_RMS_US,
        ),
        acquisition,
        backward("ntp", &trace),
    ]
}
