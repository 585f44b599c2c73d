//! `timehands bench`: the table, the chosen clocks, JSON, the raw files for
//! `stat`, and the errors.

mod support;

use support::{fails_in_one_line, json, scratch, stdout, under_a_file};

#[test]
fn the_table_has_a_row_per_clock_with_its_rounds() {
    let text = stdout(&["bench", "--rounds", "4", "--calls", "50"]);
    assert!(text.starts_with("4 rounds of 50 calls per clock"), "{text}");
    let boottime = timehands::sys::KernelClock::Boottime.name();
    for clock in ["timehands now()", boottime, "std Instant::now()"] {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{clock} ")))
            .unwrap_or_else(|| panic!("no row for {clock} in\n{text}"));
        assert_eq!(
            row[clock.len()..].split_whitespace().next(),
            Some("4"),
            "{row}"
        );
    }
    // A header, and one row for each clock (13 on Linux).
    assert_eq!(text.lines().count(), 2 + support::clocks_here(), "{text}");
}

#[test]
fn clocks_chooses_the_clocks_once_each_and_json_gives_their_figures_in_that_order() {
    let doc = json(&[
        "bench",
        "--clocks",
        "kernel-monotonic,now,kernel-monotonic",
        "-r",
        "5",
        "-n",
        "20",
        "--json",
    ]);
    assert_eq!(
        (doc["rounds"].as_u64(), doc["calls"].as_u64()),
        (Some(5), Some(20))
    );
    let clocks = doc["clocks"].as_array().expect("clocks");
    let names: Vec<&str> = clocks
        .iter()
        .map(|c| c["clock"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["kernel-monotonic", "now"]);
    for c in clocks {
        let s = &c["ns_per_call"];
        assert_eq!(s["n"], 5, "{c}");
        for figure in ["min", "max", "median", "avg", "stddev"] {
            assert!(
                s[figure].as_f64().is_some_and(|v| v >= 0.0),
                "no {figure} in {c}"
            );
        }
        assert!(c["discarded"].as_u64().is_some(), "{c}");
    }
}

#[test]
fn raw_writes_one_file_per_clock_with_one_number_a_line() {
    let dir = scratch("bench-raw").join("runs");
    stdout(&[
        "bench",
        "--clocks",
        "now-coarse,kernel-realtime",
        "--rounds",
        "7",
        "--calls",
        "10",
        "--raw",
        dir.to_str().expect("utf-8"),
    ]);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("the directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .collect();
    files.sort();
    assert_eq!(files, ["kernel-realtime.txt", "now-coarse.txt"]);
    // What the files are for: `stat` compares them.
    let paths: Vec<String> = files
        .iter()
        .map(|f| dir.join(f).to_str().expect("utf-8").to_string())
        .collect();
    let compared = stdout(&["stat", "-A", &paths[0], &paths[1]]);
    assert!(
        compared.contains("x   7 ") && compared.contains("+   7 "),
        "{compared}"
    );
    for file in files {
        let text = std::fs::read_to_string(dir.join(&file)).expect("readable");
        let values: Vec<f64> = text
            .lines()
            .map(|l| {
                l.parse()
                    .unwrap_or_else(|_| panic!("{file}: {l:?} is not a number"))
            })
            .collect();
        assert_eq!(values.len(), 7, "{file}");
        assert!(
            values.iter().all(|v| v.is_finite() && *v >= 0.0),
            "{file}: {values:?}"
        );
    }
}

#[test]
fn bad_flags_and_unwritable_directories_fail_in_one_line() {
    fails_in_one_line(&["bench", "--clocks", "now,sundial"], "sundial");
    fails_in_one_line(&["bench", "--calls", "1e"], "1e");
    fails_in_one_line(&["bench", "--rounds", "0"], "--rounds");
    fails_in_one_line(&["bench", "-r", "-5"], "invalid value '-5' for '--rounds");
    fails_in_one_line(&["bench", "--rounds", "99999999999"], "99999999999");
    // Counts a run could not hold in memory or finish.
    fails_in_one_line(&["bench", "--rounds", "4294967295"], "4294967295");
    fails_in_one_line(&["bench", "--calls", "1000000000"], "1000000000");
    fails_in_one_line(&["bench", "--bogus"], "--bogus");
    fails_in_one_line(&["bench", "--raw", "/proc/x"], "/proc/x");
    let under = under_a_file();
    fails_in_one_line(&["bench", "--raw", &under], &under);
}

/// `--tail` counts each precise clock's slow calls against the kernel's
/// monotonic clock's, in whole blocks of a million calls; the coarse
/// clocks, whose calls cannot be told slow, are left out, and naming only
/// them is an error.
#[test]
fn tail_counts_the_slow_calls_of_the_precise_clocks() {
    let doc = json(&[
        "bench",
        "--tail",
        "--tail-calls",
        "1500000",
        "--clocks",
        "now,now-coarse,kernel-monotonic",
        "--json",
    ]);
    let tails = doc.as_array().expect("one entry a clock");
    let names: Vec<&str> = tails
        .iter()
        .map(|t| t["clock"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["now", "kernel-monotonic"]);
    for t in tails {
        assert_eq!(t["calls"], 1_000_000, "{t}");
        let slow = t["slow"].as_u64().expect("a count");
        assert!(slow <= 1_000_000, "{t}");
        assert!(t["ratio_to_kernel"].as_f64().is_some(), "{t}");
    }
    let kernel = &tails[1];
    if kernel["slow"] != 0 {
        assert_eq!(kernel["ratio_to_kernel"].as_f64(), Some(1.0), "{kernel}");
    }
    fails_in_one_line(&["bench", "--tail", "--clocks", "now-coarse"], "now-coarse");
    fails_in_one_line(&["bench", "--tail", "--tail-calls", "10"], "--tail-calls");
}
