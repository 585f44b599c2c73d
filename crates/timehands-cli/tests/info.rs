//! `timehands info`: the facts in text and JSON, and a bad flag's one line.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_timehands");

#[test]
fn info_prints_the_counter_and_every_verdict() {
    let out = Command::new(BIN).arg("info").output().expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let counter = timehands::info().counter;
    assert!(
        text.lines()
            .any(|l| l.starts_with("counter") && l.ends_with(&counter)),
        "{text}"
    );
    for v in timehands::info().verdicts {
        assert!(
            text.contains(v.check),
            "no verdict {:?} in\n{text}",
            v.check
        );
    }
}

#[test]
fn info_json_has_the_fields_scripts_read() {
    let out = Command::new(BIN)
        .args(["info", "--json"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for field in [
        "counter",
        "frequency_hz",
        "frequency_source",
        "verdicts",
        "windups",
    ] {
        assert!(doc.get(field).is_some(), "no {field} in {doc}");
    }
    assert!(doc["frequency_hz"].as_u64().is_some_and(|hz| hz > 0));
}

#[test]
fn an_unknown_flag_is_one_line_and_exit_2() {
    let out = Command::new(BIN)
        .args(["info", "--bogus"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("--bogus"), "{err}");
}
