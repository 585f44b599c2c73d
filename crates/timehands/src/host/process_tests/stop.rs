//! A process stopped (SIGSTOP) and continued, as a debugger or a job
//! shell does (to the clock, much as a paused VM): every read, the first after the resume included,
//! is within the stated bound of CLOCK_MONOTONIC and never back (see
//! [`a_stopped_process_resumes_within_its_bound`]).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Checker, PROCESS_CHILD, child_half, kernel_now, on_signal};

/// Set by SIGCONT: the stop the test made has ended.
static CONTINUED: AtomicBool = AtomicBool::new(false);

extern "C" fn continued(_: libc::c_int) {
    CONTINUED.store(true, Ordering::Release);
}

/// Reads, checked, through a stop the test makes: prints when the first
/// read is made, for the test to time the stop from; reads until 200 ms
/// after SIGCONT, however late a loaded machine lets the test send the
/// stop (a minute at most). Prints the first read after the stop (its
/// offset from CLOCK_MONOTONIC) and how long until reads were within 1 µs
/// again.
pub(super) fn stopped() -> Result<(), String> {
    const AFTER_RESUME_NS: u64 = 200_000_000;
    const NO_STOP_NS: u64 = 60_000_000_000;
    on_signal(libc::SIGCONT, continued)?;
    let mut checker = Checker::new();
    let start = kernel_now();
    checker.read()?;
    println!("FIRST READ");
    let mut last = kernel_now();
    let mut resumed: Option<u64> = None;
    let mut within_1us: Option<u64> = None;
    loop {
        checker.worst = 0;
        checker.read()?;
        let k = kernel_now();
        if resumed.is_none() && CONTINUED.load(Ordering::Acquire) {
            resumed = Some(k);
            println!(
                "resumed after {} ms: first read {} ns from CLOCK_MONOTONIC",
                (k - last) / 1_000_000,
                checker.worst
            );
        }
        match resumed {
            None if k - start > NO_STOP_NS => {
                return Err("no stop was seen within a minute".to_string());
            }
            Some(at) if k - at > AFTER_RESUME_NS => return Ok(()),
            Some(at) if within_1us.is_none() && checker.worst.abs() < 1_000 => {
                within_1us = Some(k - at);
                println!("within 1 µs {} µs after the resume", (k - at) / 1_000);
            }
            _ => {}
        }
        last = k;
    }
}

/// `kill -STOP`, then `kill -CONT` after `stop_ms`, `at_ms` after the first
/// read of a fresh process: every read, the first after the resume
/// included, is within the stated bound of CLOCK_MONOTONIC and never back.
fn stop_and_continue(at_ms: u64, stop_ms: u64) {
    stop_child_half("stop", "FIRST READ", at_ms, stop_ms);
}

/// Runs the child half with `plan`, stops it for `stop_ms` once `after_ms`
/// passed since it printed a line ending in `marker`, and asserts that it
/// passed; prints what it printed.
pub(super) fn stop_child_half(plan: &str, marker: &str, after_ms: u64, stop_ms: u64) {
    let mut child = child_half(PROCESS_CHILD, plan, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child half runs");
    let lines = BufReader::new(child.stdout.take().expect("its stdout")).lines();
    let mut seen = Vec::new();
    for line in lines.map_while(Result::ok) {
        // After libtest's own "test ... " on the same line.
        if line.ends_with(marker) {
            std::thread::sleep(Duration::from_millis(after_ms));
            let pid = child.id() as libc::pid_t;
            // SAFETY: stops and continues our own child.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            std::thread::sleep(Duration::from_millis(stop_ms));
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
        seen.push(line);
    }
    let output = child.wait_with_output().expect("the child half ends");
    let stdout = seen.join("\n");
    println!("{plan}: stopped {stop_ms} ms, {after_ms} ms after {marker}:\n{stdout}");
    assert!(
        output.status.success() && stdout.contains("CHILD OK"),
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A process stopped 5 ms and 50 ms after its first read (when its
/// frequency is the least known) resumes on CLOCK_MONOTONIC, within the
/// bound it states. `TIMEHANDS_TEST_STOP_MS` sets the stop (300 ms here;
/// 3 s and 15 s by hand), `TIMEHANDS_TEST_STOP_AT_MS` when (a list).
#[test]
#[cfg_attr(miri, ignore = "stops a process")]
fn a_stopped_process_resumes_within_its_bound() {
    let stop_ms = std::env::var("TIMEHANDS_TEST_STOP_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let at = std::env::var("TIMEHANDS_TEST_STOP_AT_MS").unwrap_or("5,50".to_string());
    for at_ms in at.split(',').map(|ms| ms.parse().expect("milliseconds")) {
        stop_and_continue(at_ms, stop_ms);
    }
}
