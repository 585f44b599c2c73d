//! `timehands stat`: ministat, the statistics tool of FreeBSD benchmarks.
//!
//! Each file is a data set, one number a line ([`input`]). The output is
//! ministat's, byte for byte on the same input (the fixtures under
//! `tests/fixtures/ministat/` are Debian's ministat 20150715 run on them):
//!
//! 1. a legend: the symbol of each set (`x + * % # @ O`) and its name;
//! 2. the ASCII plot of all sets on one axis ([`plot`]);
//! 3. a table of N, Min, Max, Median, Avg and Stddev ([`sample`]), every
//!    number as C's `%13.8g` ([`c_format`]);
//! 4. under each set after the first, Student's t test against the first
//!    ([`student`]): "No difference proven", or the difference of the means
//!    ± the margin, both also in percent of the first set's mean, and the
//!    pooled standard deviation.
//!
//! `-q` is FreeBSD's later flag (Debian's ministat predates it): no legend
//! and no header over the table.
//!
//! Past ministat, behind flags it does not have ([`beyond`]): percentiles
//! (`--percentiles`), Welch's t test (`--welch`) and the Mann-Whitney U test
//! (`--mann-whitney`), printed after ministat's output, which stays as it
//! is; and `--json`, one document with all of it instead of text.
//!
//! Where this departs from ministat, for answers that can be trusted or
//! errors that say more, the module that does it says why: the variance
//! ([`sample`]), `inf`/`nan`/hex input ([`input`]), a plot narrower than two
//! columns (refused here; ministat crashes), `COLUMNS` (less the border, as
//! the window's width is; ministat takes it whole), and the errors, which
//! are one line naming the file (and line) with a non-zero exit.

mod beyond;
mod c_format;
mod input;
mod plot;
mod sample;
mod student;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::output;
use beyond::{MannWhitney, PairTest, Welch};
use input::{Columns, read_sample};
use sample::Sample;
use student::{Comparison, Confidence};

/// The symbol of each data set, from the second byte on; the first is the
/// empty cell of the plot. Sets overlapping in a cell OR their indices.
const SYMBOLS: [u8; 8] = *b" x+*%#@O";

/// The most data sets one run compares.
const MAX_SETS: usize = SYMBOLS.len() - 1;

/// The plot's width when standard output is not a terminal.
const DEFAULT_WIDTH: usize = 74;

const EXAMPLES: &str = "\
Examples:
  timehands stat before.txt after.txt
      plot both, summarize both, and test whether after differs from before
  timehands stat -c 99.5 -s -w 60 head.dat patch.dat
      at 99.5% confidence, bars on separate lines, a 60-column plot
  timehands stat -A -C 2 -d , runs.csv
      the second comma-separated column, statistics without the plot
  timehands stat -n -q a.txt b.txt
      only the rows of the statistics table
  seq 1 100 | timehands stat
      a set from standard input
  timehands stat --percentiles 50,99 --welch --mann-whitney a.txt b.txt
      ministat's output, then percentiles and two more tests
  timehands stat --json a.txt b.txt | jq '.comparisons[0].student.proven'

Files hold one number a line (in the column -C, fields split at any byte of
-d); blank lines and fields from a `#` on are skipped. At least 3 numbers a
set, at most 7 sets. Note: like ministat, -c 99.5 uses the t value of 99.8%
(Welch's and Mann-Whitney's tests take 99.5% as it is).";

/// Flags of `timehands stat`: ministat's, which may be combined (`-As`) and
/// take their values attached or apart (`-c95`, `-c 95`).
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Statistics and comparisons only, no plot.
    #[arg(short = 'A', long = "no-plot")]
    pub no_plot: bool,

    /// The column of each line to read, counted from 1.
    #[arg(short = 'C', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub column: u32,

    /// Confidence level of Student's t test: 80, 90, 95, 98, 99 or 99.5.
    #[arg(short = 'c', long, default_value = "95", value_parser = parse_confidence)]
    pub confidence: Confidence,

    /// Field delimiters: any of these bytes separates fields.
    #[arg(short = 'd', long = "delimiters", default_value = " \t", value_parser = parse_delimiters)]
    pub delimiters: String,

    /// Summary statistics only: no plot, no comparison.
    #[arg(short = 'n', long = "summary-only")]
    pub summary_only: bool,

    /// No legend of the data sets and no header over the statistics.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Each set's mean/median/stddev bar on its own line of the plot.
    #[arg(short = 's', long = "separate-bars")]
    pub separate_bars: bool,

    /// Width of the plot in columns, at least 2 [default: 74, or the
    /// terminal's width less 2].
    #[arg(short = 'w', long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u16).range(2..))]
    pub width: Option<u16>,

    /// Also print these percentiles of each set (0 to 100, separated by
    /// commas), by definition 7 (R's and NumPy's default).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_percentile)]
    pub percentiles: Vec<f64>,

    /// Also test each set against the first with Welch's t test (unequal
    /// variances).
    #[arg(long)]
    pub welch: bool,

    /// Also test each set against the first with the Mann-Whitney U test (no
    /// assumption of normality).
    #[arg(long = "mann-whitney")]
    pub mann_whitney: bool,

    /// Print one JSON document (sets, percentiles, tests) instead of text.
    #[arg(long)]
    pub json: bool,

    /// Data files, one set each (at most 7); `-` or none reads standard input.
    pub files: Vec<PathBuf>,
}

fn parse_percentile(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..=100.0).contains(p))
        .ok_or_else(|| format!("bad percentile {text:?}: want a number from 0 to 100"))
}

fn parse_confidence(text: &str) -> Result<Confidence, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(Confidence::from_percent)
        .ok_or_else(|| "confidence must be one of 80, 90, 95, 98, 99, 99.5".to_string())
}

fn parse_delimiters(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("the delimiter string cannot be empty".to_string());
    }
    Ok(text.to_string())
}

/// Reads the data sets, then prints the legend, plot, statistics and tests.
pub fn run(args: &Args) -> Result<()> {
    let samples = read_samples(args)?;
    if args.json {
        return output::print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&document(&samples, args))?
        ));
    }
    let width = match args.width {
        Some(w) => usize::from(w),
        None => terminal_width().unwrap_or(DEFAULT_WIDTH),
    };
    output::print(&format!(
        "{}{}",
        report(&samples, args, width),
        beyond_text(&samples, args)
    ))
}

/// Every data set the arguments name, in order.
fn read_samples(args: &Args) -> Result<Vec<Sample>> {
    if args.files.len() > MAX_SETS {
        bail!(
            "too many data sets: {} files, at most {MAX_SETS}",
            args.files.len()
        );
    }
    let columns = Columns {
        column: args.column as usize,
        delimiters: args.delimiters.as_bytes().to_vec(),
    };
    let stdin = || read_sample("<stdin>", std::io::stdin().lock(), &columns);
    if args.files.is_empty() {
        return Ok(vec![stdin()?]);
    }
    args.files
        .iter()
        .map(|path| {
            if path.as_os_str() == "-" {
                return stdin();
            }
            // Named as given; a name that is not UTF-8 is shown with its odd
            // bytes replaced.
            let name = path.to_string_lossy();
            let file = File::open(path).with_context(|| format!("cannot open {name}"))?;
            read_sample(&name, file, &columns)
        })
        .collect()
}

/// The width ministat takes from a terminal on standard output: `COLUMNS`,
/// else the window's width, less the two border columns.
fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .or_else(window_columns)?;
    plot_width(columns)
}

/// The plot's width in a terminal `columns` wide: less the border, at least
/// 2, and at most what `-w` takes (a `COLUMNS` of 10^11 asked the plot for
/// 100 GB).
fn plot_width(columns: usize) -> Option<usize> {
    let width = columns.checked_sub(2).filter(|&w| w >= 2)?;
    Some(width.min(usize::from(u16::MAX)))
}

/// The terminal window's width in columns, from `TIOCGWINSZ`.
#[cfg(unix)]
fn window_columns() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which
    // points to a live, writable `winsize`; on error it writes nothing.
    let status = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (status == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// The console window's width in columns, from `GetConsoleScreenBufferInfo`.
#[cfg(windows)]
fn window_columns() -> Option<usize> {
    use windows_sys::Win32::System::Console::{
        CONSOLE_SCREEN_BUFFER_INFO, GetConsoleScreenBufferInfo, GetStdHandle, STD_OUTPUT_HANDLE,
    };

    // SAFETY: all zeros is a valid value of the plain C struct.
    let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: the call writes one CONSOLE_SCREEN_BUFFER_INFO through the
    // pointer, which points to a live, writable one; a handle that is not a
    // console's fails the call, which then writes nothing.
    let read = unsafe { GetConsoleScreenBufferInfo(GetStdHandle(STD_OUTPUT_HANDLE), &mut info) };
    // The window's edges are both inside it.
    let columns = i32::from(info.srWindow.Right) - i32::from(info.srWindow.Left) + 1;
    (read != 0 && columns > 0).then_some(columns as usize)
}

/// ministat's output for `samples`.
fn report(samples: &[Sample], args: &Args, width: usize) -> String {
    let mut out = String::new();
    if !args.quiet {
        for (sample, symbol) in samples.iter().zip(&SYMBOLS[1..]) {
            out.push_str(&format!("{} {}\n", char::from(*symbol), sample.name()));
        }
    }
    if !args.summary_only && !args.no_plot {
        out.push_str(&plot::render(samples, width, args.separate_bars));
    }
    if !args.quiet {
        out.push_str(
            "    N           Min           Max        Median           Avg        Stddev\n",
        );
    }
    for (index, (sample, symbol)) in samples.iter().zip(&SYMBOLS[1..]).enumerate() {
        out.push_str(&summary_row(char::from(*symbol), sample));
        if index > 0 && !args.summary_only {
            let comparison = Comparison::new(sample, &samples[0], args.confidence);
            out.push_str(&verdict(&comparison, args.confidence));
        }
    }
    out
}

/// One row of the statistics table.
fn summary_row(symbol: char, s: &Sample) -> String {
    let cells: String = [s.min(), s.max(), s.median(), s.mean(), s.stddev()]
        .into_iter()
        .map(|v| format!(" {:>13}", c_format::g(v, 8)))
        .collect();
    format!("{symbol} {:3}{cells}\n", s.len())
}

/// The verdict of one t test, and the difference when it is proven.
fn verdict(c: &Comparison, confidence: Confidence) -> String {
    let g = |v: f64| c_format::g(v, 6);
    let level = confidence.percent();
    if c.proven() {
        format!(
            "Difference at {level:.1}% confidence\n\t{} +/- {}\n\t{}% +/- {}%\n\t(Student's t, pooled s = {})\n",
            g(c.difference),
            g(c.margin),
            g(c.difference * 100.0 / c.reference_mean),
            g(c.margin * 100.0 / c.reference_mean),
            g(c.pooled_stddev),
        )
    } else {
        format!("No difference proven at {level:.1}% confidence\n")
    }
}

/// The percentile `percent` of `sample`.
fn percentile(sample: &Sample, percent: f64) -> f64 {
    beyond::percentile(sample.points(), percent / 100.0)
}

/// Whether a p value proves a difference at `confidence` as labelled.
fn proven(p: f64, confidence: Confidence) -> bool {
    p < 1.0 - confidence.percent() / 100.0
}

/// What the flags past ministat's ask, after ministat's output: the
/// percentiles of each set, then each later set's tests against the first.
fn beyond_text(samples: &[Sample], args: &Args) -> String {
    let g = |v: f64| c_format::g(v, 6);
    let mut out = String::new();
    if !args.percentiles.is_empty() {
        out.push_str("Percentiles (definition 7, as R and NumPy):\n     ");
        for &p in &args.percentiles {
            out.push_str(&format!(" {:>13}", format!("p{}", g(p))));
        }
        out.push('\n');
        for (sample, symbol) in samples.iter().zip(&SYMBOLS[1..]) {
            out.push_str(&format!("{} {:3}", char::from(*symbol), sample.len()));
            for &p in &args.percentiles {
                out.push_str(&format!(" {:>13}", c_format::g(percentile(sample, p), 8)));
            }
            out.push('\n');
        }
    }
    if (!args.welch && !args.mann_whitney) || args.summary_only || samples.len() < 2 {
        return out;
    }
    out.push_str(&format!(
        "Against {} {}, at {:.1}% confidence:\n",
        char::from(SYMBOLS[1]),
        samples[0].name(),
        args.confidence.percent()
    ));
    for (sample, symbol) in samples.iter().zip(&SYMBOLS[1..]).skip(1) {
        for (test, proven) in pair_tests(sample, &samples[0], args).asked() {
            out.push_str(&format!(
                "{} {}, p {}: {}\n",
                char::from(*symbol),
                test.figures(),
                g(test.p()),
                if proven {
                    "difference proven"
                } else {
                    "no difference proven"
                }
            ));
        }
    }
    out
}

/// The tests past Student's that the flags ask, of `set` against
/// `reference`.
struct PairTests {
    welch: Option<Tested<Welch>>,
    mann_whitney: Option<Tested<MannWhitney>>,
}

impl PairTests {
    /// Each test asked, with its verdict, in the order the text prints them.
    fn asked(&self) -> Vec<(&dyn PairTest, bool)> {
        let welch = self
            .welch
            .as_ref()
            .map(|t| (&t.test as &dyn PairTest, t.proven));
        let mann_whitney = self
            .mann_whitney
            .as_ref()
            .map(|t| (&t.test as &dyn PairTest, t.proven));
        [welch, mann_whitney].into_iter().flatten().collect()
    }
}

fn pair_tests(set: &Sample, reference: &Sample, args: &Args) -> PairTests {
    PairTests {
        welch: args
            .welch
            .then(|| Tested::new(Welch::new(set, reference), args.confidence)),
        mann_whitney: args
            .mann_whitney
            .then(|| Tested::new(MannWhitney::new(set, reference), args.confidence)),
    }
}

/// One set, as JSON names it.
#[derive(Serialize)]
struct SetJson<'a> {
    name: &'a str,
    symbol: String,
    n: usize,
    min: f64,
    max: f64,
    median: f64,
    avg: f64,
    stddev: f64,
    /// `p50` and the like, with `--percentiles`.
    percentiles: Option<BTreeMap<String, f64>>,
}

/// Student's t test, as ministat prints it.
#[derive(Serialize)]
struct StudentJson {
    difference: f64,
    margin: f64,
    difference_percent: f64,
    margin_percent: f64,
    pooled_stddev: f64,
    proven: bool,
}

/// A test's figures and its verdict.
#[derive(Serialize)]
struct Tested<T> {
    #[serde(flatten)]
    test: T,
    proven: bool,
}

impl<T: PairTest> Tested<T> {
    fn new(test: T, confidence: Confidence) -> Tested<T> {
        Tested {
            proven: proven(test.p(), confidence),
            test,
        }
    }
}

/// A later set against the first.
#[derive(Serialize)]
struct ComparisonJson<'a> {
    set: &'a str,
    against: &'a str,
    student: StudentJson,
    welch: Option<Tested<Welch>>,
    mann_whitney: Option<Tested<MannWhitney>>,
}

/// The document of `--json`.
#[derive(Serialize)]
struct Document<'a> {
    confidence: f64,
    sets: Vec<SetJson<'a>>,
    comparisons: Vec<ComparisonJson<'a>>,
}

fn document<'a>(samples: &'a [Sample], args: &Args) -> Document<'a> {
    let sets = samples
        .iter()
        .zip(&SYMBOLS[1..])
        .map(|(s, symbol)| SetJson {
            name: s.name(),
            symbol: char::from(*symbol).to_string(),
            n: s.len(),
            min: s.min(),
            max: s.max(),
            median: s.median(),
            avg: s.mean(),
            stddev: s.stddev(),
            percentiles: (!args.percentiles.is_empty()).then(|| {
                args.percentiles
                    .iter()
                    .map(|&p| (format!("p{}", c_format::g(p, 6)), percentile(s, p)))
                    .collect()
            }),
        })
        .collect();
    let comparisons = if args.summary_only {
        Vec::new()
    } else {
        samples
            .iter()
            .skip(1)
            .map(|s| {
                let c = Comparison::new(s, &samples[0], args.confidence);
                let tests = pair_tests(s, &samples[0], args);
                ComparisonJson {
                    set: s.name(),
                    against: samples[0].name(),
                    student: StudentJson {
                        difference: c.difference,
                        margin: c.margin,
                        difference_percent: c.difference * 100.0 / c.reference_mean,
                        margin_percent: c.margin * 100.0 / c.reference_mean,
                        pooled_stddev: c.pooled_stddev,
                        proven: c.proven(),
                    },
                    welch: tests.welch,
                    mann_whitney: tests.mann_whitney,
                }
            })
            .collect()
    };
    Document {
        confidence: args.confidence.percent(),
        sets,
        comparisons,
    }
}

#[cfg(test)]
mod tests {
    use super::plot_width;

    #[test]
    fn a_terminal_s_width_less_the_border_within_what_w_takes() {
        assert_eq!(plot_width(80), Some(78));
        assert_eq!(plot_width(3), None);
        assert_eq!(plot_width(100_000_000_000), Some(65_535));
    }
}
