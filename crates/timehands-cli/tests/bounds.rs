//! `timehands bounds`: each line a bound around the reading (or the reason
//! there is none), ClockBound's beside it only where its daemon runs; the
//! bench's figures; a bad flag refused in one line.

mod support;

use support::{fails_in_one_line, run};

/// Each JSON line: the reading inside timehands' interval, or why there is
/// none; ClockBound's side present exactly where its segment is.
#[test]
fn each_line_bounds_the_reading_or_says_why_not() {
    let out = run(&["bounds", "-n", "3", "--interval", "5", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let clockbound_here = cfg!(target_os = "linux")
        && std::path::Path::new(timehands::clockbound::DEFAULT_PATH).exists();
    assert_eq!(text.lines().count(), 3, "{text}");
    for line in text.lines() {
        let doc: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let realtime = doc["realtime_ns"].as_u64().expect("the reading");
        match &doc["timehands"] {
            serde_json::Value::Object(o) if o.contains_key("Ok") => {
                let i = &o["Ok"];
                let (earliest, latest) = (
                    i["earliest_ns"].as_u64().expect("earliest"),
                    i["latest_ns"].as_u64().expect("latest"),
                );
                assert!(earliest <= realtime && realtime <= latest, "{line}");
                assert_eq!(i["half_width_ns"].as_u64(), Some((latest - earliest) / 2));
            }
            serde_json::Value::Object(o) => {
                let why = o["Err"].as_str().expect("a reason");
                assert!(!why.is_empty() && !why.contains('\n'), "{line}");
            }
            other => panic!("{other}"),
        }
        assert_eq!(!doc["clockbound"].is_null(), clockbound_here, "{line}");
    }
}

/// The bench states each cost (a positive figure; no speed is asserted)
/// and the ratio of the bound's to `now()`'s.
#[test]
fn the_bench_states_the_costs_side_by_side() {
    let out = run(&["bounds", "--bench", "-n", "2", "--interval", "1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let now = doc["now_ns"].as_f64().expect("now's cost");
    let bounds = doc["realtime_bounds_ns"]
        .as_f64()
        .expect("the bound's cost");
    assert!(now > 0.0 && bounds > 0.0, "{doc}");
    let ratio = doc["realtime_bounds_over_now"].as_f64().expect("the ratio");
    assert!((ratio - bounds / now).abs() < 1e-9, "{doc}");
    assert_eq!(doc["samples"].as_u64(), Some(2));
}

#[test]
fn a_bad_flag_is_refused_in_one_line() {
    fails_in_one_line(&["bounds", "-n", "0"], "--count");
    fails_in_one_line(&["bounds", "--interval", "soon"], "--interval");
}

/// chronyd's address that the library would pass over in silence.
#[test]
fn a_bad_chronyd_address_is_refused_in_one_line() {
    let out = std::process::Command::new(support::BIN)
        .args(["bounds", "-n", "1"])
        .env("TIMEHANDS_CHRONYD", "localhost:three")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("TIMEHANDS_CHRONYD=\"localhost:three\""),
        "{err}"
    );
}
