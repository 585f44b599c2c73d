//! The kernel's clocksource switched under our clock, on the real kernel:
//! `tsc` → `kvm-clock` → `tsc` (or the other way, from whichever it runs
//! on) while a thread of this process reads, and a fresh `timehands info`
//! started under each. Root only, where sysfs shows the clocksource and
//! both are available (CI runs as root on a KVM guest); elsewhere it says
//! why it is skipped. The original clocksource is put back whatever
//! happens (a guard's `Drop`). A test binary of its own, so that no other
//! test of this crate runs while the clocksource is switched (cargo runs
//! test binaries one at a time).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use timehands::ClockId;
use timehands::sys::{KernelClock, kernel_nanos};

/// Where Linux says, and is told, which clocksource keeps time.
const CURRENT: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
/// The clocksources it could switch to.
const AVAILABLE: &str = "/sys/devices/system/clocksource/clocksource0/available_clocksource";

/// Puts the clocksource it was made with back when dropped, a panic
/// included.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(CURRENT, &self.0) {
            eprintln!("could not put the clocksource back to {}: {e}", self.0);
        }
    }
}

/// Switches the kernel to `source`, and checks it took.
fn switch_to(source: &str) {
    std::fs::write(CURRENT, source).expect("the clocksource switched");
    let now = std::fs::read_to_string(CURRENT).expect("readable");
    assert_eq!(now.trim(), source);
}

/// What a reader thread saw: reads that stepped back, and reads further
/// from CLOCK_MONOTONIC (read after them, or before) than `getres` states.
#[derive(Debug, Default)]
struct Seen {
    reads: u64,
    backward: u64,
    beyond_bound: u64,
    largest_offset_ns: u64,
    /// The furthest a read stood beyond the bound, ns.
    furthest_beyond_ns: u64,
}

/// Reads our Monotonic between two reads of CLOCK_MONOTONIC until `stop`.
fn read_until(stop: &AtomicBool) -> Seen {
    let mut seen = Seen::default();
    let mut last = timehands::gettime(ClockId::Monotonic);
    while !stop.load(Ordering::Relaxed) {
        let before = kernel_nanos(KernelClock::Monotonic).expect("the kernel's clock") as i128;
        let ours = timehands::gettime(ClockId::Monotonic);
        let after = kernel_nanos(KernelClock::Monotonic).expect("the kernel's clock") as i128;
        let bound = timehands::getres(ClockId::Monotonic).accuracy.as_nanos() as i128;
        let ours_ns = ours.as_nanos() as i128;
        // Ours is within the bound of CLOCK_MONOTONIC at its read, which
        // lies between the two kernel reads.
        let off = if ours_ns < before {
            before - ours_ns
        } else if ours_ns > after {
            ours_ns - after
        } else {
            0
        };
        seen.largest_offset_ns = seen.largest_offset_ns.max(off as u64);
        seen.beyond_bound += u64::from(off > bound);
        seen.furthest_beyond_ns = seen.furthest_beyond_ns.max((off - bound).max(0) as u64);
        seen.backward += u64::from(ours < last);
        seen.reads += 1;
        last = ours;
    }
    seen
}

/// A fresh process's `info` after it read a while (`report`, which runs
/// the cross-CPU check first): its counter, and each verdict's check,
/// whether it passed, and what it found.
fn fresh_info() -> (String, Vec<(String, bool, String)>) {
    let doc = support::json(&["report", "--rounds", "20", "--json"]);
    let info = &doc["info"];
    let counter = info["counter"].as_str().expect("a counter").to_string();
    let verdicts = info["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .map(|v| {
            let text = |key: &str| v[key].as_str().expect("text").to_string();
            (text("check"), v["passed"] == true, text("detail"))
        })
        .collect();
    (counter, verdicts)
}

/// How far beyond the bound `getres` states a read may stand at a switch:
/// the kernel keeps CLOCK_MONOTONIC continuous across a switch, but the new
/// clocksource's rate and phase against the TSC differ from the old one's
/// by some hundred ns, which no `getres` is told of (the NTP state does not
/// change) until the next steering measures it.
const SWITCH_SLACK_NS: u64 = 1_000;

/// Switched `tsc` → `kvm-clock` → `tsc` (from the one it runs on, and back
/// to it) while a thread reads: no read steps back, none is further from
/// CLOCK_MONOTONIC than the bound `getres` states and
/// [`SWITCH_SLACK_NS`]; a fresh process under
/// each clocksource runs on the TSC where the TSC's evidence holds (an
/// invariant TSC, as CPUID says here), and says on which evidence.
#[test]
fn switching_the_clocksource_both_ways() {
    let Ok(original) = std::fs::read_to_string(CURRENT) else {
        println!("skipped: {CURRENT} is not there (not Linux, or no sysfs)");
        return;
    };
    let original = original.trim().to_string();
    let available = std::fs::read_to_string(AVAILABLE).unwrap_or_default();
    let available: Vec<&str> = available.split_whitespace().collect();
    if !(available.contains(&"tsc") && available.contains(&"kvm-clock")) {
        println!("skipped: the kernel offers {available:?}, not both tsc and kvm-clock");
        return;
    }
    if let Err(e) = std::fs::OpenOptions::new().write(true).open(CURRENT) {
        println!("skipped: {CURRENT} cannot be written ({e}): run as root");
        return;
    }
    let _restore = Restore(original.clone());
    let other = if original == "tsc" {
        "kvm-clock"
    } else {
        "tsc"
    };
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || read_until(&stop))
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut fresh = vec![(original.clone(), fresh_info())];
    for source in [other, original.as_str()] {
        switch_to(source);
        std::thread::sleep(Duration::from_millis(300));
        fresh.push((source.to_string(), fresh_info()));
    }
    stop.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("the reader ran");
    println!("the reader through the switches: {seen:?}");
    assert!(seen.reads > 0);
    assert_eq!(seen.backward, 0, "{seen:?}");
    assert!(seen.furthest_beyond_ns <= SWITCH_SLACK_NS, "{seen:?}");
    for (source, (counter, verdicts)) in fresh {
        println!("a fresh process on {source}: {counter}, {verdicts:?}");
        let verdict = |check: &str| verdicts.iter().find(|v| v.0.starts_with(check));
        let passed = |check: &str| verdict(check).is_some_and(|v| v.1);
        if passed("invariant TSC") && passed("cross-CPU TSC check") {
            assert_eq!(counter, "TSC", "on {source}: {verdicts:?}");
            let evidence = if source == "tsc" {
                "CPUID says invariant, and the kernel keeps time with it"
            } else {
                "its own evidence"
            };
            let trusted_on = verdict("TSC trusted on").expect("the evidence named");
            assert!(
                trusted_on.2.starts_with(evidence),
                "on {source}: {verdicts:?}"
            );
        }
    }
}
