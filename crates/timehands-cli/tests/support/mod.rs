//! What every subcommand's tests do: run the binary, read its output, and
//! check that a bad command line fails in one line.

#![allow(dead_code)] // each test file uses its own part

use std::path::PathBuf;
use std::process::{Command, Output};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_timehands");

/// Runs the binary with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Runs the binary, checks that it succeeded, and returns its stdout.
pub fn stdout(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs the binary and parses its stdout as one JSON document.
pub fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout(args)).expect("one JSON document")
}

/// Checks that `args` fail with a non-zero exit and exactly one line on
/// stderr that contains `naming` (the input at fault), and nothing on stdout;
/// returns the exit status.
pub fn fails_in_one_line(args: &[&str], naming: &str) -> i32 {
    let out = run(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    let Some(status) = out.status.code() else {
        panic!("{args:?} died of a signal");
    };
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line:\n{err}");
    assert!(err.starts_with("timehands: "), "{args:?}: {err}");
    assert!(err.contains(naming), "{args:?}: {naming:?} not in {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    status
}

/// How many clocks `bench` and `report` measure here: ours and std's (7),
/// the kernel's that are clocks of their own on this OS (Windows' three are
/// one counter), and the kernel's two coarse ones on Linux and FreeBSD.
pub fn clocks_here() -> usize {
    use timehands::sys::KernelClock;

    let mut kernel = [
        KernelClock::Monotonic,
        KernelClock::Realtime,
        KernelClock::MonotonicRaw,
        KernelClock::Boottime,
    ]
    .map(KernelClock::name)
    .to_vec();
    kernel.sort_unstable();
    kernel.dedup();
    let coarse = if cfg!(any(target_os = "linux", target_os = "freebsd")) {
        2
    } else {
        0
    };
    7 + kernel.len() + coarse
}

/// A fresh, empty directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// A path below a regular file, which no one can create.
pub fn under_a_file() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml/x").to_string()
}

/// Reads an SVG file and checks that it is one.
pub fn assert_svg(path: &std::path::Path) {
    let svg = std::fs::read_to_string(path).expect("the SVG was written");
    assert!(
        svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "{}",
        path.display()
    );
}

/// (Linux only: `latency` and `load` are the subcommands Ctrl-C ends.)
///
/// Starts the binary with `args`, waits for its first line of output (which
/// comes after its Ctrl-C handler is in place), sends SIGINT, and checks that
/// it then exits successfully. Returns the first line and the rest.
#[cfg(target_os = "linux")]
pub fn interrupted(args: &[&str]) -> (String, String) {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;

    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("reads");
    // SAFETY: kill with a child's pid and a valid signal touches no memory.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("reads");
    assert!(child.wait().expect("exits").success(), "{first}{rest}");
    (first, rest)
}
