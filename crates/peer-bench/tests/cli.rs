//! The command line's shape: every section prints a row per clock or library,
//! JSON parses, and bad flags fail with one line. Never speed: these run on
//! whatever machine runs the tests.

use std::process::{Command, Output};

use timehands::sys::KernelClock;

const BIN: &str = env!("CARGO_BIN_EXE_peer-bench");

/// The clocks every machine has, the kernel's by the OS's names (each
/// once); the kernel's coarse clock is Linux's and FreeBSD's, and x86_64
/// adds the TSC reads.
fn clock_names() -> Vec<&'static str> {
    let mut names = vec![
        "std Instant::now",
        "std SystemTime::now",
        "quanta now",
        "quanta recent",
        minstant_now(),
        fastant_now(),
        "coarsetime now",
    ];
    for kernel in [
        KernelClock::Monotonic,
        KernelClock::Realtime,
        KernelClock::MonotonicRaw,
        KernelClock::Boottime,
    ] {
        if !names.contains(&kernel.name()) {
            names.push(kernel.name());
        }
    }
    if cfg!(any(target_os = "linux", target_os = "freebsd")) {
        names.push("CLOCK_MONOTONIC_COARSE");
    }
    if cfg!(target_arch = "x86_64") {
        names.extend(["rdtsc", "lfence; rdtsc"]);
    }
    names
}

/// minstant's row: named `(std)` where it has no TSC to read.
fn minstant_now() -> &'static str {
    if minstant::is_tsc_available() {
        "minstant now"
    } else {
        "minstant now (std)"
    }
}

/// fastant's row, as minstant's.
fn fastant_now() -> &'static str {
    if fastant::is_tsc_available() {
        "fastant now"
    } else {
        "fastant now (std)"
    }
}

fn run(args: &[&str]) -> Output {
    let output = Command::new(BIN).args(args).output().expect("runs");
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(args: &[&str]) -> String {
    String::from_utf8(run(args).stdout).expect("utf-8")
}

/// The fields after `name` in the table row that starts with it.
fn fields<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .find_map(|line| {
            let rest = line.trim_start().strip_prefix(name)?;
            rest.starts_with("  ")
                .then(|| rest.split_whitespace().collect())
        })
        .unwrap_or_else(|| panic!("no row for {name:?} in\n{out}"))
}

#[test]
fn cost_prints_every_clock() {
    let out = stdout(&["--quick", "--only", "cost"]);
    for name in clock_names() {
        let fields = fields(&out, name);
        assert_eq!(fields.len(), 4, "{fields:?}");
        assert!(fields[3].ends_with('x'), "no ratio in {fields:?}");
    }
    assert!(out.contains("Targets"));
}

#[test]
fn ordering_prints_a_backward_count_per_clock() {
    let out = stdout(&["--quick", "--only", "ordering"]);
    if out.contains("skipped:") {
        return; // one CPU: nothing to ping-pong with
    }
    for name in clock_names() {
        let fields = fields(&out, name);
        assert_eq!(fields.len(), 4, "{fields:?}");
        fields[1].parse::<u64>().expect("a backward-step count");
    }
}

#[test]
fn first_call_prints_every_library() {
    let out = stdout(&["--quick", "--only", "first-call"]);
    assert!(!out.contains("error:"), "{out}");
    for library in ["none", "std", "quanta", "minstant", "fastant", "coarsetime"] {
        let fields = fields(&out, library);
        assert_eq!(fields.len(), 4, "{fields:?}");
        fields[3].parse::<f64>().expect("first call µs");
    }
}

#[test]
fn tracking_prints_rates() {
    let out = stdout(&["--quick", "--track-seconds", "1", "--only", "tracking"]);
    let names = [
        KernelClock::Monotonic.name(),
        KernelClock::Realtime.name(),
        minstant_now(),
    ];
    for name in names {
        let fields = fields(&out, name);
        fields[1].parse::<f64>().expect("rate ppm");
    }
    assert!(
        !out.contains("lfence; rdtsc"),
        "raw counters are not tracked"
    );
}

/// The fresh processes' section counts reads and processes, and says
/// whether the target was met.
#[test]
fn fresh_counts_the_reads_of_fresh_processes() {
    let out = stdout(&["--quick", "--only", "fresh"]);
    let line = out
        .lines()
        .find(|l| l.contains("processes,"))
        .unwrap_or_else(|| panic!("no count in\n{out}"));
    assert!(line.trim_start().starts_with("20 processes"), "{line}");
    assert!(
        out.contains("fresh processes with a now() over 100 ns outside"),
        "{out}"
    );
}

/// The cost of keeping time: a row per library, three workloads of three
/// figures each (Linux reads them from /proc; elsewhere the section says
/// why it is skipped).
#[test]
fn keeping_prints_every_library_under_every_workload() {
    let out = stdout(&["--quick", "--only", "keeping"]);
    if !cfg!(target_os = "linux") {
        assert!(!out.contains("cost of keeping time"), "{out}");
        return;
    }
    for library in [
        "std Instant::now",
        "timehands now()",
        "timehands now_coarse()",
        "quanta recent, Upkeep 1 ms",
        "coarsetime recent, updater 1 ms",
        "minstant now",
        "fastant now",
    ] {
        let row = out
            .lines()
            .find(|l| l.starts_with(library))
            .unwrap_or_else(|| panic!("no row for {library} in\n{out}"));
        let figures: Vec<f64> = row[library.len()..]
            .split(['|', ' '])
            .filter_map(|f| f.parse().ok())
            .collect();
        assert_eq!(figures.len(), 9, "{row}");
    }
}

#[test]
fn json_parses() {
    let out = stdout(&["--json", "--quick", "--only", "cost"]);
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let rows = report["cost"].as_array().expect("cost rows");
    assert!(rows.len() >= clock_names().len());
    assert!(report["ordering"].is_null());
}

#[test]
fn bad_flags_fail_with_one_line() {
    for args in [
        ["--handoffs", "x"],
        ["--handoffs", "18446744073709551615"],
        ["--only", "nonsense"],
    ] {
        let output = Command::new(BIN).args(args).output().expect("runs");
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8(output.stderr).expect("utf-8");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr:?}");
        assert!(stderr.starts_with("error:"), "{stderr:?}");
        assert!(output.stdout.is_empty());
    }
}

/// One keeper for the machine: a row for 1 and 10 readers with every
/// reader on the page, a fresh process's first read and first 50 ms on it,
/// and the keeper's targets (on Linux x86_64; elsewhere the section says
/// why it is skipped).
#[test]
fn keeper_prints_readers_on_the_page_and_its_targets() {
    let out = stdout(&["--quick", "--only", "keeper"]);
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        assert!(!out.contains("one keeper for the machine"), "{out}");
        return;
    }
    for (processes, on_page) in [(1, "1/1"), (10, "10/10")] {
        let row = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{processes} |")))
            .unwrap_or_else(|| panic!("no row for {processes} readers in\n{out}"));
        assert!(
            row.contains(on_page),
            "not every reader read the page: {row}"
        );
    }
    assert!(
        out.contains("first now() of a fresh process that reads the page"),
        "{out}"
    );
    assert!(out.contains("20 fresh processes on the page"), "{out}");
    assert!(
        out.contains("keeper: now() on the page / the process's own now()"),
        "{out}"
    );
}
