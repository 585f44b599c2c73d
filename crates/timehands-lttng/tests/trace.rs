//! The plugin in LTTng itself: a session daemon of the test's own, started
//! with `LTTNG_UST_CLOCK_PLUGIN`, traces `tests/c/traced.c` (two threads on two
//! CPUs taking turns at a tracepoint), and babeltrace2 reads the trace back.
//! Where LTTng's tools or headers are missing, the test says why and passes
//! without running (CI installs them where it can).
// Miri cannot run LTTng.
#![cfg(not(miri))]

mod support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use support::{Lttng, babeltrace2};

/// Events the traced program fires.
const EVENTS: usize = 2000;

/// One event as babeltrace2 prints it: its timestamp, CPU and seq.
#[derive(Debug)]
struct Event {
    /// The time between the brackets, in ns: the clock's value with
    /// `--clock-cycles`, Unix time with `--clock-seconds`.
    time: u64,
    cpu: i64,
    seq: usize,
}

/// The value of `name = VALUE` in `line`, up to the next `,` or ` }`.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name} = "))? + name.len() + 3;
    let rest = &line[start..];
    let end = rest.find([',', ' ']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `SECONDS.NANOSECONDS` or a plain count, as ns.
fn nanos(time: &str) -> u64 {
    let parsed = match time.split_once('.') {
        Some((seconds, fraction)) if fraction.len() == 9 => seconds
            .parse::<u64>()
            .ok()
            .zip(fraction.parse::<u64>().ok())
            .map(|(s, ns)| s * 1_000_000_000 + ns),
        Some(_) => None,
        None => time.parse().ok(),
    };
    parsed.unwrap_or_else(|| panic!("babeltrace2 printed the time {time:?}"))
}

/// The events babeltrace2 prints from `trace`, with `clock_option`, in its order.
fn events(trace: &Path, clock_option: &str) -> Vec<Event> {
    let text =
        babeltrace2([OsString::from(clock_option), trace.into()]).unwrap_or_else(|e| panic!("{e}"));
    text.lines()
        .filter(|line| line.contains("timehands_test:tick"))
        .map(|line| {
            let time = line
                .strip_prefix('[')
                .and_then(|rest| rest.split_once(']'))
                .unwrap_or_else(|| panic!("no timestamp in {line:?}"))
                .0;
            let number = |name| {
                field(line, name)
                    .and_then(|value| value.parse().ok())
                    .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            };
            Event {
                time: nanos(time),
                cpu: number("cpu_id"),
                seq: number("seq") as usize,
            }
        })
        .collect()
}

/// The two numbers after `name` in the traced program's output.
fn bracket(output: &str, name: &str) -> [i64; 2] {
    let values: Vec<i64> = output
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} line in {output:?}"))
        .split(' ')
        .map(|value| value.parse().expect("the program prints numbers"))
        .collect();
    values
        .try_into()
        .unwrap_or_else(|_| panic!("{name} is not two numbers in {output:?}"))
}

/// The directory of the trace's metadata (per-user buffers: one per ABI).
fn metadata_dir(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
        let path = entry.path();
        if path.file_name() == Some("metadata".as_ref()) {
            Some(dir.to_path_buf())
        } else if path.is_dir() {
            metadata_dir(&path)
        } else {
            None
        }
    })
}

/// Every event, in order, from both CPUs, between the program's clock reads
/// before and after them, on the clock named timehands_monotonic.
#[test]
fn lttng_traces_with_the_timehands_clock() {
    if let Some(why) = support::missing_tools() {
        eprintln!("skipped: LTTng cannot run here: {why}");
        return;
    }
    let plugin = support::plugin().unwrap_or_else(|e| panic!("{e}"));
    let lttng = Lttng::start(&plugin).unwrap_or_else(|e| panic!("{e}"));
    let program = lttng.build("traced.c").unwrap_or_else(|e| panic!("{e}"));
    let trace = lttng.dir().join("trace");
    let output_option = format!("--output={}", trace.display());
    for args in [
        &["create", "timehands-test", &output_option][..],
        &["enable-event", "--userspace", "timehands_test:tick"],
        &["start"],
    ] {
        lttng.lttng(args).unwrap_or_else(|e| panic!("{e}"));
    }
    let output = lttng
        .trace(&program, &[&EVENTS.to_string()], true)
        .unwrap_or_else(|e| panic!("{e}"));
    // destroy stops the session and waits for the trace to be written.
    lttng
        .destroy("timehands-test")
        .unwrap_or_else(|e| panic!("{e}"));

    let metadata =
        metadata_dir(&trace).unwrap_or_else(|| panic!("no metadata under {}", trace.display()));
    let clock = babeltrace2([
        OsString::from("--output-format=ctf-metadata"),
        metadata.into(),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        clock.contains("name = \"timehands_monotonic\";"),
        "the trace's clock is not ours:\n{clock}"
    );
    assert!(
        clock.contains("description = \"timehands: CLOCK_MONOTONIC in ns, read from the "),
        "the clock's description is not ours:\n{clock}"
    );

    let [monotonic_before, monotonic_after] = bracket(&output, "monotonic");
    let [realtime_before, realtime_after] = bracket(&output, "realtime");
    let cpus = bracket(&output, "cpus");
    for (option, before, after) in [
        ("--clock-cycles", monotonic_before, monotonic_after),
        ("--clock-seconds", realtime_before, realtime_after),
    ] {
        let events = events(&trace, option);
        let seqs: Vec<usize> = events.iter().map(|event| event.seq).collect();
        assert_eq!(
            seqs,
            (0..EVENTS).collect::<Vec<_>>(),
            "babeltrace2 {option} lists the events out of order, or misses some"
        );
        for pair in events.windows(2) {
            assert!(
                pair[0].time <= pair[1].time,
                "{option}: {:?} comes after {:?}",
                pair[1],
                pair[0]
            );
        }
        let (before, after) = (before as u64, after as u64);
        for event in &events {
            assert!(
                (before..=after).contains(&event.time),
                "{option}: {event:?} is not within the program's reads, {before} to {after}"
            );
            if cpus[0] >= 0 {
                assert_eq!(
                    event.cpu,
                    cpus[event.seq % 2],
                    "{event:?} is not from the CPU its thread was pinned to"
                );
            }
        }
    }
}
