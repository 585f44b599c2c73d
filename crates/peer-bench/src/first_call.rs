//! First call in a fresh process: what a library costs before it has warmed up.
//!
//! minstant and fastant calibrate in a constructor that runs before `main` in
//! every process that links them, and quanta calibrates on its first call, so
//! each library gets a small binary of its own (`first-call-<library>`) that we
//! run as a child. We pass the OS's monotonic clock at spawn time in
//! `PEER_BENCH_SPAWN_NS` ([`spawn_clock`](crate::spawn_clock)); the child
//! reads the same clock first thing in `main`, times its first `now()` and
//! prints both. Spawning costs the same for every child, so the time
//! before `main` is read against the `none` child, which links no library.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::spawn_clock::{SPAWN_ENV, monotonic_ns};

/// The libraries measured; each has a `first-call-<name>` binary.
pub const LIBRARIES: [&str; 8] = [
    "none",
    "std",
    "timehands",
    "quanta",
    "quanta-drop-in",
    "minstant",
    "fastant",
    "coarsetime",
];

/// One library's result: medians over the runs.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The library.
    pub library: String,
    /// Runs made.
    pub runs: usize,
    /// Nanoseconds from spawn to the first line of `main`.
    pub before_main_ns: u64,
    /// `before_main_ns` less the `none` baseline's.
    pub extra_before_main_ns: Option<i64>,
    /// Nanoseconds the first `now()` took.
    pub first_call_ns: u64,
}

/// The section's result: rows, and the libraries whose child failed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    /// One row per library whose child ran.
    pub rows: Vec<Row>,
    /// One line per library whose child did not.
    pub errors: Vec<String>,
}

/// Runs every library's child `runs` times.
pub fn run(runs: usize) -> Outcome {
    let mut outcome = Outcome::default();
    let dir = match std::env::current_exe() {
        Ok(exe) => exe.parent().map(Path::to_path_buf).unwrap_or_default(),
        Err(e) => {
            outcome
                .errors
                .push(format!("cannot find our own executable: {e}"));
            return outcome;
        }
    };
    if let Err(e) = build_missing_children(&dir) {
        outcome.errors.push(e);
    }
    for library in LIBRARIES {
        eprintln!("first call: {library}");
        match measure(&dir, library, runs, &[]) {
            Ok(row) => outcome.rows.push(row),
            Err(e) => outcome.errors.push(e),
        }
    }
    let baseline = outcome
        .rows
        .iter()
        .find(|row| row.library == "none")
        .map(|row| row.before_main_ns);
    for row in &mut outcome.rows {
        row.extra_before_main_ns = baseline.map(|b| row.before_main_ns as i64 - b as i64);
    }
    outcome
}

/// `library`'s child run `runs` times (and once unmeasured) with `env`
/// added to its environment: medians.
pub fn measure(
    dir: &Path,
    library: &str,
    runs: usize,
    env: &[(&str, &str)],
) -> Result<Row, String> {
    let child = child_path(dir, library);
    if !child.is_file() {
        return Err(format!(
            "{} is missing: build it with `cargo build --release -p peer-bench`",
            child.display()
        ));
    }
    // One run unmeasured, so that every child starts from the page cache.
    run_child(&child, env)?;
    let mut before_main = Vec::with_capacity(runs);
    let mut first_call = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (before, first) = run_child(&child, env)?;
        before_main.push(before);
        first_call.push(first);
    }
    Ok(Row {
        library: library.to_string(),
        runs,
        before_main_ns: median(&mut before_main),
        extra_before_main_ns: None,
        first_call_ns: median(&mut first_call),
    })
}

/// Builds the children when one is missing and cargo ran us: `cargo run`
/// builds only the binary it runs. They go where we are, in our profile
/// (the folder we run from: `release`, or `debug` for the `dev` profile).
fn build_missing_children(dir: &Path) -> Result<(), String> {
    if LIBRARIES
        .iter()
        .all(|library| child_path(dir, library).is_file())
    {
        return Ok(());
    }
    let Ok(cargo) = std::env::var("CARGO") else {
        return Ok(()); // Not run by cargo: each missing child says so.
    };
    let profile = match dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => "release",
    };
    eprintln!("first call: building the first-call-* children ({profile})");
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--bins",
            "--profile",
            profile,
            "--manifest-path",
        ])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .status()
        .map_err(|e| format!("cannot run cargo to build the first-call children: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo could not build the first-call children ({status}): build them with `cargo build --release -p peer-bench`"
        ))
    }
}

fn child_path(dir: &Path, library: &str) -> PathBuf {
    dir.join(format!(
        "first-call-{library}{}",
        std::env::consts::EXE_SUFFIX
    ))
}

fn run_child(child: &Path, env: &[(&str, &str)]) -> Result<(u64, u64), String> {
    let mut command = Command::new(child);
    command.envs(env.iter().copied());
    // Read the clock last, so that building the command is not counted.
    let spawned_at = monotonic_ns();
    let output = command
        .env(SPAWN_ENV, spawned_at.to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", child.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            child.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    parse_line(stdout.trim())
        .ok_or_else(|| format!("{} printed {:?}", child.display(), stdout.trim()))
}

/// Parses `before_main_ns=N first_call_ns=M`.
fn parse_line(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    let before = fields
        .next()?
        .strip_prefix("before_main_ns=")?
        .parse()
        .ok()?;
    let first = fields
        .next()?
        .strip_prefix("first_call_ns=")?
        .parse()
        .ok()?;
    fields.next().is_none().then_some((before, first))
}

fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

/// Prints the table.
pub fn print(outcome: &Outcome) {
    println!("First call in a fresh process (µs, median of runs; extra = before main less none's)");
    println!(
        "  {:<14} {:>5} {:>12} {:>10} {:>11}",
        "library", "runs", "before main", "extra", "first now()"
    );
    for row in &outcome.rows {
        let extra = row
            .extra_before_main_ns
            .map_or("-".to_string(), |e| format!("{:.1}", e as f64 / 1e3));
        println!(
            "  {:<14} {:>5} {:>12.1} {:>10} {:>11.1}",
            row.library,
            row.runs,
            row.before_main_ns as f64 / 1e3,
            extra,
            row.first_call_ns as f64 / 1e3
        );
    }
    for error in &outcome.errors {
        println!("  error: {error}");
    }
}
