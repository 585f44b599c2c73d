//! `timehands info`: the facts in text and JSON, and a bad flag's one line.

mod support;

use support::{fails_in_one_line, json, stdout};

#[test]
fn info_prints_the_counter_and_every_verdict() {
    let text = stdout(&["info"]);
    let counter = timehands::info().counter;
    assert!(
        text.lines()
            .any(|l| l.starts_with("counter") && l.ends_with(counter.name())),
        "{text}"
    );
    // `info` runs the cross-CPU check: its verdict is among them.
    timehands::check_across_cpus();
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
    assert_eq!(doc["counter"], timehands::info().counter.name());
    // The bounds on real time as the library gives them, or why none.
    let bounds = &doc["realtime_bounds"];
    match timehands::realtime_bounds() {
        Ok(_) => assert!(
            bounds["earliest"].is_object() && bounds["latest"].is_object(),
            "{doc}"
        ),
        Err(e) => assert_eq!(bounds["error"], e.to_string()),
    }
}

#[test]
fn info_states_the_bounds_on_real_time_or_why_there_are_none() {
    let text = stdout(&["info"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("realtime "))
        .unwrap_or_else(|| panic!("no realtime line in {text}"));
    match timehands::realtime_bounds() {
        Ok(_) => assert!(line.contains("UTC within ±"), "{line}"),
        Err(e) => assert!(line.ends_with(&e.to_string()), "{line}"),
    }
}

#[test]
fn bad_flags_fail_in_one_line() {
    fails_in_one_line(&["info", "--bogus"], "--bogus");
    fails_in_one_line(&["info", "extra"], "extra");
    fails_in_one_line(&["info", "--json=yes"], "--json");
}
