//! `timehands discipline`: the targets table, JSON, the plot, and the
//! errors.

mod support;

use support::{assert_svg, fails_in_one_line, json, scratch, stdout, under_a_file};

#[test]
fn the_table_has_ours_the_model_and_the_target_for_each_figure() {
    let text = stdout(&["discipline", "--scenario", "acquire", "--seed", "3"]);
    let header = text.lines().next().expect("a header");
    for column in [
        "ours", "oracle", "hardpps", "best", "limit", "target", "met",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let row = text
        .lines()
        .find(|l| l.contains("time to |phase| < 1 µs"))
        .unwrap_or_else(|| panic!("no acquisition row in\n{text}"));
    assert!(row.trim_end().ends_with("yes"), "{row}");
    assert!(text.ends_with("seed 3: 4 of 4 targets met\n"), "{text}");
}

#[test]
fn json_gives_every_row_and_the_same_seed_the_same_figures() {
    let args = [
        "discipline",
        "--scenario",
        "acquire",
        "--seed",
        "4",
        "--json",
    ];
    let doc = json(&args);
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "{doc}");
    for row in rows {
        assert_eq!(row["scenario"], "acquire");
        assert!(row["met"].as_bool().is_some(), "{row}");
    }
    assert_eq!(json(&args), doc);
}

#[test]
fn seeds_give_each_targets_tally_and_worst_seed() {
    let text = stdout(&["discipline", "--scenario", "acquire", "--seeds", "1..3"]);
    let header = text.lines().next().expect("a header");
    for column in ["met", "worst", "ours", "its target"] {
        assert!(header.contains(column), "{header}");
    }
    let row = text
        .lines()
        .find(|l| l.contains("time to |phase| < 1 µs"))
        .unwrap_or_else(|| panic!("no acquisition row in\n{text}"));
    assert!(row.contains(" 3/3 "), "{row}");
    assert!(
        text.ends_with("seeds 1..3: 4 of 4 targets met on every seed\n"),
        "{text}"
    );
    let doc = json(&[
        "discipline",
        "--scenario",
        "acquire",
        "--seeds",
        "2",
        "--json",
    ]);
    assert_eq!(
        (&doc["first"], &doc["last"], &doc["met"]),
        (&2.into(), &2.into(), &true.into())
    );
    assert_eq!(doc["targets"][0]["worst_seed"], 2, "{doc}");
}

/// An outlier at the first pulse (seed 10's) moves the clock no more than
/// 3σ: the command says so and exits 0. (A missed target's non-zero exit,
/// naming the seed, is `discipline.rs`'s unit test: every scenario's
/// targets are met on every seed.)
#[test]
fn an_outlier_at_the_first_pulse_is_met() {
    let metric = "outlier among pulses 1-10 adds, ns";
    let text = stdout(&["discipline", "--scenario", "acquire", "--seed", "10"]);
    let row = text
        .lines()
        .find(|l| l.contains(metric))
        .unwrap_or_else(|| panic!("no early outlier row in\n{text}"));
    assert!(row.trim_end().ends_with("yes"), "{row}");
}

#[test]
fn svg_plots_one_scenario() {
    let path = scratch("discipline").join("ntp.svg");
    let path_text = path.to_str().expect("utf-8 path");
    stdout(&["discipline", "--scenario", "ntp", "--svg", path_text]);
    assert_svg(&path);
}

#[test]
fn errors_name_the_input() {
    fails_in_one_line(&["discipline", "--scenario", "calm"], "calm");
    fails_in_one_line(&["discipline", "--svg", "all.svg"], "--scenario");
    let bad = under_a_file();
    fails_in_one_line(
        &["discipline", "--scenario", "acquire", "--svg", &bad],
        &bad,
    );
    fails_in_one_line(&["discipline", "--hours", "0"], "--hours");
    fails_in_one_line(&["discipline", "--seeds", "5..2"], "5..2");
    fails_in_one_line(&["discipline", "--seeds", "1..x"], "\"x\"");
    fails_in_one_line(&["discipline", "--seeds", "1..2", "--seed", "3"], "--seed");
}
