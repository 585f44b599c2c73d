//! What every subcommand does alike: `--help` with examples, a reader of its
//! output that stops early, and an output that cannot be written.

mod support;

// The output tests are unix's (see each); Windows runs the help test alone.
#[cfg(unix)]
use std::process::{Command, Stdio};

#[cfg(unix)]
use support::BIN;

/// Each subcommand with flags that make a short run.
#[cfg(unix)]
fn quick_runs() -> Vec<&'static [&'static str]> {
    let mut runs: Vec<&[&str]> = vec![
        &["info"],
        &["info", "--json"],
        &[
            "report",
            "--rounds",
            "2",
            "--calls",
            "10",
            "--brackets",
            "2",
        ],
        &["bench", "--rounds", "2", "--calls", "10", "--json"],
        &["scale", "--threads", "1", "--step", "1", "--clocks", "vdso"],
        &["track", "-D", "0.01", "--interval", "5"],
        &["track", "-D", "0.01", "--interval", "5", "--json"],
        &["stat", "tests/fixtures/ministat/data/a.txt"],
        &["timers", "-m", "10", "-D", "0.1", "-p", "0"],
        &["bounds", "-n", "2", "--interval", "1"],
        &["bounds", "-n", "1", "--json"],
    ];
    // Elsewhere these refuse (tests/linux_only.rs).
    if cfg!(target_os = "linux") {
        runs.extend([
            &["latency", "-l", "10", "-i", "200", "-q"][..],
            &["latency", "-l", "10", "-i", "200", "-h", "5", "--json"],
            &["load", "-t", "1", "-D", "1"],
            &["signals", "-r", "1000", "-p", "2", "--ms", "20"],
            &["callers", "--seconds", "0.05"],
        ]);
    }
    // Pinning, which the pairs need, is Linux's here (tests/tsc_sync.rs).
    if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        runs.push(&["tsc-sync", "--handoffs", "100", "--json"]);
    }
    runs
}

#[test]
fn every_subcommand_has_help_with_examples() {
    let text = support::stdout(&["--help"]);
    assert!(
        text.contains("Examples:\n  timehands  "),
        "no examples in\n{text}"
    );
    for sub in [
        "info", "report", "bench", "stat", "scale", "tsc-sync", "track", "timers", "bounds",
    ] {
        let text = support::stdout(&[sub, "--help"]);
        let examples = text
            .split("Examples:")
            .nth(1)
            .unwrap_or_else(|| panic!("{sub} --help has no examples:\n{text}"));
        assert!(
            examples.contains(&format!("timehands {sub}")),
            "{sub} --help: no example runs it:\n{text}"
        );
    }
}

/// Runs `args` in the crate's directory with `stdout` as standard output.
#[cfg(unix)]
fn run_into(args: &[&str], stdout: Stdio) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(stdout)
        .output()
        .expect("the binary runs")
}

/// A pipe whose reading end is already closed: writing to it fails with
/// EPIPE, as `timehands ... | head -0` does.
#[cfg(unix)]
fn pipe_nobody_reads() -> Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};

    let mut ends = [0; 2];
    // SAFETY: `ends` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0, "pipe(2)");
    // SAFETY: pipe(2) returned two open descriptors that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    drop(read);
    Stdio::from(write)
}

// Windows has no EPIPE to ignore: a closed pipe is an error there.
#[cfg(unix)]
#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    for args in quick_runs() {
        let out = run_into(args, pipe_nobody_reads());
        let err = String::from_utf8_lossy(&out.stderr);
        // A short run of timers may miss a target it measures, and its exit
        // says so with nobody reading too (tests/timers.rs checks that the
        // exit agrees with the text): that one line is no error of output.
        let missed = args[0] == "timers"
            && out.status.code() == Some(1)
            && err.starts_with("timehands: missed ")
            && err.lines().count() == 1;
        if !missed {
            assert!(out.status.success(), "{args:?}: {}: {err}", out.status);
            assert!(err.is_empty(), "{args:?}: {err}");
        }
    }
}

// /dev/full, the output that is always full, is Linux's.
#[cfg(target_os = "linux")]
#[test]
fn an_output_that_cannot_be_written_fails_in_one_line() {
    for args in quick_runs() {
        let full = std::fs::File::create("/dev/full").expect("/dev/full");
        let out = run_into(args, Stdio::from(full));
        let err = String::from_utf8_lossy(&out.stderr);
        // tsc-sync keeps 1 for CPUs apart: a check it cannot finish is 2.
        let status = if args[0] == "tsc-sync" { 2 } else { 1 };
        assert_eq!(out.status.code(), Some(status), "{args:?}: {err}");
        assert_eq!(
            err,
            "timehands: cannot write to standard output: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
}

#[test]
fn no_progress_is_drawn_when_stderr_is_not_a_terminal() {
    // Long enough (over 2 s) that a terminal would get a progress bar.
    let out = support::run(&["track", "-D", "2.2", "--interval", "1100"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}
