//! `timehands load`: runs its threads for the duration or until Ctrl-C, says
//! how many sleeps they did, and refuses bad flags on one line.

// `load` is Linux's alone; elsewhere it refuses (tests/linux_only.rs).
#![cfg(target_os = "linux")]

mod support;

/// The sleep count of the closing line `load: N threads, S s, K sleeps (R per second)`.
fn sleeps(summary: &str) -> u64 {
    let line = summary
        .lines()
        .find(|l| l.starts_with("load: ") && l.contains(" sleeps ("))
        .unwrap_or_else(|| panic!("no summary in {summary:?}"));
    let before = line.split(" sleeps (").next().expect("split");
    before
        .rsplit(' ')
        .next()
        .expect("count")
        .parse()
        .expect("number")
}

#[test]
fn a_duration_ends_the_load_with_a_summary() {
    let out = support::run(&["load", "-t", "2", "-D", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.starts_with("load: 2 threads sleeping random times below 1 ms until 1 s or Ctrl-C\n"),
        "{text}"
    );
    assert!(text.contains("\nload: 2 threads, "), "{text}");
    // Sleeps below a millisecond for a second: there were some.
    assert!(sleeps(&text) > 0, "{text}");
}

#[test]
fn ctrl_c_stops_the_load_cleanly() {
    let (first, rest) = support::interrupted(&["load", "-t", "3"]);
    assert!(first.contains("until Ctrl-C"), "{first}");
    assert!(rest.starts_with("load: 3 threads, "), "{rest}");
    sleeps(&rest);
}

#[test]
fn bad_flags_are_one_line_and_a_non_zero_exit() {
    for (args, needle) in [
        (&["-t", "0"][..], "--threads"),
        (&["-t", "many"][..], "--threads"),
        (&["-D", "0"][..], "duration"),
        (&["-D", "1y"][..], "duration"),
    ] {
        let out = support::run(&[&["load"][..], args].concat());
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8(out.stderr).expect("utf-8");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
