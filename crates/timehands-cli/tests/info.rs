//! `timehands info`: the facts in text and JSON, and a bad flag's one line.

mod support;

use support::{fails_in_one_line, json, stdout};

#[test]
fn info_prints_the_counter_and_every_verdict() {
    let text = stdout(&["info"]);
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
    let doc = json(&["info", "--json"]);
    for field in [
        "counter",
        "frequency_hz",
        "frequency_source",
        "verdicts",
        "windups",
        "offset_ns",
        "accuracy_ns",
    ] {
        assert!(doc.get(field).is_some(), "no {field} in {doc}");
    }
    assert!(doc["frequency_hz"].as_u64().is_some_and(|hz| hz > 0));
    assert_eq!(doc["counter"], timehands::info().counter);
}

#[test]
fn bad_flags_fail_in_one_line() {
    fails_in_one_line(&["info", "--bogus"], "--bogus");
    fails_in_one_line(&["info", "extra"], "extra");
    fails_in_one_line(&["info", "--json=yes"], "--json");
}
