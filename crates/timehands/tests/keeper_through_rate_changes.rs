//! The kernel's rate changed under a keeper's page by the real kernel
//! (`adjtimex(ADJ_FREQUENCY)`, as chronyd changes it): a process that
//! reads the page reads Monotonic and Realtime within the bound `getres`
//! states at every read, and never back. The keeper follows the change at
//! its next windup; until then the page's hands run at the old rate, and
//! a reader's `getres` asks the kernel its rate and widens the bound by
//! what the change may have cost since the keeper asked.
//!
//! Root only (CI runs as root); elsewhere it says why it is skipped. A
//! test binary of its own, so that no other test of this crate runs while
//! the machine's rate is moved, and under the lock the project's other
//! tests that change the clock take; the kernel's frequency is put back
//! whatever happens.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod machine_clock;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use machine_clock::{ClockLock, adjtimex, kernel, within};
use timehands::ClockId;

/// The page's path, for the keeper half.
const PAGE: &str = "TIMEHANDS_TEST_PAGE";
/// How long the reader half reads.
const READ_FOR: Duration = Duration::from_millis(1_500);
/// The kernel's frequency changes the test makes, ppm, each held 300 ms:
/// as far as chronyd moves it, and back.
const CHANGES_PPM: [i64; 3] = [200, -200, 0];

/// The keeper half: keeps the clock in the page `TIMEHANDS_TEST_PAGE`
/// names until it is killed.
#[test]
#[ignore = "the keeper half, which the test runs"]
fn keeper_half() {
    let path = std::env::var(PAGE).expect("run by the test");
    let keeper = timehands::keeper::Keeper::create(Path::new(&path)).expect("the page is made");
    let Ok(()) = keeper.keep(None, |_| Ok::<(), std::convert::Infallible>(()));
}

/// The reader half: reads the page's Monotonic and Realtime, each checked
/// against the kernel's, for [`READ_FOR`].
#[test]
#[ignore = "the reader half, which the test runs"]
fn reader_half() {
    let start = Instant::now();
    let first = timehands::now();
    let from = timehands::info().keeper;
    assert!(from.starts_with("the keeper's page"), "time from {from}");
    let (mut last, mut reads) = (i128::from(first.as_nanos()), 0u64);
    while start.elapsed() < READ_FOR {
        let (ours, ..) =
            within(ClockId::Monotonic, libc::CLOCK_MONOTONIC).unwrap_or_else(|e| panic!("{e}"));
        assert!(ours >= last, "Monotonic back from {last} to {ours}");
        last = ours;
        within(ClockId::Realtime, libc::CLOCK_REALTIME).unwrap_or_else(|e| panic!("{e}"));
        reads += 1;
    }
    println!(
        "READER OK: {reads} reads within their bounds; first from {from}; last from {}",
        timehands::info().keeper
    );
}

/// This test binary, running one of its halves.
fn half(name: &str, env: &[(&str, &Path)]) -> Child {
    let mut command = Command::new(std::env::current_exe().expect("this test's binary"));
    command
        .args(["--exact", name, "--ignored", "--nocapture"])
        .stdout(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().expect("the half runs")
}

/// The kernel's frequency as the test found it: put back when dropped.
struct Frequency(libc::c_long);

impl Frequency {
    fn save() -> Result<Frequency, String> {
        // SAFETY: a zeroed timex reads the state (modes 0).
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        adjtimex(&mut tx)?;
        Ok(Frequency(tx.freq))
    }

    /// Sets the kernel's frequency to `freq` (ppm in 16.16 fixed point).
    fn set(freq: libc::c_long) -> Result<i32, String> {
        // SAFETY: a zeroed timex with ADJ_FREQUENCY sets the frequency alone.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        tx.modes = libc::ADJ_FREQUENCY;
        tx.freq = freq;
        adjtimex(&mut tx)
    }
}

impl Drop for Frequency {
    fn drop(&mut self) {
        println!("put back: the frequency {:?}", Frequency::set(self.0));
    }
}

/// A half that runs until it is killed: killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory for the page, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
#[cfg_attr(miri, ignore = "changes the kernel's frequency")]
fn a_reader_of_the_page_states_true_bounds_while_the_kernels_rate_changes() {
    // SAFETY: geteuid only reads.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: changing the kernel's frequency needs root");
        return;
    }
    let _lock = ClockLock::take().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch(
        std::env::temp_dir().join(format!("timehands-rate-changes-{}", std::process::id())),
    );
    let page = scratch.0.join("page");
    let frequency = Frequency::save().unwrap_or_else(|e| panic!("{e}"));
    // Root without CAP_SYS_TIME (a container's) may not set it.
    if let Err(e) = Frequency::set(frequency.0) {
        println!("skipped: the kernel refuses to set its frequency: {e}");
        return;
    }
    let _keeper = Running(half("keeper_half", &[(PAGE, &page)]));
    let limit = Instant::now() + Duration::from_secs(10);
    while !timehands::keeper::published(&page) {
        assert!(
            Instant::now() < limit,
            "the keeper published nothing in 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let reader = half("reader_half", &[("TIMEHANDS_PAGE", &page)]);
    std::thread::sleep(Duration::from_millis(300));
    for ppm in CHANGES_PPM {
        Frequency::set(frequency.0 + (ppm << 16))
            .unwrap_or_else(|e| panic!("the kernel's frequency {ppm:+} ppm: {e}"));
        println!(
            "the kernel's frequency {ppm:+} ppm at {} ns",
            kernel(libc::CLOCK_MONOTONIC)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(frequency);
    let output = reader.wait_with_output().expect("the reader ends");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && said.contains("READER OK"),
        "the reader: {}\n{said}",
        output.status
    );
    println!(
        "{}",
        said.lines().find(|l| l.contains("READER OK")).unwrap_or("")
    );
}
