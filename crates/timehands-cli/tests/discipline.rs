//! `timehands discipline`: the targets table, JSON, the plot, and the
//! errors.

mod support;

use support::{assert_svg, fails_in_one_line, json, scratch, stdout, under_a_file};

#[test]
fn the_table_has_ours_the_model_and_the_target_for_each_figure() {
    let text = stdout(&["discipline", "--scenario", "acquire", "--seed", "3"]);
    let header = text.lines().next().expect("a header");
    for column in ["ours", "oracle", "hardpps", "best", "limit", "target", "met"] {
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
        "steady",
        "--hours",
        "1",
        "--json",
    ];
    let doc = json(&args);
    let rows = doc["rows"].as_array().expect("rows");
    // Four cases of σ and w, four rows each.
    assert_eq!(rows.len(), 16, "{doc}");
    for row in rows {
        assert_eq!(row["scenario"], "steady");
        assert!(row["met"].as_bool().is_some(), "{row}");
    }
    assert_eq!(json(&args), doc);
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
}
