//! Running a test binary again as cargo ran it: under the emulator CI names
//! in `TIMEHANDS_TEST_RUNNER` (qemu-user for aarch64), if any, and knowing
//! when that emulator cannot fork (`TIMEHANDS_TEST_NO_FORK`: qemu-user
//! aborts on a fork in a process with threads). Shared by the crate's
//! process tests and its `host` integration tests.

use std::process::Command;

/// This test binary, run as cargo ran it.
pub fn this_binary() -> Command {
    let exe = std::env::current_exe().expect("this test binary");
    let runner = std::env::var("TIMEHANDS_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(emulator) => {
            let mut command = Command::new(emulator);
            command.args(words).arg(exe);
            command
        }
        None => Command::new(exe),
    }
}

/// Why this run cannot fork, where it cannot (on unix: elsewhere nothing forks).
#[cfg(unix)]
pub fn no_fork() -> Option<String> {
    std::env::var("TIMEHANDS_TEST_NO_FORK").ok()
}
