//! `timehands scale`: a row per clock and thread count, JSON, the plot, and
//! the errors.

mod support;

use support::{assert_svg, fails_in_one_line, json, scratch, stdout, under_a_file};

#[test]
fn a_row_for_every_clock_at_every_thread_count() {
    let text = stdout(&["scale", "--threads", "2", "--step", "10"]);
    // The kernel's clock by the name the command gives it here.
    let kernel = if cfg!(target_os = "linux") {
        "vDSO CLOCK_MONOTONIC"
    } else {
        timehands::sys::KernelClock::Monotonic.name()
    };
    for clock in [
        "timehands now()",
        kernel,
        "mutex-protected now()",
        "shared-atomic last value",
    ] {
        for threads in ["1", "2"] {
            let found = text.lines().any(|l| {
                l.strip_prefix(clock)
                    .and_then(|rest| rest.split_whitespace().next())
                    == Some(threads)
            });
            assert!(found, "no row for {clock} at {threads} threads in\n{text}");
        }
    }
    assert_eq!(text.lines().count(), 2 + 8, "{text}");
    assert!(text.lines().skip(2).all(|l| l.ends_with('%')), "{text}");
}

#[test]
fn json_gives_each_step_the_sum_and_the_spread_of_its_threads() {
    let doc = json(&[
        "scale",
        "--threads",
        "3",
        "--step",
        "5",
        "--clocks",
        "vdso,mutex",
        "--json",
    ]);
    assert_eq!(doc["step_ms"], 5);
    let steps = doc["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 6, "{doc}");
    for step in steps {
        assert!(
            ["vdso", "mutex"].contains(&step["clock"].as_str().expect("clock")),
            "{step}"
        );
        let threads = step["threads"].as_u64().expect("threads");
        let spread = &step["per_thread_per_s"];
        assert_eq!(spread["n"].as_u64(), Some(threads), "{step}");
        let figures = ["min", "q1", "median", "q3", "max"].map(|f| spread[f].as_f64().expect(f));
        assert!(figures.windows(2).all(|w| w[0] <= w[1]), "{step}");
        let cpu = step["cpu_share"].as_f64().expect("cpu_share");
        assert!((0.0..=1.0).contains(&cpu), "{step}");
        let sum = step["sum_per_s"].as_f64().expect("sum");
        assert!(sum > 0.0 && sum >= figures[4], "{step}");
    }
}

#[test]
fn out_writes_the_plot() {
    let svg = scratch("scale-out").join("scale.svg");
    stdout(&[
        "scale",
        "--threads",
        "1",
        "--step",
        "5",
        "--clocks",
        "last-value",
        "--out",
        svg.to_str().expect("utf-8"),
    ]);
    assert_svg(&svg);
    let text = std::fs::read_to_string(&svg).expect("the plot");
    assert!(text.contains("shared-atomic last value"), "no legend");
}

#[test]
fn bad_flags_and_unwritable_files_fail_in_one_line() {
    fails_in_one_line(&["scale", "--threads", "0"], "--threads");
    fails_in_one_line(&["scale", "-t", "-2"], "invalid value '-2' for '--threads");
    fails_in_one_line(&["scale", "--threads", "two"], "two");
    fails_in_one_line(&["scale", "--step", "0"], "--step");
    fails_in_one_line(&["scale", "--step", "3600001"], "3600001");
    fails_in_one_line(&["scale", "--clocks", "sundial"], "sundial");
    fails_in_one_line(
        &["scale", "--out", "/proc/x/scale.svg"],
        "/proc/x/scale.svg",
    );
    let under = under_a_file();
    fails_in_one_line(&["scale", "--out", &under], &under);
}
