//! `timehands keeper`: it publishes a page that `timehands info` in another
//! process reads its time from; a second keeper of the directory, a page it
//! cannot make and bad seconds are refused in one line.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{BIN, fails_in_one_line, scratch, stdout, under_a_file};

#[test]
fn a_keeper_publishes_a_page_that_a_reader_reads_its_time_from() {
    let dir = scratch("keeper-publishes");
    let page = dir.join("page");
    let mut keeper = Command::new(BIN)
        .args(["keeper", "--path", page.to_str().unwrap(), "--seconds", "5"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the keeper runs");
    let limit = Instant::now() + Duration::from_secs(5);
    while !timehands::keeper::published(&page) {
        assert!(Instant::now() < limit, "nothing published in 5 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let info = Command::new(BIN)
        .arg("info")
        .env("TIMEHANDS_PAGE", &page)
        .output()
        .expect("info runs");
    let text = String::from_utf8_lossy(&info.stdout);
    let from = text
        .lines()
        .find(|l| l.starts_with("time from"))
        .unwrap_or_else(|| panic!("no time from in\n{text}"));
    assert!(from.contains("the keeper's page (keeper pid"), "{from}");
    // A second keeper of the directory is refused, naming the first.
    fails_in_one_line(
        &["keeper", "--path", page.to_str().unwrap(), "--seconds", "1"],
        "another keeper keeps",
    );
    let _ = keeper.kill();
    let output = keeper.wait_with_output().expect("the keeper ends");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.starts_with("keeping the clock in "), "{said}");
    assert!(said.contains("\npublishing\n"), "{said}");
}

#[test]
fn without_a_page_info_says_why_its_time_is_its_own() {
    let dir = scratch("keeper-none");
    let text = Command::new(BIN)
        .arg("info")
        .env("TIMEHANDS_PAGE", dir.join("page"))
        .output()
        .expect("info runs");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("time from    its own clock: the keeper's page: No such file"),
        "{text}"
    );
}

#[test]
fn a_keeper_that_cannot_make_its_page_or_is_given_bad_seconds_says_so_in_one_line() {
    fails_in_one_line(
        &["keeper", "--path", &under_a_file()],
        "cannot keep the page",
    );
    fails_in_one_line(&["keeper", "--seconds", "-1"], "-1");
    fails_in_one_line(&["keeper", "--seconds", "soon"], "soon");
    assert!(stdout(&["keeper", "--help"]).contains("Examples:"));
}
