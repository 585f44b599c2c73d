//! timehands' bounds on UTC beside AWS ClockBound's, on a real chronyd,
//! against an NTP server whose true time is known:
//! `scripts/bounds-vs-clockbound.sh`, through chronyd starting, a step, a
//! restart onto an asymmetric path, its slew, a restart back, a step of the
//! truth and a stop (ClockBound 3's daemon beside it where installed and
//! the sampler has its client: the example's `clockbound3` feature, which
//! this build does not turn on).
//! Root only, with chronyd installed and no time daemon running (CI runs
//! as root and installs chrony); elsewhere it says why it is skipped. A
//! test binary of its own, so that no other test of this crate runs while
//! chronyd steps and slews the machine's clock (cargo runs test binaries
//! one at a time); the script sets the clock back whatever happens. It
//! runs the `bounds_truth` example that `cargo test -p timehands-cli`
//! builds (`--test bounds_vs_clockbound` alone does not rebuild it).

use std::path::PathBuf;
use std::process::Command;

/// Seconds a phase: up to twelve phases, some three minutes in all.
const PHASE_SECONDS: &str = "15";

/// The script's exit status for a machine it cannot run on (not root, no
/// chronyd, a time daemon already running; automake's "skipped"); its last
/// line says which. Any other failure fails the test.
const CANNOT_RUN: i32 = 77;

/// No false bound of timehands' in any phase but the truth's own step,
/// which no client sees before its next exchange (the script's verdict);
/// the figures of each phase are printed beside both ClockBounds'.
#[test]
fn timehands_bounds_hold_against_the_truth_through_what_chronyd_does() {
    if !cfg!(target_os = "linux") {
        println!("skipped: Linux only (chronyd, adjtimex, CLOCK_MONOTONIC_RAW)");
        return;
    }
    // The example cargo built beside the binary under test.
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_timehands"));
    let truth = bin
        .parent()
        .expect("the binary's directory")
        .join("examples/bounds_truth");
    if !truth.exists() {
        println!("skipped: {} was not built", truth.display());
        return;
    }
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bounds-vs-clockbound.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("BOUNDS_TRUTH", &truth)
        .env("BOUNDS_SECONDS", PHASE_SECONDS)
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(CANNOT_RUN) {
        println!("skipped: {}", stderr.trim());
        return;
    }
    println!("{stdout}");
    assert!(
        out.status.success(),
        "timehands gave false bounds (exit {:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
    assert!(
        stdout.contains("timehands false bounds, all other phases: 0"),
        "{stdout}"
    );
}
