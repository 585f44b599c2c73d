//! `timehands discipline`: the engine's PPS discipline and NTP control in
//! the simulator (`timehands-sim`), scenario by scenario, each figure beside
//! the oracle's on the same draws, the `hardpps` model's (at its default and
//! its best tuning), chrony's PPS refclock model's and the physical limit,
//! and whether the target is met;
//! over a range of seeds, how many met each target and the worst; a missed
//! target is a non-zero exit that names the seed. Optionally the phase
//! error over time as an SVG.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use timehands_sim::scenario::{self, NAMES, Row};

use crate::output::{self, OutFile};
use crate::plot::{self, Chart, Series};

/// Flags of `timehands discipline`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  timehands discipline                        every scenario, seed 1, a 24-hour steady state
  timehands discipline --scenario acquire --svg acquire.svg
  timehands discipline --scenario steady --hours 2 --seed 7 --json
  timehands discipline --seeds 1..50          every scenario on 50 seeds: each target's tally and worst seed")]
pub struct Args {
    /// The scenario: acquire, steady, robust, receiver, ntp, or all.
    #[arg(long, default_value = "all")]
    pub scenario: String,
    /// The simulation's seed: the same seed, the same figures.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run every seed of FIRST..LAST (inclusive), and print per target how
    /// many met it and the worst seed.
    #[arg(long, value_name = "FIRST..LAST", value_parser = parse_seeds, conflicts_with_all = ["seed", "svg"])]
    pub seeds: Option<(u64, u64)>,
    /// Hours of steady state after the first (the targets: 24).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=240))]
    pub hours: u64,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the phase error over time (ours, the oracle's, the hardpps
    /// model's and chrony's) of the scenario's main run to this SVG file (a
    /// single scenario only).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// The run, as JSON names it.
#[derive(Serialize)]
struct Run {
    seed: u64,
    hours: u64,
    met: bool,
    rows: Vec<Row>,
}

/// Runs over a range of seeds, as JSON names them.
#[derive(Serialize)]
struct Seeds {
    first: u64,
    last: u64,
    hours: u64,
    met: bool,
    targets: Vec<Tally>,
}

/// One target over the seeds: how many met it, which did not, the worst.
#[derive(Serialize)]
struct Tally {
    scenario: &'static str,
    metric: String,
    seeds: usize,
    met: usize,
    missed_seeds: Vec<u64>,
    worst_seed: u64,
    /// The worst seed's row.
    worst: Row,
}

/// `FIRST..LAST` (or one seed), for `--seeds`.
fn parse_seeds(text: &str) -> Result<(u64, u64), String> {
    let number = |part: &str| {
        part.trim()
            .parse::<u64>()
            .map_err(|_| format!("{part:?} is not a seed: give FIRST..LAST, as 1..50"))
    };
    let (first, last) = match text.split_once("..") {
        Some((first, last)) => (number(first)?, number(last)?),
        None => (number(text)?, number(text)?),
    };
    if first > last {
        return Err(format!(
            "{first}..{last} is empty: give FIRST..LAST with FIRST ≤ LAST"
        ));
    }
    Ok((first, last))
}

/// How far a row is from its target: its figure over its bound (the
/// figure itself against a bound of 0), infinite when never reached, and
/// lowest without a target.
fn shortfall(row: &Row) -> f64 {
    match (row.ours, row.bound) {
        (None, _) => f64::INFINITY,
        (Some(_), None) => f64::NEG_INFINITY,
        (Some(ours), Some(bound)) if bound > 0.0 => ours / bound,
        (Some(ours), Some(_)) => ours,
    }
}

/// Runs `timehands discipline`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let names: Vec<&str> = match args.scenario.as_str() {
        "all" => NAMES.to_vec(),
        name => vec![name],
    };
    let svg = match &args.svg {
        Some(_) if names.len() > 1 => {
            anyhow::bail!(
                "--svg plots one scenario: add --scenario {}",
                NAMES.join(", ")
            )
        }
        Some(path) => Some(OutFile::create(path)?),
        None => None,
    };
    if let Some((first, last)) = args.seeds {
        return over_seeds(args, &names, first, last);
    }
    let rows = scenario_rows(&names, args.seed, args.hours)?;
    if let Some(file) = svg {
        let trace = scenario::trace(names[0], args.seed, args.hours).map_err(anyhow::Error::msg)?;
        file.write(&plot::lines(&[chart(names[0], &trace)])?)?;
    }
    let run = Run {
        seed: args.seed,
        hours: args.hours,
        met: rows.iter().all(|row| row.met),
        rows,
    };
    output::print_json_or_text(args.json, &run, Run::text)?;
    match run.missed() {
        Some(missed) => anyhow::bail!(missed),
        None => Ok(()),
    }
}

/// Every row of the scenarios `names` on `seed`.
fn scenario_rows(names: &[&str], seed: u64, hours: u64) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for name in names {
        rows.extend(scenario::rows(name, seed, hours).map_err(anyhow::Error::msg)?);
    }
    Ok(rows)
}

/// The scenarios on every seed of `first..=last`: a tally per target.
fn over_seeds(args: &Args, names: &[&str], first: u64, last: u64) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for seed in first..=last {
        runs.push((seed, scenario_rows(names, seed, args.hours)?));
    }
    let targets = tally(runs);
    let seeds = Seeds {
        first,
        last,
        hours: args.hours,
        met: targets.iter().all(|tally| tally.missed_seeds.is_empty()),
        targets,
    };
    output::print_json_or_text(args.json, &seeds, Seeds::text)?;
    match seeds.missed() {
        Some(missed) => anyhow::bail!(missed),
        None => Ok(()),
    }
}

/// Each target's tally over the seeds' rows (every seed gives the same rows
/// in the same order).
fn tally(runs: impl IntoIterator<Item = (u64, Vec<Row>)>) -> Vec<Tally> {
    let mut targets: Vec<Tally> = Vec::new();
    for (seed, rows) in runs {
        for (at, row) in rows.into_iter().enumerate() {
            if at == targets.len() {
                targets.push(Tally {
                    scenario: row.scenario,
                    metric: row.metric.clone(),
                    seeds: 0,
                    met: 0,
                    missed_seeds: Vec::new(),
                    worst_seed: seed,
                    worst: row.clone(),
                });
            }
            let tally = &mut targets[at];
            tally.seeds += 1;
            tally.met += row.met as usize;
            if !row.met {
                tally.missed_seeds.push(seed);
            }
            if shortfall(&row) > shortfall(&tally.worst) {
                (tally.worst_seed, tally.worst) = (seed, row);
            }
        }
    }
    targets
}

/// At most this many points a line: a day is decimated.
const POINTS: usize = 600;

/// The phase error of both clocks over time, in µs.
fn chart(name: &str, trace: &timehands_sim::Trace) -> Chart {
    let line = |name: &str, errors: &[f64]| Series {
        name: name.into(),
        points: errors
            .iter()
            .enumerate()
            .step_by(errors.len().div_ceil(POINTS).max(1))
            .map(|(second, error)| (second as f64, error / 1e3))
            .collect(),
    };
    let mut series = vec![line("timehands", &trace.ours_ns)];
    if name != "ntp" {
        series.push(line("oracle", &trace.oracle_ns));
        series.push(line("hardpps model", &trace.model_ns));
        series.push(line("chrony model", &trace.chrony_ns));
    }
    Chart {
        title: format!("{name}: phase error against true time"),
        x: "s".into(),
        y: "µs".into(),
        whole_x: false,
        series,
    }
}

impl Run {
    /// The targets missed, in one line that names the seed; `None` when
    /// every one is met.
    fn missed(&self) -> Option<String> {
        let missed: Vec<&str> = self
            .rows
            .iter()
            .filter(|row| !row.met)
            .map(|row| row.metric.as_str())
            .collect();
        (!missed.is_empty()).then(|| format!("seed {}: missed {}", self.seed, missed.join("; ")))
    }

    /// The table, one row a figure.
    fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<8} {:<66} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {:<28} met",
            "scenario", "metric", "ours", "oracle", "hardpps", "best", "chrony", "limit", "target"
        );
        for row in &self.rows {
            let column = |value: Option<f64>| value.map_or("-".into(), |v| figure(Some(v)));
            let _ = writeln!(
                out,
                "{:<8} {:<66} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {:<28} {}",
                row.scenario,
                row.metric,
                figure(row.ours),
                column(row.oracle),
                column(row.model),
                column(row.tuned),
                column(row.chrony),
                column(row.limit),
                row.target,
                if row.met { "yes" } else { "NO" }
            );
        }
        let met = self.rows.iter().filter(|row| row.met).count();
        let _ = writeln!(
            out,
            "seed {}: {met} of {} targets met",
            self.seed,
            self.rows.len()
        );
        out
    }
}

/// A figure as the tables print it: "never" for none, whole from 100 on.
fn figure(value: Option<f64>) -> String {
    match value {
        None => "never".to_string(),
        Some(v) if v.abs() >= 100.0 || v.fract() == 0.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

impl Seeds {
    /// The targets missed, in one line that names each one's seeds;
    /// `None` when every one is met on every seed.
    fn missed(&self) -> Option<String> {
        let missed: Vec<String> = self
            .targets
            .iter()
            .filter(|tally| !tally.missed_seeds.is_empty())
            .map(|tally| {
                let list: Vec<String> = tally.missed_seeds.iter().map(u64::to_string).collect();
                format!("{} on seed {}", tally.metric, list.join(", "))
            })
            .collect();
        (!missed.is_empty()).then(|| format!("missed {}", missed.join("; ")))
    }

    /// The tally, one row a target.
    fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<8} {:<66} {:>7} {:>6} {:>8} {:>8}  {:<28}",
            "scenario", "metric", "met", "worst", "ours", "oracle", "its target"
        );
        for tally in &self.targets {
            let worst = &tally.worst;
            let _ = writeln!(
                out,
                "{:<8} {:<66} {:>7} {:>6} {:>8} {:>8}  {:<28}",
                tally.scenario,
                tally.metric,
                format!("{}/{}", tally.met, tally.seeds),
                tally.worst_seed,
                figure(worst.ours),
                worst.oracle.map_or("-".into(), |o| figure(Some(o))),
                worst.target,
            );
        }
        let met = self
            .targets
            .iter()
            .filter(|t| t.missed_seeds.is_empty())
            .count();
        let _ = writeln!(
            out,
            "seeds {}..{}: {met} of {} targets met on every seed",
            self.first,
            self.last,
            self.targets.len()
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of `metric` with figure `ours` against a bound of 10.
    fn row(metric: &str, ours: f64) -> Row {
        Row {
            scenario: "acquire",
            metric: metric.to_string(),
            ours: Some(ours),
            oracle: None,
            model: None,
            tuned: None,
            chrony: None,
            limit: None,
            target: "≤ 10".to_string(),
            bound: Some(10.0),
            met: ours <= 10.0,
        }
    }

    /// A target missed on some seeds is tallied with those seeds, its worst
    /// seed the furthest from the bound, and named with them in one line;
    /// a run that meets every target has nothing to say.
    #[test]
    fn a_missed_target_is_named_with_its_seeds() {
        let runs = (1..=4).map(|seed| {
            let late = [3.0, 12.0, 4.0, 30.0][seed as usize - 1];
            (seed, vec![row("time", 1.0), row("error, ns", late)])
        });
        let targets = tally(runs);
        assert_eq!(
            targets.iter().map(|t| (t.met, t.seeds)).collect::<Vec<_>>(),
            [(4, 4), (2, 4)]
        );
        assert_eq!(targets[1].missed_seeds, [2, 4]);
        assert_eq!(targets[1].worst_seed, 4);
        let seeds = Seeds {
            first: 1,
            last: 4,
            hours: 24,
            met: false,
            targets,
        };
        assert_eq!(
            seeds.missed().as_deref(),
            Some("missed error, ns on seed 2, 4")
        );
        let run = |ours| Run {
            seed: 7,
            hours: 24,
            met: false,
            rows: vec![row("time", 1.0), row("error, ns", ours)],
        };
        assert_eq!(
            run(11.0).missed().as_deref(),
            Some("seed 7: missed error, ns")
        );
        assert_eq!(run(9.0).missed(), None);
    }
}
