//! `timehands report`, the command's default: the verdict first (the clock to
//! use here, its cost against the kernel's and std's, its measured error),
//! then what the clock runs on (the facts of `info`), what every clock costs
//! and how far each of ours is from the kernel's clock of the same name. It
//! takes a few seconds.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::bracket::{self, Offset};
use crate::clocks::{Clock, Family};
use crate::info::Facts;
use crate::output::{self, OutFile};
use crate::plot::{self, Bar, Bars};
use crate::rounds::{self, Cost, Plan};
use crate::verdict::{self, Verdict};
use plotters::style::RGBColor;

/// The longest the cost rounds may take: the report ends in under 15 s even
/// on a machine so busy that most rounds are preempted and taken again (on
/// a quiet one all of them take about a second).
const COST_BUDGET: Duration = Duration::from_secs(10);

/// Flags of `timehands report`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  timehands                          the report (the same as `timehands report`)
  timehands report --json | jq '.cost[] | {clock, median: .ns_per_call.median}'
  timehands report --out report/     also report/index.html with SVG plots")]
pub struct Args {
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write cost.svg, accuracy.svg and an index.html showing them (and
    /// the text report) into this directory, created if missing.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Rounds kept per clock (fewer if they take over 10 s).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=rounds::MAX_ROUNDS), allow_negative_numbers = true)]
    pub rounds: u32,
    /// Calls per round.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=rounds::MAX_CALLS), allow_negative_numbers = true)]
    pub calls: u64,
    /// Brackets per accuracy comparison; the narrowest is kept.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000), allow_negative_numbers = true)]
    pub brackets: u32,
}

/// The whole report, as JSON names it.
#[derive(Serialize)]
struct Report {
    /// `None` when a clock of the three it weighs could not be measured.
    verdict: Option<Verdict>,
    info: Facts,
    rounds: u32,
    calls: u64,
    cost: Vec<Cost>,
    accuracy: Vec<Accuracy>,
}

/// One of our clocks against its kernel twin.
#[derive(Serialize)]
struct Accuracy {
    clock: String,
    label: String,
    against: String,
    /// Whether both read the value at a tick (the last windup, the kernel's
    /// last timer interrupt) rather than the counter.
    coarse: bool,
    #[serde(flatten)]
    offset: Offset,
}

/// Runs `timehands report`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let out = match &args.out {
        Some(dir) => {
            output::create_dir(dir)?;
            Some(Files {
                cost: OutFile::create(&dir.join("cost.svg"))?,
                accuracy: OutFile::create(&dir.join("accuracy.svg"))?,
                html: OutFile::create(&dir.join("index.html"))?,
            })
        }
        None => None,
    };
    let clocks = Clock::every_here();
    let plan = Plan {
        rounds: args.rounds as usize,
        calls: args.calls,
        budget: Some(COST_BUDGET),
    };
    let measured = rounds::measure(&clocks, plan)?;
    let accuracy: Vec<Accuracy> = clocks
        .iter()
        .filter_map(|&ours| {
            let kernel = ours.kernel_twin()?;
            Some(Accuracy {
                clock: ours.key(),
                label: ours.label().to_string(),
                against: kernel.label().to_string(),
                coarse: kernel.is_coarse(),
                offset: bracket::offset(ours, kernel, args.brackets as usize),
            })
        })
        .collect();
    // After the measurement, so that the steering has run a while.
    let info = Facts::gather();
    let cost: Vec<Cost> = measured.iter().filter_map(|r| r.cost(args.calls)).collect();
    let mut verdict = accuracy
        .iter()
        .find(|a| a.clock == Clock::Now.key())
        .and_then(|now| verdict::of(&cost, &now.offset, info.fallback()));
    if let Some(verdict) = &mut verdict {
        verdict.tell_clocksource(timehands::diagnostics::hw::kernel_clocksource().as_deref());
    }
    let report = Report {
        verdict,
        info,
        rounds: args.rounds,
        calls: args.calls,
        cost,
        accuracy,
    };
    let text = report.text();
    output::print_json_or_text(args.json, &report, |_| text.clone())?;
    if let Some(files) = out {
        files.write(&report, &text)?;
    }
    Ok(())
}

impl Report {
    fn text(&self) -> String {
        let mut text = String::new();
        if let Some(verdict) = &self.verdict {
            text.push_str(&wrap(&verdict.text, 78));
            text.push('\n');
        }
        let _ = writeln!(text, "{}", self.info);
        let _ = writeln!(
            text,
            "Cost: {} rounds of {} calls per clock, ns per call; {}",
            self.rounds,
            self.calls,
            rounds::KEPT
        );
        if self
            .cost
            .iter()
            .any(|c| c.ns_per_call.n < self.rounds as usize)
        {
            let _ = writeln!(
                text,
                "(the rounds stopped after {} s, with fewer kept than asked)",
                COST_BUDGET.as_secs()
            );
        }
        text.push_str(&rounds::table(&self.cost));
        let _ = writeln!(
            text,
            "\nAccuracy: ours minus the kernel clock of the same name, read between two reads of it (the narrowest bracket kept); exact to within half the bracket"
        );
        let _ = writeln!(
            text,
            "{:<34} {:<24} {:>14} {:>11}",
            "clock", "against", "offset ns", "bracket ns"
        );
        for a in &self.accuracy {
            let _ = write!(
                text,
                "{:<34} {:<24} {:>14} {:>11}",
                a.label, a.against, a.offset.offset_ns, a.offset.bracket_ns
            );
            if a.coarse {
                text.push_str(
                    "  (coarse: each is its last tick's time, up to a tick behind by design)",
                );
            }
            text.push('\n');
        }
        text
    }
}

/// The files of `--out`, created before the measurement.
struct Files {
    cost: OutFile,
    accuracy: OutFile,
    html: OutFile,
}

impl Files {
    fn write(&self, report: &Report, text: &str) -> anyhow::Result<()> {
        let cost = Bars {
            title: "Cost per call (bar: median; whisker: min to max over the rounds)".into(),
            x: "ns per call".into(),
            bars: report
                .cost
                .iter()
                .map(|c| Bar {
                    name: c.label.clone(),
                    value: c.ns_per_call.median,
                    low: c.ns_per_call.min,
                    high: c.ns_per_call.max,
                    group: family_of(&c.clock).index(),
                })
                .collect(),
            groups: family_names(),
        };
        self.cost.write(&plot::bars(&[cost])?)?;
        // The coarse clocks differ by up to a tick, a million times what the
        // precise ones do: each kind gets its own scale.
        let accuracy = |coarse: bool, title: &str| Bars {
            title: title.into(),
            x: "ours minus the kernel's, ns".into(),
            bars: report
                .accuracy
                .iter()
                .filter(|a| a.coarse == coarse)
                .map(|a| {
                    let offset = a.offset.offset_ns as f64;
                    let half = a.offset.bracket_ns as f64 / 2.0;
                    Bar {
                        name: format!("{} - {}", a.label, a.against),
                        value: offset,
                        low: offset - half,
                        high: offset + half,
                        group: family_of(&a.clock).index(),
                    }
                })
                .collect(),
            groups: family_names(),
        };
        self.accuracy.write(&plot::bars(&[
            accuracy(
                false,
                "Offset from the kernel's clock (whisker: the bracket)",
            ),
            accuracy(true, "Coarse clocks: offset from the kernel's coarse clock"),
        ])?)?;
        self.html.write(&html(report.verdict.as_ref(), text))
    }
}

/// The family of the clock `--clocks` names `key` (the kernel's for a name
/// it does not know, which cannot come from a measurement).
fn family_of(key: &str) -> Family {
    Clock::from_key(key).map_or(Family::Kernel, Clock::family)
}

/// The plots' groups: the families' names, in their order.
fn family_names() -> Vec<String> {
    Family::ALL.iter().map(|f| f.name().to_string()).collect()
}

/// The report's page: the verdict first, a key of the plots' colours, the
/// plots, then the text report.
fn html(verdict: Option<&Verdict>, text: &str) -> String {
    let verdict = verdict.map_or_else(
        || {
            "<p class=\"verdict\">No verdict: a clock it weighs could not be measured.</p>"
                .to_string()
        },
        |v| {
            format!(
                "<p class=\"verdict\" id=\"verdict\">{}</p>",
                escape_html(&v.text)
            )
        },
    );
    let key: String = Family::ALL
        .iter()
        .map(|f| {
            let RGBColor(r, g, b) = plot::GROUP_COLOURS[f.index()];
            format!(
                "<li><span class=\"swatch\" style=\"background: rgb({r}, {g}, {b})\"></span>{}</li>",
                escape_html(f.name())
            )
        })
        .collect();
    format!(
        "<!DOCTYPE html>
<html lang=\"en\">
<head><meta charset=\"utf-8\"><title>timehands report</title>
<style>
body {{ font-family: sans-serif; max-width: 920px; margin: 1em auto; }}
.verdict {{ font-size: 1.3em; line-height: 1.4; padding: 0.6em 0.9em; border-left: 6px solid rgb(31, 119, 180); background: #f3f7fb; }}
ul.key {{ list-style: none; padding: 0; }}
ul.key li {{ display: inline-block; margin-right: 1.5em; }}
.swatch {{ display: inline-block; width: 1em; height: 1em; margin-right: 0.4em; vertical-align: middle; }}
</style></head>
<body>
<h1>timehands report</h1>
{verdict}
<ul class=\"key\" id=\"key\">{key}</ul>
<img src=\"cost.svg\" alt=\"cost per call of every clock\">
<img src=\"accuracy.svg\" alt=\"offset of each of our clocks from the kernel's\">
<pre>
{}</pre>
</body>
</html>
",
        escape_html(text)
    )
}

/// `text` broken into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> String {
    let mut lines = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push_str(&line);
            lines.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push_str(&line);
        lines.push('\n');
    }
    lines
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_breaks_at_spaces_within_the_width() {
        assert_eq!(wrap("aa bb cc dd", 5), "aa bb\ncc dd\n");
        assert_eq!(wrap("a verylongword b", 4), "a\nverylongword\nb\n");
        assert_eq!(wrap("", 10), "");
    }
}
