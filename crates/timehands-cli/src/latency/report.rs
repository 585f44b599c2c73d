//! What `latency` prints: cyclictest's per-thread line and histogram layout,
//! byte for byte, then its own lines (marked `#`, so that scripts written for
//! cyclictest skip them), and the JSON document.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;
use serde::ser::SerializeMap;

use super::measure::{Setup, ThreadPlan};
use super::stats::{Summary, ThreadStats};
use super::sysinfo::SysInfo;

/// The version of the JSON document's layout; it changes when a field changes
/// meaning or goes away (new fields may appear without it).
pub const SCHEMA_VERSION: u32 = 1;

/// What one thread was asked, how it set up, and what it measured.
pub struct ThreadResult {
    /// What it was asked to do.
    pub plan: ThreadPlan,
    /// Its thread id and timer slack.
    pub setup: Setup,
    /// What it recorded.
    pub stats: ThreadStats,
}

/// cyclictest's line: `T: 0 (12345) P:80 I:1000 C:   5000 Min:     11 Act:   18 Avg:   19 Max:    2999`.
pub fn thread_line(plan: &ThreadPlan, tid: i32, s: Summary) -> String {
    format!(
        "T:{:2} ({:5}) P:{:2} I:{} C:{:7} Min:{:7} Act:{:5} Avg:{:5} Max:{:8}",
        plan.index,
        tid,
        plan.priority,
        plan.interval_us,
        s.cycles,
        s.min_us,
        s.act_us,
        s.avg_us,
        s.max_us
    )
}

/// cyclictest's status line above the thread lines.
pub fn policy_line(priority: u8, loadavg: &str) -> String {
    let policy = if priority > 0 { "fifo" } else { "other/other" };
    format!("policy: {policy}: loadavg: {loadavg}")
}

/// What cyclictest does not print: missed periods and percentiles.
pub fn extra_line(r: &ThreadResult) -> String {
    let us = |q: f64| {
        r.stats
            .percentile_ns(q)
            .map_or("-".to_string(), |ns| format!("{:.1}", ns as f64 / 1000.0))
    };
    format!(
        "# T:{:2} Missed:{:7} P50:{:>8} P99:{:>8} P99.9:{:>8} (us)",
        r.plan.index,
        r.stats.missed(),
        us(0.5),
        us(0.99),
        us(0.999)
    )
}

/// The timer slack the threads ran with, on one line.
pub fn slack_line(results: &[ThreadResult]) -> String {
    let mut slacks: Vec<u64> = results.iter().map(|r| r.setup.timer_slack_ns).collect();
    slacks.sort_unstable();
    slacks.dedup();
    let list: Vec<String> = slacks.iter().map(|ns| format!("{ns} ns")).collect();
    // Linux gives real-time threads no slack at all, whatever they ask.
    let why = if slacks.contains(&0) {
        "; real-time threads have none"
    } else {
        ""
    };
    format!(
        "# timer slack: {} (asked for the least, 1 ns{why})",
        list.join(", ")
    )
}

/// cyclictest's histogram (`-h`, `-H` for the all-threads column), in its
/// exact layout. Every result must carry buckets of the same bound.
pub fn write_histogram(
    w: &mut impl Write,
    results: &[ThreadResult],
    all_column: bool,
) -> io::Result<()> {
    let buckets: Vec<_> = results.iter().filter_map(|r| r.stats.buckets()).collect();
    let all = all_column && results.len() > 1;
    let bound = buckets.first().map_or(0, |b| b.counts().len());
    writeln!(w, "# Histogram")?;
    for i in 0..bound {
        let row: Vec<String> = buckets
            .iter()
            .map(|b| format!("{:06}", b.counts()[i]))
            .collect();
        write!(w, "{i:06} {}", row.join("\t"))?;
        if all {
            let sum: u64 = buckets.iter().map(|b| b.counts()[i]).sum();
            write!(w, "\t{sum:06}")?;
        }
        writeln!(w)?;
    }
    let totals: Vec<u64> = buckets.iter().map(|b| b.counts().iter().sum()).collect();
    let summaries: Vec<Summary> = results.iter().map(|r| r.stats.summary()).collect();
    let overflows: Vec<u64> = buckets.iter().map(|b| b.overflows()).collect();
    let row =
        |w: &mut dyn Write, label: &str, values: &[u64], width: usize, all_value: Option<u64>| {
            write!(w, "# {label}:")?;
            for v in values {
                write!(w, " {v:0width$}")?;
            }
            if let Some(v) = all_value.filter(|_| all) {
                write!(w, " {v:0width$}")?;
            }
            writeln!(w)
        };
    row(w, "Total", &totals, 9, Some(totals.iter().sum()))?;
    let mins: Vec<u64> = summaries.iter().map(|s| s.min_us).collect();
    row(w, "Min Latencies", &mins, 5, None)?;
    let avgs: Vec<u64> = summaries.iter().map(|s| s.avg_us).collect();
    row(w, "Avg Latencies", &avgs, 5, None)?;
    let maxes: Vec<u64> = summaries.iter().map(|s| s.max_us).collect();
    row(w, "Max Latencies", &maxes, 5, maxes.iter().max().copied())?;
    row(
        w,
        "Histogram Overflows",
        &overflows,
        5,
        Some(overflows.iter().sum()),
    )?;
    writeln!(w, "# Histogram Overflow at cycle number:")?;
    for (i, b) in buckets.iter().enumerate() {
        write!(w, "# Thread {i}:")?;
        for cycle in b.overflow_cycles() {
            write!(w, " {cycle:05}")?;
        }
        let others = b.overflows() - b.overflow_cycles().len() as u64;
        if others > 0 {
            write!(w, " # {others:05} others")?;
        }
        writeln!(w)?;
    }
    writeln!(w)
}

/// The settings of a run, as JSON names them.
#[derive(Serialize)]
pub struct Settings {
    /// `-i`, µs.
    pub interval_us: u64,
    /// `-d` as applied (0 with a histogram), µs.
    pub distance_us: u64,
    /// `-p`; 0 for SCHED_OTHER.
    pub priority: u8,
    /// `fifo` or `other`.
    pub policy: &'static str,
    /// `-l`; 0 for no limit.
    pub loops: u64,
    /// `-D`, seconds.
    pub duration_s: Option<u64>,
    /// `-m`.
    pub mlockall: bool,
    /// `-h`/`-H`, µs.
    pub histogram_us: Option<usize>,
    /// The PM QoS request (cyclictest's /dev/cpu_dma_latency), or why it
    /// could not be made.
    pub cpu_dma_latency: String,
    /// How the threads waited: `clock_nanosleep`, or `timer service`
    /// (`--service`).
    pub waiter: &'static str,
}

/// The JSON document: cyclictest's fields (`sysinfo`, `num_threads`,
/// `resolution_in_ns`, `thread` keyed by number with `cycles`, `min`, `max`,
/// `avg`, `cpu`, `histogram`), and the rest.
#[derive(Serialize)]
pub struct Document<'a> {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Which tool wrote it.
    pub tool: &'static str,
    /// Its version.
    pub version: &'static str,
    /// The command line.
    pub cmdline: String,
    /// Seconds since the epoch at the start and the end.
    pub start_unix_s: u64,
    /// See `start_unix_s`.
    pub end_unix_s: u64,
    /// `loops`, `duration` or `signal`.
    pub stopped_by: &'static str,
    /// The system.
    pub sysinfo: &'a SysInfo,
    /// The settings.
    pub settings: Settings,
    /// How many threads measured.
    pub num_threads: usize,
    /// 0: the figures are in µs (cyclictest's field).
    pub resolution_in_ns: u8,
    /// Samples at or above the histogram bound, over all threads (`null`
    /// without `-h`).
    pub histogram_overflows: Option<u64>,
    /// Missed periods over all threads.
    pub missed_periods: u64,
    /// Each thread's figures.
    pub thread: Threads<'a>,
}

/// The threads as a map from their number, in order.
pub struct Threads<'a>(pub &'a [ThreadResult]);

impl Serialize for Threads<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for r in self.0 {
            map.serialize_entry(&r.plan.index.to_string(), &ThreadJson::of(r))?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct ThreadJson {
    tid: i32,
    cpu: Option<usize>,
    priority: u8,
    interval_us: u64,
    timer_slack_ns: u64,
    cycles: u64,
    min: u64,
    act: u64,
    avg: f64,
    max: u64,
    missed_periods: u64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    p99_9_us: Option<f64>,
    histogram: Option<BTreeMap<usize, u64>>,
    histogram_overflows: Option<u64>,
    histogram_overflow_cycles: Option<Vec<u64>>,
}

impl ThreadJson {
    fn of(r: &ThreadResult) -> ThreadJson {
        let s = r.stats.summary();
        let us = |q: f64| r.stats.percentile_ns(q).map(|ns| ns as f64 / 1000.0);
        let buckets = r.stats.buckets();
        ThreadJson {
            tid: r.setup.tid,
            cpu: r.plan.cpu,
            priority: r.plan.priority,
            interval_us: r.plan.interval_us,
            timer_slack_ns: r.setup.timer_slack_ns,
            cycles: s.cycles,
            min: s.min_us,
            act: s.act_us,
            // Two decimals, as cyclictest writes it.
            avg: (r.stats.mean_us() * 100.0).round() / 100.0,
            max: s.max_us,
            missed_periods: r.stats.missed(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p99_9_us: us(0.999),
            // Only the buckets that counted something, as cyclictest writes them.
            histogram: buckets.map(|b| {
                b.counts()
                    .iter()
                    .enumerate()
                    .filter(|&(_, &n)| n > 0)
                    .map(|(i, &n)| (i, n))
                    .collect()
            }),
            histogram_overflows: buckets.map(|b| b.overflows()),
            histogram_overflow_cycles: buckets.map(|b| b.overflow_cycles().to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(index: usize, samples_us: &[u64], bound_us: Option<usize>) -> ThreadResult {
        let mut stats = ThreadStats::new(bound_us);
        for us in samples_us {
            stats.record(us * 1000 + 500);
        }
        ThreadResult {
            plan: ThreadPlan {
                index,
                interval_us: 1000,
                cpu: None,
                priority: 80,
            },
            setup: Setup {
                tid: 4242,
                timer_slack_ns: 1,
            },
            stats,
        }
    }

    #[test]
    fn the_thread_line_is_cyclictests() {
        let r = result(0, &[11, 30, 18], None);
        assert_eq!(
            thread_line(&r.plan, r.setup.tid, r.stats.summary()),
            "T: 0 ( 4242) P:80 I:1000 C:      3 Min:     11 Act:   18 Avg:   19 Max:      30"
        );
    }

    #[test]
    fn the_histogram_has_cyclictests_layout_with_the_all_column() {
        let results = [
            result(0, &[0, 2, 2, 7], Some(3)),
            result(1, &[1, 5, 6], Some(3)),
        ];
        let mut out = Vec::new();
        write_histogram(&mut out, &results, true).expect("writes");
        let want = "\
# Histogram
000000 000001\t000000\t000001
000001 000000\t000001\t000001
000002 000002\t000000\t000002
# Total: 000000003 000000001 000000004
# Min Latencies: 00000 00001
# Avg Latencies: 00002 00004
# Max Latencies: 00007 00006 00007
# Histogram Overflows: 00001 00002 00003
# Histogram Overflow at cycle number:
# Thread 0: 00003
# Thread 1: 00001 00002

";
        assert_eq!(String::from_utf8(out).expect("utf-8"), want);
    }

    #[test]
    fn without_h_capital_or_with_one_thread_there_is_no_all_column() {
        let one = [result(0, &[0, 9, 9, 9, 9], Some(2))];
        let mut out = Vec::new();
        write_histogram(&mut out, &one, true).expect("writes");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains("\n000000 000001\n"), "{text}");
        assert!(text.contains("# Max Latencies: 00009\n"), "{text}");
        // Two overflow cycle numbers kept (the bound), the rest counted.
        assert!(
            text.contains("# Thread 0: 00001 00002 # 00002 others\n"),
            "{text}"
        );
    }

    #[test]
    fn the_extra_line_gives_missed_periods_and_percentiles() {
        let mut r = result(3, &[10; 100], None);
        r.stats.add_missed(2);
        let line = extra_line(&r);
        assert!(line.starts_with("# T: 3 Missed:      2 P50:"), "{line}");
        assert!(line.contains("P99:    10.5"), "{line}");
    }
}
