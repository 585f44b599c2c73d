//! The scenarios of the targets table: each runs the simulation and turns
//! its traces into rows (ours, the `hardpps` model, the limit or target),
//! each with whether ours meets its target.

use serde::Serialize;

use crate::limit::{holdover, limit};
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
    /// The `hardpps` model's figure, where it applies.
    pub model: Option<f64>,
    /// The physical limit, where there is one.
    pub limit: Option<f64>,
    /// The target ours is held to.
    pub target: String,
    /// Whether ours meets it.
    pub met: bool,
}

/// The scenarios by name, for the command line.
pub const NAMES: [&str; 4] = ["acquire", "steady", "robust", "ntp"];

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
        "ntp" => Ok(ntp(seed)),
        _ => Err(unknown(name)),
    }
}

/// The trace of scenario `name`'s main run, for a plot: acquisition, the
/// steady state at σ = 100 ns and w = 1 ppb/√s, robustness with
/// everything, NTP.
///
/// # Errors
/// A scenario name that is not one of [`NAMES`], named in the message.
pub fn trace(name: &str, seed: u64, hours: u64) -> Result<Trace, String> {
    let config = match name {
        "acquire" => acquire_config(seed),
        "steady" => steady_config(seed + 2, 100.0, 1.0, hours),
        "robust" => robust_configs(seed, 1.0).1,
        "ntp" => ntp_config(seed),
        _ => return Err(unknown(name)),
    };
    Ok(run(&config))
}

/// The error for a scenario that does not exist.
fn unknown(name: &str) -> String {
    format!("no scenario {name:?}: choose one of {}", NAMES.join(", "))
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

/// Acquisition: 100 ppm fast, 300 µs ahead, σ = 100 ns, w = 1 ppb/√s, for
/// ten minutes.
pub fn acquire(seed: u64) -> Vec<Row> {
    let trace = run(&acquire_config(seed));
    let lock = |e: &[f64]| settles(e, 1_000.0);
    // The frequency error from 120 s on: RMS, as a single second's error
    // is a draw (the optimal estimate's own deviation is a few ppb).
    let frequency = |f: &[f64]| rms(&f[120..]);
    let ours_lock = lock(&trace.ours_ns);
    let ours_frequency = frequency(&trace.ours_frequency_ppb);
    vec![
        Row {
            scenario: "acquire",
            metric: "time to |phase| < 1 µs for good, s".into(),
            ours: ours_lock,
            model: lock(&trace.model_ns),
            limit: None,
            target: "≤ 20".into(),
            met: ours_lock.is_some_and(|s| s <= 20.0),
        },
        Row {
            scenario: "acquire",
            metric: "RMS frequency error from 120 s on, ppb".into(),
            ours: Some(ours_frequency),
            model: Some(frequency(&trace.model_frequency_ppb)),
            limit: None,
            target: "< 10".into(),
            met: ours_frequency < 10.0,
        },
        backward("acquire", &trace),
    ]
}

/// The run's backward steps as a row (the target is none).
fn backward(scenario: &'static str, trace: &Trace) -> Row {
    Row {
        scenario,
        metric: "reads that stepped back".into(),
        ours: Some(trace.backward_steps as f64),
        model: None,
        limit: None,
        target: "0".into(),
        met: trace.backward_steps == 0,
    }
}

/// The steady-state cases: σ (ns) and w (ppb/√s).
pub const STEADY: [(f64, f64); 4] = [(1_000.0, 1.0), (1_000.0, 10.0), (100.0, 1.0), (100.0, 10.0)];

/// The first hour, left out of the steady state: `hardpps` needs about
/// 1000 s to reach its longest interval.
const SETTLING: usize = 3_600;

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
        let (ours, model) = (&trace.ours_ns[SETTLING..], &trace.model_ns[SETTLING..]);
        let bound = limit(sigma, wander);
        let (ours_rms, ours_max) = (rms(ours), max_abs(ours));
        let name = format!("σ = {sigma} ns, w = {wander} ppb/√s");
        rows.push(Row {
            scenario: "steady",
            metric: format!("RMS phase error, ns ({name})"),
            ours: Some(ours_rms),
            model: Some(rms(model)),
            limit: Some(bound),
            target: format!("≤ {:.0} (1.25 × limit)", 1.25 * bound),
            met: ours_rms <= 1.25 * bound,
        });
        rows.push(Row {
            scenario: "steady",
            metric: format!("maximum phase error, ns ({name})"),
            ours: Some(ours_max),
            model: Some(max_abs(model)),
            limit: None,
            target: format!("≤ {:.0} (5 × RMS)", 5.0 * ours_rms),
            met: ours_max <= 5.0 * ours_rms,
        });
        rows.push(backward("steady", &trace));
    }
    rows
}

/// The robustness scenario's outage and step, s from the start.
const OUTAGE: u64 = 2_400;
const STEP: u64 = 3_600;

/// The robustness scenario's runs at wander `wander` (ppb/√s): clean,
/// and with everything.
fn robust_configs(seed: u64, wander: f64) -> (Config, Config) {
    let clean = Config {
        jitter_ns: 100.0,
        wander_ppb: wander,
        frequency_ppm: 10.0,
        ..Config::new(seed, 5_400)
    };
    let dirty = Config {
        outliers: 0.01,
        outlier_us: 50.0,
        drops: 0.02,
        outage: Some((OUTAGE, OUTAGE_LEN)),
        step: Some((STEP, 1.0)),
        ..clean.clone()
    };
    (clean, dirty)
}

/// How long the outage lasts, s.
const OUTAGE_LEN: u64 = 60;

/// Robustness, over an hour and a half at σ = 100 ns, w = 1 ppb/√s (as
/// acquisition): outliers and drops against a clean run on the same seed,
/// then a 60 s outage, then a +1 ppm frequency step; and the outage again
/// at w = 0.1 ppb/√s. At 1 ppb/√s no clock can promise 0.5 µs after a
/// minute without pulses: the best prediction's RMS error is 366 ns there
/// (the limit column), so a run misses it about one time in six, whatever
/// the discipline; at 0.1 ppb/√s the limit is 63 ns.
pub fn robust(seed: u64) -> Vec<Row> {
    let (clean, dirty) = robust_configs(seed, 1.0);
    let (clean, dirty) = (run(&clean), run(&dirty));
    // Outliers and drops alone: from the end of the first settling to the
    // outage.
    let window = |e: &[f64]| rms(&e[1_200..OUTAGE as usize]);
    let extra = |c: &[f64], d: &[f64]| window(d) - window(c);
    let ours_extra = extra(&clean.ours_ns, &dirty.ours_ns);
    let recovery = |e: &[f64]| settles(&e[STEP as usize..], 1_000.0);
    let ours_recovery = recovery(&dirty.ours_ns);
    let mut rows = vec![Row {
        scenario: "robust",
        metric: "extra RMS from 1 % outliers (50 µs) and 2 % drops, ns".into(),
        ours: Some(ours_extra),
        model: Some(extra(&clean.model_ns, &dirty.model_ns)),
        limit: None,
        target: "< 50".into(),
        met: ours_extra < 50.0,
    }];
    let quiet = run(&robust_configs(seed, 0.1).1);
    for (wander, trace) in [(1.0, &dirty), (0.1, &quiet)] {
        // The last second without a pulse, at its middle.
        let end = |e: &[f64]| e[(OUTAGE + OUTAGE_LEN - 1) as usize].abs();
        let ours = end(&trace.ours_ns);
        rows.push(Row {
            scenario: "robust",
            metric: format!("error at the end of a 60 s outage, ns (w = {wander} ppb/√s)"),
            ours: Some(ours),
            model: Some(end(&trace.model_ns)),
            limit: Some(holdover(100.0, wander, OUTAGE_LEN)),
            target: "≤ 500".into(),
            met: ours <= 500.0,
        });
    }
    rows.push(Row {
        scenario: "robust",
        metric: "time back under 1 µs after a +1 ppm step, s".into(),
        ours: ours_recovery,
        model: recovery(&dirty.model_ns),
        limit: None,
        target: "≤ 30".into(),
        met: ours_recovery.is_some_and(|s| s <= 30.0),
    });
    rows.push(backward("robust", &dirty));
    rows
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
    vec![
        Row {
            scenario: "ntp",
            metric: "RMS phase error after the first hour, µs".into(),
            ours: Some(steady),
            model: None,
            limit: None,
            target: format!(
                "≤ {} (2 × chrony's {CHRONY_NTP_RMS_US})",
                2.0 * CHRONY_NTP_RMS_US
            ),
            met: steady <= 2.0 * CHRONY_NTP_RMS_US,
        },
        Row {
            scenario: "ntp",
            metric: "RMS phase error over all six hours, from 100 ppm, µs".into(),
            ours: Some(us(&trace.ours_ns)),
            model: None,
            limit: None,
            target: "none: the PLL's acquisition".into(),
            met: true,
        },
        backward("ntp", &trace),
    ]
}
