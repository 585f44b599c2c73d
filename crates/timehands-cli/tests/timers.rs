//! `timehands timers`: the three setups in text and JSON, and bad flags'
//! one line. Short runs with a small storm: these check the shape of the
//! output, never how late anything was.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_timehands");

/// A short run: 300 soft timers, 0.2 s per setup.
fn run(extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["timers", "-m", "300", "-D", "0.2", "--window", "20"])
        .args(extra)
        .output()
        .expect("runs")
}

/// The run's exit agrees with its targets: success when every target
/// line says "met", else a failure whose one line on stderr names each
/// target the text says was missed. (Whether a short run on a shared
/// machine meets them is the machine's; that it says so is the command's.)
fn exits_as_its_targets_say(out: &Output, missed: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    if missed.is_empty() {
        assert!(out.status.success(), "no target missed, yet: {err}");
    } else {
        assert!(!out.status.success(), "{missed:?} missed, yet a success");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        for name in missed {
            assert!(err.contains(name), "{name} missed, not named in: {err}");
        }
    }
}

#[test]
fn text_has_the_three_setups_and_the_ratios() {
    let out = run(&[]);
    let text = String::from_utf8(out.stdout.clone()).expect("utf-8");
    let missed: Vec<&str> = [
        ("target <= 0.1%: missed", "soft expiries beyond their bound"),
        (
            "target 0 beyond: missed",
            "soft timers due while the pile went in",
        ),
        (
            "target <= 1.2x: missed",
            "hard p99 with / without soft timers",
        ),
    ]
    .into_iter()
    .filter(|(said, _)| text.contains(said))
    .map(|(_, name)| name)
    .collect();
    exits_as_its_targets_say(&out, &missed);
    assert_eq!(
        text.matches(": met").count() + text.matches(": missed").count(),
        3,
        "each target says met or missed: {text}"
    );
    for line in [
        "service, no soft timers",
        "service, 300 soft timers",
        "naive queue, 300 soft timers",
    ] {
        let row = text
            .lines()
            .find(|l| l.starts_with(line))
            .unwrap_or_else(|| panic!("no row {line:?} in\n{text}"));
        // name, then expiries, missed, p50, p99, max, soft fired.
        let numbers = row[line.len()..].split_whitespace().count();
        assert_eq!(numbers, 6, "{row}");
    }
    assert!(text.contains("service hard thread: SCHED_"), "{text}");
    assert!(
        text.contains("service's soft timers armed in "),
        "how long arming took, and whether before the window: {text}"
    );
    for part in [
        "behind callbacks, ",
        " stalled (a worker waiting for its alarm or a CPU); the soft workers waited ",
        "machine's steal time in the service's windows: ",
        "a pile of 300 more soft timers armed mid-window in ",
        " beyond the bound (",
        "the control, later, the arming thread spinning as long as arming took: ",
    ] {
        assert!(
            text.contains(part),
            "the soft misses' causes, the steal time, the pile: no {part:?} in\n{text}"
        );
    }
    assert!(text.contains("naive queue / service: p50"), "{text}");
    assert!(
        text.contains("service with / without soft timers: p99"),
        "{text}"
    );
}

/// 300 soft timers every 10-20 ms with 1 ms of work each ask for some 20
/// CPUs: on any machine most of them come out beyond their bound, and the
/// command says so in its exit.
#[test]
fn an_overloaded_storm_misses_the_soft_target_and_exits_non_zero() {
    let out = run(&["--work", "1000000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("target <= 0.1%: missed"), "{text}");
    assert!(!out.status.success(), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("timehands: missed soft expiries beyond their bound"),
        "{err}"
    );
}

/// The soft timers beyond their bound are those behind callbacks and
/// those stalled, in a setup's or a spell's counts.
fn assert_causes_add_up(counts: &serde_json::Value) {
    let count = |field: &str| counts[field].as_u64().expect(field);
    assert_eq!(
        count("soft_beyond_bound"),
        count("soft_beyond_bound_behind_callbacks") + count("soft_beyond_bound_stalled"),
        "the causes add up: {counts}"
    );
}

#[test]
fn json_has_the_fields_scripts_read() {
    let out = run(&["--json", "-p", "0"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let missed: Vec<&str> = doc["missed"]
        .as_array()
        .expect("the targets missed, a list")
        .iter()
        .map(|name| name.as_str().expect("a target's name"))
        .collect();
    exits_as_its_targets_say(&out, &missed);
    assert_eq!(doc["soft_timers"], 300);
    // The soft tick's default, 2^20 ns, and how long arming the soft timers
    // took: before the window, so not counted in it.
    assert_eq!(doc["soft_tick_us"], 1048.576);
    assert!(
        doc["soft_arming_ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{doc}"
    );
    assert!(doc["soft_arming_overran_ms"].is_f64(), "{doc}");
    // The pile armed mid-window: as many timers as the storm.
    let pile = &doc["pile"];
    assert_eq!(pile["timers"], 300, "{doc}");
    assert!(
        pile["arming_ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{doc}"
    );
    assert!(
        pile["applied_ms"].is_f64() || pile["applied_ms"].is_null(),
        "{doc}"
    );
    // The pile's spell, and the control's where the window had room.
    for spell in [&pile["spell"], &pile["control"]] {
        if spell.is_null() {
            continue;
        }
        assert!(
            spell["span_ms"].as_f64().is_some_and(|ms| ms > 0.0),
            "{doc}"
        );
        assert_causes_add_up(spell);
        assert!(
            spell["soft_expiries"].as_u64() >= spell["soft_beyond_bound"].as_u64(),
            "{doc}"
        );
    }
    assert!(
        doc["hard_scheduling"]
            .as_str()
            .is_some_and(|s| s.starts_with("SCHED_OTHER")),
        "-p 0 asks for no real-time priority: {doc}"
    );
    let setups = doc["setups"].as_array().expect("setups");
    assert_eq!(setups.len(), 3);
    for setup in setups {
        for field in [
            "name",
            "hard_expiries",
            "hard_missed",
            "p50_ns",
            "p99_ns",
            "max_ns",
            "soft_expiries",
            "soft_beyond_bound",
            "soft_beyond_bound_behind_callbacks",
            "soft_beyond_bound_stalled",
            "soft_workers_waited_for_cpu_ms",
            "steal_ms",
        ] {
            assert!(setup.get(field).is_some(), "no {field} in {setup}");
        }
        assert_causes_add_up(setup);
        assert!(
            setup["hard_expiries"].as_u64().is_some_and(|n| n > 0),
            "{setup}"
        );
        let p50 = setup["p50_ns"].as_u64().unwrap();
        let p99 = setup["p99_ns"].as_u64().unwrap();
        let max = setup["max_ns"].as_u64().unwrap();
        assert!(p50 <= p99 && p99 <= max, "{setup}");
    }
    assert_eq!(setups[0]["soft_expiries"], 0, "the unloaded setup has none");
    for ratio in [
        "naive_over_service_p50",
        "naive_over_service_p99",
        "naive_over_service_max",
        "loaded_over_unloaded_p99",
    ] {
        assert!(
            doc["ratios"][ratio].as_f64().is_some(),
            "no {ratio} in {doc}"
        );
    }
}

#[test]
fn bad_flags_are_one_line_naming_the_flag_and_a_failure() {
    for (flag, value) in [
        ("--interval", "0"),
        ("--duration", "-1"),
        ("--duration", "0"),
        ("--duration", "nan"),
        ("--duration", "3601"),
        ("--soft", "2000001"),
        ("--slack", "60000001"),
        ("--work", "1000001"),
        ("--priority", "120"),
        ("--window", "1"),
        ("--soft-tick-shift", "9"),
        ("--soft-tick-shift", "41"),
        ("--soft", "many"),
        ("--bogus", "1"),
    ] {
        let out = Command::new(BIN)
            .args(["timers", flag, value])
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{flag} {value} accepted");
        let err = String::from_utf8(out.stderr).expect("utf-8");
        assert_eq!(err.trim_end().lines().count(), 1, "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
}
