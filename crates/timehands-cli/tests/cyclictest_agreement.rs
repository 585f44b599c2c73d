//! `timehands latency` against cyclictest itself (rt-tests, `apt-get install
//! rt-tests`), run with the same flags: both accept or both refuse each flag
//! set, cyclictest's lines come out in the same formats and order (ours adds
//! `#` lines of its own, left out of the comparison), and every key of
//! cyclictest's JSON is in ours with the same JSON type. Latencies are not
//! compared: two runs never measure the same wakeups. Without cyclictest the
//! tests say so and pass.

// `latency` and cyclictest are Linux's alone.
#![cfg(target_os = "linux")]

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// cyclictest on PATH, or the reason the comparison is skipped.
fn cyclictest() -> Option<&'static str> {
    let found = Command::new("sh")
        .args(["-c", "command -v cyclictest"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        eprintln!("skipped: cyclictest is not installed (apt-get install rt-tests)");
    }
    found.then_some("cyclictest")
}

/// Flag sets cyclictest 2.40 takes, each a short run.
const FLAG_SETS: &[&[&str]] = &[
    &["-q"],
    &["-q", "-t", "2"],
    &["-q", "-t", "2", "-d", "100"],
    &["-q", "-h", "20"],
    &["-q", "-t", "2", "-H", "20"],
    &["-q", "-N"],
    &["-v"],
    &["-v", "-o", "5"],
    &["-q", "-N", "-b", "1"],
    &["-q", "-b", "0"],
    &["-q", "-N", "--spike", "1", "--spike-nodes", "3"],
    &["-q", "--spike", "0"],
    &["-q", "-r"],
    &["-q", "-s"],
    &["-q", "-x"],
    &["-q", "-c", "1"],
    &["-q", "-t", "2", "-A", "10"],
    &["-q", "--secaligned", "10"],
    &["-q", "-m"],
    &["-q", "--laptop"],
    &["-q", "--default-system"],
    &["-q", "--latency", "10"],
    &["-q", "--mainaffinity", "0"],
    &["-q", "-a", "0"],
    &["-q", "-S"],
    &["-q", "--policy", "batch"],
    &["-q", "--policy", "fifo"],
    &["-q", "-p", "50", "-t", "2", "--priospread"],
    &["-q", "-u"],
    &["-q", "-M"],
    &["-q", "-R"],
    &["-q", "-R", "--dbg_cyclictest"],
    &["-q", "--smi"],
];

/// The same short run for both tools.
fn run(program: &str, flags: &[&str]) -> Output {
    let mut command = if program == "cyclictest" {
        Command::new(program)
    } else {
        let mut c = Command::new(support::BIN);
        c.arg("latency");
        c
    };
    command
        .args(["-l", "20", "-i", "200"])
        .args(flags)
        .output()
        .expect("runs")
}

/// cyclictest's run with `flags`, run again (three runs in all) while its
/// statistics hold a negative latency, which is no latency: on a busy
/// guest its POSIX timers (`-x`) have come back with early wakeups and an
/// average that overflowed, whose numbers have another format. `None`, said,
/// when every run did.
fn sane_run(cyclictest: &str, flags: &[&str]) -> Option<Output> {
    let negative = |out: &Output| {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let statistics = stdout.lines().filter(|line| line.starts_with("T:"));
        statistics
            .flat_map(|line| line.split(':').skip(1))
            .any(|field| field.trim_start().starts_with('-'))
    };
    let mut runs = std::iter::repeat_with(|| run(cyclictest, flags)).take(3);
    let sane = runs.find(|out| !negative(out));
    if sane.is_none() {
        eprintln!("skipped {flags:?}: cyclictest measured negative latencies in three runs");
    }
    sane
}

/// One piece of a line's format (see [`format`]).
#[derive(Debug)]
enum Piece {
    /// Words and punctuation, compared as they are.
    Text(String),
    /// A number in a fixed-width field, with the spaces around it: how many
    /// characters it takes, and whether spaces pad it on the left (a
    /// number that fills its field, or outgrows it, as a latency past what
    /// the field was made for does, has none).
    Number { width: usize, padded: bool },
    /// Spaces alone, in a fixed-width line.
    Spaces(usize),
}

/// A line's format: in cyclictest's fixed-width lines (the thread lines, the
/// histogram's rows, `-v`'s values, the spikes) every number with its padding
/// becomes its width; in the others the words and punctuation are compared,
/// and numbers and spacing are free (how many cycle numbers follow `# Thread
/// 0:` depends on the latencies).
fn format(line: &str) -> Vec<Piece> {
    let fixed =
        line.starts_with("T:") || line.starts_with(|c: char| c == ' ' || c.is_ascii_digit());
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' || c.is_ascii_digit() {
            let mut run = c.to_string();
            while let Some(&next) = chars.peek().filter(|n| **n == ' ' || n.is_ascii_digit()) {
                run.push(next);
                chars.next();
            }
            if !fixed {
                continue;
            }
            pieces.push(Piece::Text(std::mem::take(&mut text)));
            pieces.push(if run.trim().is_empty() {
                Piece::Spaces(run.len())
            } else {
                Piece::Number {
                    width: run.len(),
                    padded: run.starts_with(' '),
                }
            });
        } else {
            text.push(c);
        }
    }
    pieces.push(Piece::Text(text));
    pieces
}

/// Whether two lines have the same format. Two runs measure different
/// latencies, so a number may outgrow its field in one run only (a stall
/// of 100 ms outgrows cyclictest's five digits of microseconds): a number
/// with no padding matches a padded one at most as wide, whose padding
/// shows the field's width.
fn same_format(a: &[Piece], b: &[Piece]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (Piece::Text(a), Piece::Text(b)) => a == b,
            (Piece::Spaces(a), Piece::Spaces(b)) => a == b,
            (
                Piece::Number {
                    width: a,
                    padded: a_padded,
                },
                Piece::Number {
                    width: b,
                    padded: b_padded,
                },
            ) => match (a_padded, b_padded) {
                (true, true) | (false, false) => a == b,
                (false, true) => a >= b,
                (true, false) => b >= a,
            },
            _ => false,
        })
}

/// The formats of `out`'s lines, repeats of one format counted once; with
/// `ours`, without the `#` lines that cyclictest does not print.
fn formats(out: &Output, ours: bool) -> Vec<Vec<Piece>> {
    let mut shapes: Vec<Vec<Piece>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            !ours
                || !(l.starts_with("# kernel ")
                    || l.starts_with("# timer slack: ")
                    || l.starts_with("# T:"))
        })
        .map(format)
        .collect();
    shapes.dedup_by(|a, b| same_format(a, b));
    shapes
}

/// Whether two outputs' lines have the same formats, line by line.
fn same_formats(a: &[Vec<Piece>], b: &[Vec<Piece>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_format(a, b))
}

#[test]
fn a_number_that_outgrows_its_field_in_one_run_keeps_the_line_format() {
    let line = |act: &str| {
        format(&format!(
            "T: 0 ( 4242) P: 0 I:200 C:     20 Min:      5 Act:{act} Avg:   12 Max:      30"
        ))
    };
    let usual = line("   10");
    for outgrown in ["12345", "123456"] {
        assert!(same_format(&usual, &line(outgrown)), "{outgrown}");
        assert!(same_format(&line(outgrown), &usual), "{outgrown}");
    }
    // A padded number of another width, or an unpadded one narrower than the
    // field, is another format.
    for other in ["  10", "1234", "    10"] {
        assert!(!same_format(&usual, &line(other)), "{other}");
    }
    assert!(!same_format(&line("12345"), &line("123456")));
    assert!(!same_format(
        &usual,
        &format("T: 0 ( 4242) P: 0 I:200 C:     20 Min:      5 Act:   10 Avg:   12")
    ));
}

#[test]
fn the_same_flags_are_taken_and_give_the_same_line_formats() {
    let Some(cyclictest) = cyclictest() else {
        return;
    };
    for flags in FLAG_SETS {
        let Some(theirs) = sane_run(cyclictest, flags) else {
            continue;
        };
        let ours = run("timehands", flags);
        assert_eq!(
            ours.status.success(),
            theirs.status.success(),
            "{flags:?}: cyclictest {}, timehands {}: {}",
            theirs.status,
            ours.status,
            String::from_utf8_lossy(&ours.stderr)
        );
        if !theirs.status.success() {
            // Both refuse (such as --smi without the MSR): ours on one line.
            let err = String::from_utf8_lossy(&ours.stderr);
            assert_eq!(err.trim_end().lines().count(), 1, "{flags:?}: {err}");
            continue;
        }
        let (ours, theirs) = (formats(&ours, true), formats(&theirs, false));
        assert!(
            same_formats(&ours, &theirs),
            "{flags:?}: ours {ours:?}, cyclictest's {theirs:?}"
        );
    }
}

/// Every key path of `doc` with its JSON type; a histogram's buckets are
/// left out (they hold different counts).
fn keys(doc: &Value, path: &str, into: &mut Vec<(String, &'static str)>) {
    let Value::Object(map) = doc else {
        return;
    };
    for (key, value) in map {
        let path = format!("{path}/{key}");
        let kind = match value {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(n) if n.is_f64() => "float",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        into.push((path.clone(), kind));
        if key != "histogram" {
            keys(value, &path, into);
        }
    }
}

fn json_keys(path: &Path) -> Vec<(String, &'static str)> {
    let text = std::fs::read_to_string(path).expect("written");
    // cyclictest writes `"avg": -nan` for a thread that had no wakeup yet when
    // another reached its loops (it stops then); that is no JSON number.
    let text = text
        .replace(": -nan,", ": 0.0,")
        .replace(": nan,", ": 0.0,");
    let doc: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut found = Vec::new();
    keys(&doc, "", &mut found);
    found
}

#[test]
fn every_key_of_cyclictests_json_is_in_ours_with_its_type() {
    let Some(cyclictest) = cyclictest() else {
        return;
    };
    let dir = support::scratch("cyclictest-agreement");
    for flags in [&["-q", "-t", "2", "-h", "10"][..], &["-q", "-N"]] {
        let [theirs, ours] = ["cyclictest.json", "timehands.json"].map(|name| dir.join(name));
        for (program, path) in [(cyclictest, &theirs), ("timehands", &ours)] {
            let json = format!("--json={}", path.display());
            let out = run(program, &[flags, &[json.as_str()]].concat());
            assert!(out.status.success(), "{program} {flags:?}");
        }
        let ours = json_keys(&ours);
        for key in json_keys(&theirs) {
            assert!(
                ours.contains(&key),
                "{flags:?}: {key:?} missing from ours: {ours:?}"
            );
        }
    }
}
