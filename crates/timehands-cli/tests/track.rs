//! `timehands track`: a row per sample and a summary, JSON, the plot, and
//! the errors.

mod support;

use support::{assert_svg, fails_in_one_line, json, scratch, stdout, under_a_file};

#[test]
fn a_row_per_sample_then_the_summary() {
    let text = stdout(&["track", "-D", "0.2", "--interval", "50"]);
    let rows: Vec<&str> = text
        .lines()
        .skip(2)
        .take_while(|l| *l != "summary")
        .collect();
    assert_eq!(rows.len(), 5, "{text}");
    for row in &rows {
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields.len(), 4, "{row}");
        assert!(
            fields[0].parse::<f64>().is_ok() && fields[1].parse::<i64>().is_ok(),
            "{row}"
        );
    }
    // The first sample has nothing to take a rate from.
    assert!(rows[0].ends_with(" -"), "{}", rows[0]);
    assert!(text.contains("  samples          5"), "{text}");
    assert!(text.contains("frequency error"), "{text}");
}

#[test]
fn json_has_the_samples_and_the_summary() {
    let doc = json(&["track", "--duration", "0.1", "--interval", "20", "--json"]);
    assert_eq!(doc["clock"], "timehands now()");
    assert_eq!(
        doc["against"],
        timehands::sys::KernelClock::Monotonic.name()
    );
    assert_eq!(doc["busy"], false);
    let samples = doc["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 6, "{doc}");
    assert!(samples[0]["frequency_error_ppm"].is_null());
    let mut last = -1.0;
    for s in samples {
        let t = s["t_s"].as_f64().expect("t_s");
        assert!(t > last, "time goes forward: {doc}");
        last = t;
        assert!(
            s["offset_ns"].as_i64().is_some() && s["bracket_ns"].as_u64().is_some(),
            "{s}"
        );
    }
    assert!(
        samples[1..]
            .iter()
            .all(|s| s["frequency_error_ppm"].as_f64().is_some())
    );
    let summary = &doc["summary"];
    assert_eq!(summary["samples"], 6);
    assert!(
        summary["frequency_error_ppm"].as_f64().is_some(),
        "{summary}"
    );
    assert!(summary["max_abs_offset_ns"].as_u64().is_some(), "{summary}");
    assert_eq!(summary["offset_ns"]["n"], 6);
}

#[test]
fn busy_is_said_in_the_text_and_the_json() {
    let text = stdout(&["track", "-D", "0.02", "--interval", "10", "--busy"]);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("a thread reading now()")),
        "{text}"
    );
    let doc = json(&[
        "track",
        "-D",
        "0.02",
        "--interval",
        "10",
        "--busy",
        "--json",
    ]);
    assert_eq!(doc["busy"], true);
}

#[test]
fn out_writes_the_plot() {
    let svg = scratch("track-out").join("track.svg");
    stdout(&[
        "track",
        "-D",
        "0.05",
        "--interval",
        "10",
        "--out",
        svg.to_str().expect("utf-8"),
    ]);
    assert_svg(&svg);
}

#[test]
fn bad_flags_and_unwritable_files_fail_in_one_line() {
    fails_in_one_line(&["track", "-D", "0"], "0");
    fails_in_one_line(&["track", "-D", "soon"], "soon");
    fails_in_one_line(&["track", "--duration=-1"], "-1");
    fails_in_one_line(&["track", "-D", "-1"], "invalid value '-1' for '--duration");
    fails_in_one_line(&["track", "--interval", "0"], "--interval");
    fails_in_one_line(&["track", "--interval", "1.5"], "1.5");
    // More samples than a run keeps in memory.
    fails_in_one_line(
        &["track", "-D", "86400", "--interval", "1"],
        "86400001 samples",
    );
    fails_in_one_line(&["track", "--out", "/proc/x"], "/proc/x");
    let under = under_a_file();
    fails_in_one_line(&["track", "--out", &under], &under);
}
