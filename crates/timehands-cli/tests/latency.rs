//! `timehands latency`: cyclictest's flags, line and histogram layout, the
//! JSON fields it adds, Ctrl-C, and one-line errors. Short runs (a few dozen
//! wakeups of 200 µs); nothing here depends on how late a wakeup is.

mod support;

use std::process::Output;

use serde_json::Value;

fn latency(args: &[&str]) -> Output {
    support::run(&[&["latency"][..], args].concat())
}

fn stdout_of(args: &[&str]) -> String {
    let out = latency(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn json_of(args: &[&str]) -> Value {
    let text = stdout_of(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The fields of cyclictest's line `T: 0 (pid) P:80 I:1000 C: 5000 Min: 11
/// Act: 18 Avg: 19 Max: 2999`, checked for its exact spacing.
struct Line {
    thread: u64,
    priority: u64,
    interval: u64,
    cycles: u64,
    min: u64,
    avg: u64,
    max: u64,
}

/// Every thread's `T:` line in `text`.
fn thread_lines(text: &str) -> Vec<Line> {
    text.lines()
        .filter(|l| l.starts_with("T:"))
        .map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Line {
    let field = |from: usize, to: usize| -> u64 {
        line[from..to]
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{line:?} [{from}..{to}]"))
    };
    assert_eq!(&line[..2], "T:", "{line}");
    assert_eq!(&line[4..6], " (", "{line}");
    assert_eq!(&line[11..15], ") P:", "{line}");
    assert_eq!(&line[17..20], " I:", "{line}");
    let after_interval = line[20..].find(' ').expect("space after I") + 20;
    let rest = &line[after_interval..];
    // After I:<interval>: " C:%7 Min:%7 Act:%5 Avg:%5 Max:%8".
    assert_eq!(rest.len(), 3 + 7 + 5 + 7 + 5 + 5 + 5 + 5 + 5 + 8, "{line}");
    for (at, label) in [
        (0, " C:"),
        (10, " Min:"),
        (22, " Act:"),
        (32, " Avg:"),
        (42, " Max:"),
    ] {
        assert_eq!(&rest[at..at + label.len()], label, "{line}");
    }
    let base = after_interval;
    Line {
        thread: field(2, 4),
        priority: field(15, 17),
        interval: field(20, after_interval),
        cycles: field(base + 3, base + 10),
        min: field(base + 15, base + 22),
        avg: field(base + 37, base + 42),
        max: field(base + 47, base + 55),
    }
}

#[test]
fn quiet_prints_one_cyclictest_line_per_thread_with_distance_applied() {
    let text = stdout_of(&["-q", "-l", "20", "-i", "200", "-t", "2"]);
    let lines = thread_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l.thread, i as u64);
        assert_eq!(l.priority, 0, "no -p: SCHED_OTHER");
        // cyclictest's default distance: thread N at interval + N * 500.
        assert_eq!(l.interval, 200 + 500 * i as u64);
        assert_eq!(l.cycles, 20);
        assert!(l.min <= l.avg && l.avg <= l.max, "{text}");
    }
    // The lines cyclictest lacks.
    for i in 0..2 {
        let extra = format!("# T:{i:2} Missed:");
        let line = text.lines().find(|l| l.starts_with(&extra)).expect(&extra);
        for label in ["P50:", "P99:", "P99.9:"] {
            assert!(line.contains(label), "{line}");
        }
    }
    assert!(
        text.lines().any(|l| l.starts_with("# timer slack: ")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("# kernel ")), "{text}");
}

/// `--service`: the same loop and lines, each wakeup from a hard timer of the
/// timer service; the run says so in a `#` line and in the JSON settings.
#[test]
fn service_waits_on_the_timer_service() {
    let text = stdout_of(&["-q", "-l", "20", "-i", "200", "-t", "2", "--service"]);
    let lines = thread_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines.iter().all(|l| l.cycles == 20), "{text}");
    let service = text
        .lines()
        .find(|l| l.starts_with("# timer service: hard expiry thread "))
        .unwrap_or_else(|| panic!("no service line in {text}"));
    // No -p: the service was not asked for SCHED_FIFO.
    assert!(service.contains("SCHED_OTHER"), "{service}");

    let doc = json_of(&["-l", "10", "-i", "200", "--service", "--json"]);
    assert_eq!(doc["settings"]["waiter"], "timer service");
    assert_eq!(doc["thread"]["0"]["cycles"], 10);
    let doc = json_of(&["-l", "10", "-i", "200", "--json"]);
    assert_eq!(doc["settings"]["waiter"], "clock_nanosleep");
}

#[test]
fn without_quiet_the_last_frame_has_the_policy_line() {
    let text = stdout_of(&["-l", "5", "-i", "200"]);
    let policy = text
        .lines()
        .position(|l| l.starts_with("policy: other/other: loadavg: "));
    let policy = policy.unwrap_or_else(|| panic!("{text}"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[policy + 1], "");
    assert_eq!(parse_line(lines[policy + 2]).cycles, 5);
}

#[test]
fn the_histogram_has_cyclictests_layout() {
    let text = stdout_of(&["-q", "-l", "30", "-i", "200", "-t", "2", "-H", "4"]);
    // Quiet with a histogram: the histogram, no thread lines (as cyclictest).
    assert!(!text.lines().any(|l| l.starts_with("T:")), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "# Histogram")
        .expect("header");
    for (i, row) in lines[at + 1..at + 5].iter().enumerate() {
        let cells: Vec<&str> = row.split(['\t', ' ']).collect();
        assert_eq!(cells[0], format!("{i:06}"), "{row}");
        // Two threads and -H's all-threads column, six digits each.
        assert_eq!(cells.len(), 4, "{row}");
        assert!(cells[1..].iter().all(|c| c.len() == 6), "{row}");
        let sum: u64 = cells[1..3]
            .iter()
            .map(|c| c.parse::<u64>().expect("count"))
            .sum();
        assert_eq!(sum, cells[3].parse::<u64>().expect("count"), "{row}");
    }
    let numbers = |label: &str| -> Vec<u64> {
        let line = lines.iter().find(|l| l.starts_with(label)).expect(label);
        line[label.len()..]
            .split_whitespace()
            .map(|n| n.parse().expect("number"))
            .collect()
    };
    let totals = numbers("# Total:");
    let overflows = numbers("# Histogram Overflows:");
    assert_eq!(totals.len(), 3);
    assert_eq!(overflows.len(), 3);
    // Every wakeup is in a bucket or an overflow.
    assert_eq!(totals[0] + overflows[0], 30);
    assert_eq!(totals[1] + overflows[1], 30);
    assert_eq!(numbers("# Min Latencies:").len(), 2);
    assert_eq!(numbers("# Avg Latencies:").len(), 2);
    assert_eq!(numbers("# Max Latencies:").len(), 3);
    assert!(lines.contains(&"# Histogram Overflow at cycle number:"));
    assert!(lines.iter().any(|l| l.starts_with("# Thread 1:")));
    let line = lines
        .iter()
        .find(|l| l.starts_with("# Total:"))
        .expect("total");
    assert!(
        line.split_whitespace().skip(2).all(|n| n.len() == 9),
        "{line}"
    );
}

#[test]
fn histfile_takes_the_histogram_off_stdout() {
    let dir = std::env::temp_dir().join(format!("timehands-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("hist.txt");
    let text = stdout_of(&[
        "-q",
        "-l",
        "10",
        "-i",
        "200",
        "-h",
        "20",
        "--histfile",
        path.to_str().expect("utf-8"),
    ]);
    assert!(!text.contains("# Histogram"), "{text}");
    let hist = std::fs::read_to_string(&path).expect("written");
    assert!(hist.starts_with("# Histogram\n000000 "), "{hist}");
    assert_eq!(hist.lines().filter(|l| l.len() == 13).count(), 20, "{hist}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn json_has_the_schema_version_percentiles_and_overflow_counts() {
    let doc = json_of(&["-l", "25", "-i", "200", "-t", "2", "-h", "3", "--json"]);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["num_threads"], 2);
    assert_eq!(doc["stopped_by"], "loops");
    for field in ["release", "preemption", "version", "machine"] {
        assert!(
            doc["sysinfo"][field].is_string(),
            "sysinfo.{field} in {doc}"
        );
    }
    assert!(doc["sysinfo"]["virtualized"].is_boolean());
    assert!(doc["sysinfo"]["realtime"].is_u64());
    let mut overflows = 0;
    for t in ["0", "1"] {
        let th = &doc["thread"][t];
        assert_eq!(th["cycles"], 25, "{th}");
        // With a histogram every thread gets the same interval (distance 0).
        assert_eq!(th["interval_us"], 200, "{th}");
        assert!(th["missed_periods"].is_u64(), "{th}");
        assert!(th["timer_slack_ns"].is_u64(), "{th}");
        let p = |name: &str| {
            th[name]
                .as_f64()
                .unwrap_or_else(|| panic!("{name} in {th}"))
        };
        assert!(
            p("p50_us") <= p("p99_us") && p("p99_us") <= p("p99_9_us"),
            "{th}"
        );
        let min = th["min"].as_f64().expect("min");
        let max = th["max"].as_f64().expect("max");
        assert!(
            min <= th["avg"].as_f64().expect("avg")
                && th["avg"].as_f64().expect("avg") <= max + 1.0
        );
        let bucketed: u64 = th["histogram"]
            .as_object()
            .expect("histogram")
            .iter()
            .map(|(bucket, n)| {
                assert!(bucket.parse::<u64>().expect("bucket number") < 3);
                n.as_u64().expect("count")
            })
            .sum();
        let over = th["histogram_overflows"].as_u64().expect("overflows");
        assert_eq!(bucketed + over, 25, "{th}");
        assert_eq!(
            th["histogram_overflow_cycles"]
                .as_array()
                .expect("cycles")
                .len() as u64,
            over.min(3)
        );
        overflows += over;
    }
    assert_eq!(doc["histogram_overflows"], overflows);
}

#[test]
fn json_without_a_histogram_says_null_for_the_overflows() {
    let doc = json_of(&["-l", "5", "-i", "200", "--json"]);
    assert!(doc["histogram_overflows"].is_null(), "{doc}");
    assert!(doc["thread"]["0"]["histogram"].is_null(), "{doc}");
    assert!(doc["missed_periods"].is_u64(), "{doc}");
}

#[test]
fn json_to_a_file_keeps_the_text_on_stdout() {
    let path = std::env::temp_dir().join(format!("timehands-latency-{}.json", std::process::id()));
    let text = stdout_of(&[
        "-q",
        "-l",
        "5",
        "-i",
        "200",
        "--json",
        path.to_str().expect("utf-8"),
    ]);
    assert!(text.lines().any(|l| l.starts_with("T: 0 (")), "{text}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("written")).expect("JSON");
    assert_eq!(doc["thread"]["0"]["cycles"], 5);
    std::fs::remove_file(&path).expect("clean up");
}

#[test]
fn affinity_and_smp_place_the_threads() {
    let doc = json_of(&["-l", "3", "-i", "200", "-t", "2", "-a", "0", "--json"]);
    assert_eq!(doc["thread"]["0"]["cpu"], 0);
    assert_eq!(doc["thread"]["1"]["cpu"], 0);
    let doc = json_of(&["-l", "3", "-i", "200", "-S", "--json"]);
    let threads = doc["thread"].as_object().expect("threads");
    let mut cpus: Vec<u64> = threads
        .values()
        .map(|t| t["cpu"].as_u64().expect("pinned"))
        .collect();
    let n = cpus.len();
    cpus.dedup();
    assert_eq!(cpus.len(), n, "one thread per CPU: {doc}");
    assert_eq!(doc["num_threads"].as_u64(), Some(n as u64));
}

#[test]
fn a_priority_is_had_or_refused_on_one_line() {
    let out = latency(&["-q", "-l", "3", "-i", "200", "-p", "80"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        let line = text.lines().find(|l| l.starts_with("T:")).expect("line");
        assert_eq!(parse_line(line).priority, 80);
    } else {
        // Not allowed here: the reason on one line, as cyclictest exits too.
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("-p 80"), "{err}");
    }
}

#[test]
fn bad_input_is_one_line_naming_it_and_a_non_zero_exit() {
    let missing = "/nonexistent-timehands-dir/out";
    for (args, needle) in [
        (&["-i", "0"][..], "--interval"),
        (&["-p", "100"][..], "--priority"),
        (&["-t", "0"][..], "thread count"),
        (&["-h", "0"][..], "--histogram"),
        (&["-D", "0"][..], "duration"),
        (&["-D", "5x"][..], "duration"),
        (&["-a", "99999"][..], "-a 99999"),
        (&["-a", "zero"][..], "-a zero"),
        (
            &["-h", "1000000", "-t", "200"][..],
            "-h 1000000 with 200 threads",
        ),
        (
            &["-l", "1", "-h", "5", "--histfile", missing][..],
            "--histfile",
        ),
        (&["-l", "1", "--json", missing][..], "--json"),
        (&["--bogus"][..], "--bogus"),
    ] {
        let out = latency(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8(out.stderr).expect("utf-8");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn ctrl_c_stops_the_run_and_prints_the_summary() {
    let (first, rest) = support::interrupted(&["latency", "-q", "-i", "500"]);
    assert!(first.starts_with('#'), "{first}");
    assert!(rest.lines().any(|l| l.starts_with("T: 0 (")), "{rest}");
    assert!(
        rest.lines().any(|l| l.starts_with("# T: 0 Missed:")),
        "{rest}"
    );
}
