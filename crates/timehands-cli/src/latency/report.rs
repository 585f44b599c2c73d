//! What `latency` prints: cyclictest's per-thread line and histogram layout,
//! byte for byte, then its own lines (marked `#`, so that scripts written for
//! cyclictest skip them), and the JSON document.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::SystemTime;

use serde::Serialize;
use serde::ser::SerializeMap;

use super::measure::{Break, Spike};
use super::measure::{Setup, ThreadPlan};
use super::stats::{Summary, ThreadStats, Unit};
use super::sysinfo::SysInfo;

/// The version of the JSON document's layout; it changes when a field changes
/// meaning or goes away (new fields may appear without it). 2: cyclictest's
/// layout (`cpu` always a number, `histogram` always an object).
pub const SCHEMA_VERSION: u32 = 2;

/// The rt-tests release whose cyclictest's flags, output and JSON these are.
pub const RT_TESTS_VERSION: &str = "2.40";

/// What one thread was asked, how it set up, and what it measured.
pub struct ThreadResult {
    /// What it was asked to do.
    pub plan: ThreadPlan,
    /// Its thread id and timer slack.
    pub setup: Setup,
    /// What it recorded.
    pub stats: ThreadStats,
}

/// cyclictest's line: `T: 0 (12345) P:80 I:1000 C:   5000 Min:     11 Act:   18 Avg:   19 Max:    2999`
/// (Act and Avg 8 wide in ns, `-N`; ` SMI:` and the count with `--smi`).
pub fn thread_line(plan: &ThreadPlan, tid: i32, s: Summary, unit: Unit) -> String {
    let width = match unit {
        Unit::Micros => 5,
        Unit::Nanos => 8,
    };
    let mut line = format!(
        "T:{:2} ({:5}) P:{:2} I:{} C:{:7} Min:{:7} Act:{:width$} Avg:{:width$} Max:{:8}",
        plan.index, tid, plan.priority, plan.interval_us, s.cycles, s.min, s.act, s.avg, s.max
    );
    if plan.smi {
        line.push_str(&format!(" SMI:{:8}", s.smis));
    }
    line
}

/// cyclictest's status line above the thread lines: the policy asked for,
/// and `/other` when the threads run SCHED_OTHER anyway.
pub fn policy_line(policy: &str, other: bool, loadavg: &str) -> String {
    let forced = if other { "/other" } else { "" };
    format!("policy: {policy}{forced}: loadavg: {loadavg}")
}

/// cyclictest's `--spike` list: the spikes kept and the count of all, after
/// an empty line; nothing when there was none.
pub fn write_spikes(w: &mut impl Write, kept: &[Spike], count: u64) -> io::Result<()> {
    if kept.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    for s in kept {
        writeln!(
            w,
            "T:{:2} Spike:{:8}: TS: {:12}",
            s.thread, s.value, s.at_us
        )?;
    }
    writeln!(w, "spikes = {count}\n")
}

/// cyclictest's `-b` lines: the threads' ids, and the break when one came.
pub fn write_break(
    w: &mut impl Write,
    results: &[ThreadResult],
    hit: Option<Break>,
) -> io::Result<()> {
    write!(w, "# Thread Ids:")?;
    for r in results {
        write!(w, " {:05}", r.setup.tid)?;
    }
    writeln!(w)?;
    if let Some(hit) = hit {
        writeln!(w, "# Break thread: {}", hit.tid)?;
        writeln!(w, "# Break value: {}", hit.value)?;
    }
    Ok(())
}

/// A time as cyclictest's JSON writes it (`%a, %d %b %Y %T %z`), in UTC.
pub fn date(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let (hour, minute, second) = (secs % 86_400 / 3600, secs % 3600 / 60, secs % 60);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {hour:02}:{minute:02}:{second:02} +0000",
        WEEKDAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize]
    )
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

/// The timer slack the threads ran with, on one line, and whether the least
/// was asked for (`--least-slack`).
pub fn slack_line(results: &[ThreadResult], least_asked: bool) -> String {
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
    let asked = if least_asked {
        "asked for the least, 1 ns"
    } else {
        "the threads' own, as cyclictest leaves it; --least-slack asks for 1 ns"
    };
    format!("# timer slack: {} ({asked}{why})", list.join(", "))
}

/// cyclictest's histogram (`-h`, `-H` for the all-threads column), in its
/// exact layout. Every result must carry buckets of the same bound.
pub fn write_histogram(
    w: &mut impl Write,
    results: &[ThreadResult],
    all_column: bool,
    smi: bool,
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
    let mins: Vec<u64> = summaries.iter().map(|s| s.min).collect();
    row(w, "Min Latencies", &mins, 5, None)?;
    let avgs: Vec<u64> = summaries.iter().map(|s| s.avg).collect();
    row(w, "Avg Latencies", &avgs, 5, None)?;
    let maxes: Vec<u64> = summaries.iter().map(|s| s.max).collect();
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
    if smi {
        let smis: Vec<u64> = summaries.iter().map(|s| s.smis).collect();
        row(w, "SMIs", &smis, 5, None)?;
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
    /// The policy the threads ran under: `fifo`, `rr` or `other`.
    pub policy: &'static str,
    /// `-l`; 0 for no limit.
    pub loops: u64,
    /// `-D`, seconds.
    pub duration_s: Option<u64>,
    /// `-m`.
    pub mlockall: bool,
    /// `-h`/`-H`, in `unit`.
    pub histogram: Option<usize>,
    /// The unit of the figures: `us`, or `ns` with `-N`.
    pub unit: &'static str,
    /// The PM QoS request (cyclictest's /dev/cpu_dma_latency), or why it
    /// could not be made.
    pub cpu_dma_latency: String,
    /// How the threads waited: `clock_nanosleep`, `clock_nanosleep
    /// relative` (`-r`), `nanosleep` (`-s`), `posix timer` (`-x`) or `timer
    /// service` (`--service`).
    pub waiter: &'static str,
    /// `--least-slack`.
    pub least_slack: bool,
}

/// The JSON document: cyclictest's fields first, with its names (two of
/// which end in a colon, as cyclictest 2.40 writes them) and types, then
/// ours.
#[derive(Serialize)]
pub struct Document<'a> {
    /// cyclictest's layout version, 1.
    pub file_version: u32,
    /// The command line, under cyclictest's name.
    #[serde(rename = "cmdline:")]
    pub cmdline_: String,
    /// The rt-tests release whose layout this is, under cyclictest's name.
    #[serde(rename = "rt_test_version:")]
    pub rt_test_version_: &'static str,
    /// The start, as cyclictest writes it ([`date`]).
    pub start_time: String,
    /// The end, likewise.
    pub end_time: String,
    /// The exit status, 0 (a run that fails writes no document).
    pub return_code: i32,
    /// The system (cyclictest's `uname` fields and `realtime`, then ours).
    pub sysinfo: &'a SysInfo,
    /// How many threads measured.
    pub num_threads: usize,
    /// 1 when the figures are in ns (`-N`), 0 in µs.
    pub resolution_in_ns: u8,
    /// Each thread's figures.
    pub thread: Threads<'a>,
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
    /// `loops`, `duration`, `signal` or `breaktrace`.
    pub stopped_by: &'static str,
    /// The settings.
    pub settings: Settings,
    /// Samples at or above the histogram bound, over all threads (`null`
    /// without `-h`).
    pub histogram_overflows: Option<u64>,
    /// Missed periods over all threads.
    pub missed_periods: u64,
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

/// A thread's figures: cyclictest's fields first (`histogram` as an object of
/// the buckets that counted, `cycles`, `min`, `max`, `avg`, `cpu`, `node`),
/// then ours.
#[derive(Serialize)]
struct ThreadJson {
    histogram: BTreeMap<String, u64>,
    cycles: u64,
    min: u64,
    max: u64,
    avg: f64,
    cpu: usize,
    node: i64,
    tid: i32,
    priority: u8,
    interval_us: u64,
    timer_slack_ns: u64,
    act: u64,
    smis: Option<u64>,
    missed_periods: u64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    p99_9_us: Option<f64>,
    histogram_overflows: Option<u64>,
    histogram_overflow_cycles: Option<Vec<u64>>,
}

impl ThreadJson {
    fn of(r: &ThreadResult) -> ThreadJson {
        let s = r.stats.summary();
        let us = |q: f64| r.stats.percentile_ns(q).map(|ns| ns as f64 / 1000.0);
        let buckets = r.stats.buckets();
        ThreadJson {
            // Only the buckets that counted something, as cyclictest writes
            // them; an empty object without -h.
            histogram: buckets.map_or_else(BTreeMap::new, |b| {
                b.counts()
                    .iter()
                    .enumerate()
                    .filter(|&(_, &n)| n > 0)
                    .map(|(i, &n)| (i.to_string(), n))
                    .collect()
            }),
            cycles: s.cycles,
            min: s.min,
            max: s.max,
            // Two decimals, as cyclictest writes it.
            avg: (r.stats.mean() * 100.0).round() / 100.0,
            cpu: r.plan.cpu,
            node: numa_node(r.plan.cpu),
            tid: r.setup.tid,
            priority: r.plan.priority,
            interval_us: r.plan.interval_us,
            timer_slack_ns: r.setup.timer_slack_ns,
            act: s.act,
            smis: r.plan.smi.then_some(s.smis),
            missed_periods: r.stats.missed(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p99_9_us: us(0.999),
            histogram_overflows: buckets.map(|b| b.overflows()),
            histogram_overflow_cycles: buckets.map(|b| b.overflow_cycles().to_vec()),
        }
    }
}

/// The NUMA node of `cpu`, from sysfs (`cpuN/nodeM`); -1 when unknown.
fn numa_node(cpu: usize) -> i64 {
    std::fs::read_dir(format!("/sys/devices/system/cpu/cpu{cpu}"))
        .ok()
        .and_then(|entries| {
            entries
                .flatten()
                .find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        })
        .unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(index: usize, samples_us: &[u64], bound_us: Option<usize>) -> ThreadResult {
        let mut stats = ThreadStats::new(bound_us, Unit::Micros);
        for us in samples_us {
            stats.record(us * 1000 + 500);
        }
        ThreadResult {
            plan: ThreadPlan {
                index,
                interval_us: 1000,
                cpu: 0,
                priority: 80,
                policy: crate::latency::realtime::Policy::Fifo,
                clock: crate::latency::clock::Clock::Monotonic,
                least_slack: false,
                smi: false,
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
            thread_line(&r.plan, r.setup.tid, r.stats.summary(), Unit::Micros),
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
        write_histogram(&mut out, &results, true, false).expect("writes");
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
        write_histogram(&mut out, &one, true, false).expect("writes");
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
