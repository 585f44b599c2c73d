//! `th_info` shows the clock as it is at each call, also when it changed
//! after the first call: the cross-CPU verdict arrives later, measured on a
//! thread of its own (and a failover would change the counter). This file
//! holds one test, so that its first call is the process's first. The
//! library has the API on unix only (README.md, "Each OS").
#![cfg(unix)]

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use libc::c_char;

/// The longest the test waits for the clock to add its late verdict.
const PATIENCE: Duration = Duration::from_secs(10);

fn th_info() -> timehands::th_info {
    let mut info = MaybeUninit::uninit();
    // SAFETY: `info` is a writable th_info; th_info fills it on success.
    assert_eq!(unsafe { timehands::th_info(info.as_mut_ptr()) }, 0);
    // SAFETY: the call returned 0, so it wrote the whole struct.
    unsafe { info.assume_init() }
}

fn text(c: &c_char) -> &str {
    // SAFETY: th_info hands out NUL-terminated strings that are never freed.
    unsafe { CStr::from_ptr(c) }.to_str().expect("UTF-8")
}

#[test]
fn a_later_call_shows_what_the_clock_learned_since_the_first() {
    let first = th_info();
    // Reads wind the clock up, and the first wind-up starts the cross-CPU
    // check (on a TSC); wait until the Rust side has more verdicts, if it
    // ever will.
    let began = Instant::now();
    while timehands_rs::info().verdicts.len() <= first.verdict_count && began.elapsed() < PATIENCE {
        timehands::th_now_ns();
        std::thread::sleep(Duration::from_millis(1));
    }
    // Until a verdict is added while the two are read.
    let (info, theirs) = loop {
        let theirs = timehands_rs::info();
        let info = th_info();
        if theirs.verdicts.len() == timehands_rs::info().verdicts.len() {
            break (info, theirs);
        }
    };
    assert_eq!(text(info.counter), theirs.counter.name());
    assert_eq!(text(info.frequency_source), theirs.frequency_source);
    assert_eq!(info.fallback.map(text), theirs.fallback.as_deref());
    // SAFETY: th_info's array holds verdict_count verdicts, never freed.
    let verdicts = unsafe { std::slice::from_raw_parts(info.verdicts, info.verdict_count) };
    let ours: Vec<(&str, &str, bool)> = verdicts
        .iter()
        .map(|v| (text(v.check), text(v.detail), v.passed))
        .collect();
    let expected: Vec<(&str, &str, bool)> = theirs
        .verdicts
        .iter()
        .map(|v| (v.check, v.detail.as_str(), v.passed))
        .collect();
    assert_eq!(ours, expected);
    // The same texts give the same pointers: nothing leaks per call.
    let again = th_info();
    assert!(std::ptr::eq(again.counter, info.counter));
    assert!(std::ptr::eq(again.verdicts, info.verdicts));
}
