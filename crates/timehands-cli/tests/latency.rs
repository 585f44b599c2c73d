//! `timehands latency`: cyclictest's flags, line and histogram layout, the
//! JSON fields it adds, Ctrl-C, and one-line errors. Short runs (a few dozen
//! wakeups of 200 µs); nothing here depends on how late a wakeup is.

// `latency` is Linux's alone; elsewhere it refuses (tests/linux_only.rs).
#![cfg(target_os = "linux")]

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
        assert!(l.cycles <= 20, "{text}");
        assert!(l.min <= l.avg && l.avg <= l.max, "{text}");
    }
    // As cyclictest: the first thread to make its loops ends the run.
    assert_eq!(lines.iter().map(|l| l.cycles).max(), Some(20), "{text}");
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
    assert_eq!(lines.iter().map(|l| l.cycles).max(), Some(20), "{text}");
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
    // Every wakeup is in a bucket or an overflow; the first thread to make
    // its 30 ended the run.
    let wakeups = [totals[0] + overflows[0], totals[1] + overflows[1]];
    assert_eq!(wakeups.iter().max(), Some(&30), "{text}");
    assert_eq!(totals[2] + overflows[2], wakeups[0] + wakeups[1], "{text}");
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
    assert_eq!(doc["schema_version"], 2);
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
    let mut most = 0;
    for t in ["0", "1"] {
        let th = &doc["thread"][t];
        let cycles = th["cycles"].as_u64().expect("cycles");
        assert!(cycles <= 25, "{th}");
        most = most.max(cycles);
        // With a histogram every thread gets the same interval (distance 0).
        assert_eq!(th["interval_us"], 200, "{th}");
        assert!(th["missed_periods"].is_u64(), "{th}");
        assert!(th["timer_slack_ns"].is_u64(), "{th}");
        if cycles == 0 {
            // A thread the machine's load kept from its first wakeup before
            // the other ended the run: no samples, so no statistics.
            continue;
        }
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
        assert_eq!(bucketed + over, cycles, "{th}");
        assert_eq!(
            th["histogram_overflow_cycles"]
                .as_array()
                .expect("cycles")
                .len() as u64,
            over.min(3)
        );
        overflows += over;
    }
    // The first thread to make its loops ended the run.
    assert_eq!(most, 25, "{doc}");
    assert_eq!(doc["histogram_overflows"], overflows);
}

#[test]
fn json_without_a_histogram_has_an_empty_one_and_null_overflows() {
    let doc = json_of(&["-l", "5", "-i", "200", "--json"]);
    assert!(doc["histogram_overflows"].is_null(), "{doc}");
    assert_eq!(
        doc["thread"]["0"]["histogram"],
        serde_json::json!({}),
        "{doc}"
    );
    // Pinned without -a, as cyclictest 2.40 pins thread N to the N-th CPU.
    assert!(doc["thread"]["0"]["cpu"].as_u64().is_some(), "{doc}");
    assert!(doc["missed_periods"].is_u64(), "{doc}");
}

#[test]
fn json_has_cyclictests_header_fields_with_their_names_and_types() {
    let doc = json_of(&["-l", "5", "-i", "200", "-N", "--json"]);
    assert_eq!(doc["file_version"], 1);
    assert!(
        doc["cmdline:"]
            .as_str()
            .is_some_and(|c| c.contains("latency")),
        "{doc}"
    );
    assert_eq!(doc["rt_test_version:"], "2.40");
    for field in ["start_time", "end_time"] {
        let date = doc[field].as_str().expect("a date");
        // `Mon, 23 Nov 2026 20:31:52 +0000`
        let parts: Vec<&str> = date.split(' ').collect();
        assert_eq!(parts.len(), 6, "{date}");
        assert!(parts[0].ends_with(',') && parts[4].len() == 8, "{date}");
        assert_eq!(parts[5], "+0000", "{date}");
    }
    assert_eq!(doc["return_code"], 0);
    assert_eq!(doc["resolution_in_ns"], 1);
    assert!(doc["thread"]["0"]["node"].is_i64(), "{doc}");
    assert!(doc["thread"]["0"]["avg"].is_f64(), "{doc}");
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
        (&["-c", "2"][..], "--clock"),
        (&["-o", "10", "-l", "1"][..], "-o 10"),
        (&["-o", "0", "-v"][..], "--oscope"),
        (&["--policy", "deadline"][..], "--policy"),
        (&["-A", "-1"][..], "--aligned"),
        (&["-A", "--secaligned"][..], "--secaligned"),
        (
            &["--mainaffinity", "99999", "-l", "1"][..],
            "--mainaffinity 99999",
        ),
        (&["--service", "-x"][..], "--posix_timers"),
        (&["--service", "-c", "1", "-l", "1"][..], "--service -c 1"),
        (&["-F", missing, "-l", "1"][..], "-F"),
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

#[test]
fn the_timer_slack_is_the_threads_own_unless_the_least_is_asked() {
    let slack = |args: &[&str]| {
        let doc = json_of(&[&["-l", "3", "-i", "200", "--json"][..], args].concat());
        doc["thread"]["0"]["timer_slack_ns"]
            .as_u64()
            .expect("slack")
    };
    // A new thread inherits this process's slack; the least is 1 ns.
    let own = std::fs::read_to_string("/proc/self/timerslack_ns")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if let Some(own) = own {
        assert_eq!(slack(&[]), own);
    }
    assert_eq!(slack(&["--least-slack"]), 1);
    let text = stdout_of(&["-q", "-l", "3", "-i", "200", "--least-slack"]);
    assert!(
        text.contains("# timer slack: 1 ns (asked for the least"),
        "{text}"
    );
}

#[test]
fn nsecs_prints_figures_in_ns_with_wider_columns() {
    let text = stdout_of(&["-q", "-l", "5", "-i", "200", "-N"]);
    let line = text.lines().find(|l| l.starts_with("T:")).expect("a line");
    // Act:%8ld Avg:%8ld in ns, as cyclictest prints them.
    let act = line.split("Act:").nth(1).expect("Act");
    assert_eq!(act.find(" Avg:"), Some(8), "{line}");
    let min: u64 = line.split("Min:").nth(1).expect("Min")[..7]
        .trim()
        .parse()
        .expect("ns");
    assert!(
        min >= 1000,
        "a wakeup takes more than a microsecond: {line}"
    );
}

#[test]
fn verbose_prints_every_value_and_oscope_reduces_them() {
    let text = stdout_of(&["-v", "-l", "6", "-i", "200"]);
    assert!(text.starts_with("Max CPUs = "), "{text}");
    assert!(text.contains("\nThread 0 Interval: 200\n"), "{text}");
    let values: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("       0:"))
        .collect();
    assert_eq!(values.len(), 6, "{text}");
    for (cycle, line) in values.iter().enumerate() {
        // %8d:%8lu:%8ld
        assert_eq!(line.len(), 26, "{line}");
        assert_eq!(line[9..17].trim().parse::<usize>(), Ok(cycle), "{line}");
    }
    assert!(!text.contains("T: 0 ("), "-v prints no thread line: {text}");
    let text = stdout_of(&["-v", "-o", "3", "-l", "6", "-i", "200"]);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("       0:")).count(),
        2,
        "{text}"
    );
}

#[test]
fn breaktrace_stops_at_the_first_latency_above_it_and_names_it() {
    // Every wakeup is more than 1 ns late (-N: the figures are in ns).
    let text = stdout_of(&["-q", "-N", "-l", "100", "-i", "200", "-b", "1"]);
    let value: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("# Break value: "))
        .expect("a break")
        .parse()
        .expect("a number");
    assert!(value > 1, "{text}");
    // The first wakeup broke the run, and it is the thread's one figure.
    let line = text.lines().find(|l| l.starts_with("T:")).expect("a line");
    let figure = |label: &str| -> u64 {
        let after = line.split(label).nth(1).expect(label);
        after
            .split_whitespace()
            .next()
            .expect("a figure")
            .parse()
            .expect("a number")
    };
    assert_eq!((figure("C:"), figure("Max:")), (1, value), "{text}");
    let tid = text
        .lines()
        .find_map(|l| l.strip_prefix("# Break thread: "))
        .expect("tid");
    let ids = text
        .lines()
        .find_map(|l| l.strip_prefix("# Thread Ids: "))
        .expect("ids");
    assert_eq!(ids.trim_start_matches('0'), tid, "{text}");
    let doc = json_of(&["-N", "-l", "100", "-i", "200", "-b", "1", "--json"]);
    assert_eq!(doc["stopped_by"], "breaktrace", "{doc}");
}

#[test]
fn spikes_above_the_trigger_are_listed_up_to_the_nodes_and_counted() {
    // Every wakeup is more than 1 ns late: all 20 are spikes.
    let text = stdout_of(&[
        "-q",
        "-N",
        "-l",
        "20",
        "-i",
        "200",
        "--spike",
        "1",
        "--spike-nodes",
        "3",
    ]);
    let spikes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("T: 0 Spike:"))
        .collect();
    assert_eq!(spikes.len(), 3, "{text}");
    for s in &spikes {
        // T:%2d Spike:%8ld: TS: %12ld
        assert_eq!(s.len(), 37, "{s}");
    }
    let count: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("spikes = "))
        .expect("a count")
        .parse()
        .expect("a number");
    assert_eq!(count, 20, "{text}");
    let none = stdout_of(&["-q", "-l", "5", "-i", "200", "--spike", "0"]);
    assert!(!none.contains("spikes ="), "--spike 0 is off: {none}");
}

#[test]
fn every_way_of_waiting_measures_the_loops_asked_for() {
    for way in [
        &["-r"][..],
        &["-s"],
        &["-x"],
        &["-c", "1"],
        &["-A", "50", "-t", "2"],
        &["--secaligned", "100"],
    ] {
        let doc = json_of(&[&["-l", "3", "-i", "300", "--json"][..], way].concat());
        let cycles = doc["thread"]
            .as_object()
            .expect("threads")
            .values()
            .map(|t| t["cycles"].as_u64().expect("cycles"));
        assert_eq!(cycles.max(), Some(3), "{way:?}: {doc}");
    }
}

#[test]
fn policy_and_priospread_follow_cyclictests_rules() {
    let text = stdout_of(&["-l", "3", "-i", "200", "--policy", "batch"]);
    assert!(
        text.starts_with("# ") && text.contains("policy: batch/other: loadavg: "),
        "{text}"
    );
    let out = latency(&[
        "-q",
        "-l",
        "3",
        "-i",
        "200",
        "-t",
        "2",
        "-p",
        "50",
        "--priospread",
        "--policy",
        "rr",
    ]);
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout);
        let priorities: Vec<u64> = thread_lines(&text).iter().map(|l| l.priority).collect();
        assert_eq!(priorities, [50, 49], "{text}");
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("SCHED_RR"), "{err}");
    }
}

#[test]
fn laptop_and_default_system_leave_cpu_dma_latency_alone() {
    for flag in ["--laptop", "--default-system"] {
        let text = stdout_of(&["-q", "-l", "2", "-i", "200", flag]);
        assert!(!text.contains("cpu_dma_latency"), "{flag}: {text}");
    }
    let doc = json_of(&["-l", "2", "-i", "200", "--latency", "5", "--json"]);
    let request = doc["settings"]["cpu_dma_latency"].as_str().expect("said");
    assert!(
        request == "5us" || request.starts_with("not set: "),
        "{doc}"
    );
}

#[test]
fn the_named_pipe_gives_a_reader_the_thread_lines() {
    let dir = support::scratch("latency-fifo");
    let fifo = dir.join("stats");
    let mut child = std::process::Command::new(support::BIN)
        .args(["latency", "-q", "-i", "500", "-D", "3", "-F"])
        .arg(&fifo)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    let mut text = String::new();
    for _ in 0..200 {
        if let Ok(read) = std::fs::read_to_string(&fifo) {
            text = read;
            if !text.is_empty() {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill with a child's pid and a valid signal touches no memory.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().expect("exits").success());
    assert!(text.starts_with("T: 0 ("), "{text:?}");
    assert!(!fifo.exists(), "the pipe is removed at the end");
}

#[test]
fn tracemark_without_tracefs_is_one_line_and_a_non_zero_exit() {
    let mounted = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|dir| std::path::Path::new(dir).join("trace_marker").exists());
    if mounted {
        // It would stop the machine's tracing: not a test's business.
        eprintln!("skipped: tracefs is mounted here, and --tracemark would stop tracing");
        return;
    }
    let out = latency(&["-q", "-l", "2", "-i", "200", "-b", "1000", "--tracemark"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("timehands: --tracemark: tracefs is not mounted"),
        "{err}"
    );
}

#[test]
fn what_this_machine_cannot_do_is_one_line_and_a_non_zero_exit() {
    // --smi needs an Intel CPU's MSR; --tracemark needs tracefs.
    let out = latency(&["-q", "-l", "2", "-i", "200", "--smi"]);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("timehands: --smi: "), "{err}");
    } else {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(" SMI:"), "{text}");
    }
}
