//! `timehands discipline`: the engine's PPS discipline and NTP control in
//! the simulator (`timehands-sim`), scenario by scenario, each figure beside
//! the `hardpps` model's and the physical limit, and whether the target is
//! met; optionally the phase error over time as an SVG.

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
  timehands discipline --scenario steady --hours 2 --seed 7 --json")]
pub struct Args {
    /// The scenario: acquire, steady, robust, ntp, or all.
    #[arg(long, default_value = "all")]
    pub scenario: String,
    /// The simulation's seed: the same seed, the same figures.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Hours of steady state after the first (the targets: 24).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=240))]
    pub hours: u64,
    /// Print one JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the phase error over time (ours and the hardpps model) of the
    /// scenario's main run to this SVG file (a single scenario only).
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

/// Runs `timehands discipline`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let names: Vec<&str> = match args.scenario.as_str() {
        "all" => NAMES.to_vec(),
        name => vec![name],
    };
    let svg = match &args.svg {
        Some(_) if names.len() > 1 => {
            anyhow::bail!("--svg plots one scenario: add --scenario acquire, steady, robust or ntp")
        }
        Some(path) => Some(OutFile::create(path)?),
        None => None,
    };
    let mut rows = Vec::new();
    for name in &names {
        rows.extend(scenario::rows(name, args.seed, args.hours).map_err(anyhow::Error::msg)?);
    }
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
    output::print_json_or_text(args.json, &run, Run::text)
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
        series.push(line("hardpps model", &trace.model_ns));
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
    /// The table, one row a figure.
    fn text(&self) -> String {
        let figure = |value: Option<f64>| match value {
            None => "never".to_string(),
            Some(v) if v.abs() >= 100.0 || v.fract() == 0.0 => format!("{v:.0}"),
            Some(v) => format!("{v:.1}"),
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<8} {:<62} {:>10} {:>10} {:>8}  {:<26} met",
            "scenario", "metric", "ours", "hardpps", "limit", "target"
        );
        for row in &self.rows {
            let model = row.model.map_or("-".into(), |m| figure(Some(m)));
            let limit = row.limit.map_or("-".into(), |l| figure(Some(l)));
            let _ = writeln!(
                out,
                "{:<8} {:<62} {:>10} {:>10} {:>8}  {:<26} {}",
                row.scenario,
                row.metric,
                figure(row.ours),
                model,
                limit,
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
