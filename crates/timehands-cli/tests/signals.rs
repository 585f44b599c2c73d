//! `timehands signals`: processes that read every clock in a SIGPROF
//! handler, 20 000 times a second from before their first read, while their
//! threads allocate and read; none may hang. (A read that waited for its
//! own thread's windup, or allocated in a handler that interrupted
//! `malloc`, hung one process in three at 50 kHz.)
#![cfg(target_os = "linux")]

mod support;

use support::{fails_in_one_line, stdout};

#[test]
fn no_process_hangs_with_every_clock_read_in_its_signal_handler() {
    let text = stdout(&[
        "signals", "-r", "20000", "-r", "1000", "-p", "30", "--ms", "150",
    ]);
    for rate in ["20000 Hz", "1000 Hz"] {
        let line = text
            .lines()
            .find(|line| line.contains(rate))
            .unwrap_or_else(|| panic!("no line for {rate}:\n{text}"));
        assert!(line.contains("0 hung, 0 failed, 30 passed"), "{line}");
    }
}

#[test]
fn a_rate_of_zero_is_refused_in_one_line() {
    fails_in_one_line(&["signals", "-r", "0"], "--rate");
    fails_in_one_line(
        &["signals", "--program", "/nonexistent/workload"],
        "/nonexistent/workload",
    );
}
