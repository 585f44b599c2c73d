//! `timehands callers`: every kind of reading thread, in a process of its
//! own, gets a steered clock, and the library takes nothing of the process
//! (it exits 1 otherwise); its table has a row for each kind.
#![cfg(target_os = "linux")]

mod support;

use support::{fails_in_one_line, stdout};

#[test]
fn every_kind_of_reader_gets_a_steered_clock_and_keeps_its_process() {
    let text = stdout(&["callers", "--seconds", "0.3"]);
    for kind in ["ordinary", "blocked", "daemon", "fifo", "handler"] {
        let row = text
            .lines()
            .find(|line| line.starts_with(kind))
            .unwrap_or_else(|| panic!("no row for {kind}:\n{text}"));
        assert!(
            row.contains("skipped") || row.ends_with("kept"),
            "{row}\n{text}"
        );
    }
    assert!(text.contains("a handler reading every clock:"), "{text}");
}

#[test]
fn bad_seconds_are_refused_in_one_line() {
    fails_in_one_line(&["callers", "--seconds", "0"], "--seconds");
    fails_in_one_line(&["callers", "--child", "nobody"], "nobody");
}
