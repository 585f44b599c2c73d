//! `timehands callers`: the clock as each kind of thread that reads it
//! finds it, side by side, in a fresh process each.
//!
//! The kinds are those that once got another clock (when the library
//! guessed from the signal mask whether a reader ran in a handler): an
//! ordinary thread; one that blocks every signal first, as many libraries'
//! helper threads do; a daemon's, with handlers for SIGHUP and SIGTERM both
//! blocked but around a `ppoll` (nginx's way); a SCHED_FIFO thread at
//! priority 80 on one CPU, where the process may take it; and a process
//! whose only reads are in a SIGPROF handler at 1 kHz. Each reads for
//! `--seconds`; the row says what one read cost it (`now()`, timed by the
//! kernel's clock in batches), the bound `getres` stated to it at the end,
//! the steerings and the windups its reads made a second, and what the
//! library took of the process: threads of its own, threads at a
//! real-time policy once the reader is gone, RLIMIT_RTPRIO. The handler's
//! row times the handler itself: every clock of ours read in one signal,
//! the kernel's clocks of the same names in the next, and their ratio.
//!
//! It exits 1 when a row shows what the library may never do (a kind not
//! steered, a thread of the library's, one at a real-time policy, a limit
//! changed); costs are printed as measured, beside the ordinary thread's.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use timehands::diagnostics::readers::Reader;
use timehands::sys::{self, KernelClock};
use timehands::{ClockId, getres, gettime, now, now_coarse};

use crate::output;

/// Flags of `timehands callers`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  timehands callers                 each kind of reader, 3 s each
  timehands callers --seconds 0.3   a quick look

Exit status: 0 when every kind got a steered clock and the library took
nothing of the process, 1 otherwise.")]
pub struct Args {
    /// How long each kind of reader reads, in seconds.
    #[arg(long, default_value_t = 3.0, value_parser = seconds)]
    pub seconds: f64,
    /// The reader of one kind, in this process (run by this command itself).
    #[arg(long, hide = true)]
    pub child: Option<String>,
}

/// A duration in seconds: above 0, at most an hour.
fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 3_600.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of seconds above 0 and at most 3600"
        )),
    }
}

/// Runs every kind in a process of its own (or, with `--child`, is one).
pub fn run(args: &Args) -> anyhow::Result<()> {
    if let Some(kind) = &args.child {
        return child(kind, Duration::from_secs_f64(args.seconds));
    }
    let exe = std::env::current_exe().context("finding this program to run it as a child")?;
    output::print(&format!(
        "each kind of reader in a process of its own, {} s each (timehands {})\n",
        args.seconds,
        env!("CARGO_PKG_VERSION")
    ))?;
    output::print(&format!(
        "{:<10} {:>9} {:>7} {:>11} {:>10} {:>14} {:>8} {:>10} {:>9}\n",
        "reader",
        "ns/read",
        "ratio",
        "accuracy",
        "steerings",
        "windups/s",
        "threads",
        "real-time",
        "rtprio"
    ))?;
    let mut ordinary_ns = None;
    let mut wrong = Vec::new();
    for kind in Reader::ALL.map(Reader::name) {
        let out = Command::new(&exe)
            .args([
                "callers",
                "--child",
                kind,
                "--seconds",
                &args.seconds.to_string(),
            ])
            .output()
            .with_context(|| format!("running the {kind} reader"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        anyhow::ensure!(
            out.status.success(),
            "the {kind} reader failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let Some(row) = Row::parse(&stdout) else {
            output::print(&format!("{kind:<10} {}\n", stdout.trim()))?;
            continue;
        };
        // The handler's reads are timed in the handler (below).
        let cost = match (row.handler_ns, ordinary_ns) {
            (Some(_), _) => format!("{:>9} {:>7}", "-", "-"),
            (None, None) => {
                ordinary_ns = Some(row.ns_per_read);
                format!("{:>9.1} {:>6.2}x", row.ns_per_read, 1.0)
            }
            (None, Some(ordinary)) => {
                format!(
                    "{:>9.1} {:>6.2}x",
                    row.ns_per_read,
                    row.ns_per_read / ordinary
                )
            }
        };
        output::print(&format!(
            "{kind:<10} {cost} {:>8} ns {:>10} {:>14.0} {:>8} {:>10} {:>9}\n",
            row.accuracy_ns,
            row.steerings,
            row.windups_a_second,
            row.library_threads,
            row.real_time_threads,
            if row.rtprio_kept { "kept" } else { "CHANGED" },
        ))?;
        if let Some((ours, kernel)) = row.handler_ns {
            output::print(&format!(
                "{:<10} a handler reading every clock: {ours:.0} ns, the kernel's clocks read as often {kernel:.0} ns ({:.2}x)\n",
                "",
                ours / kernel
            ))?;
        }
        if row.steerings == 0 {
            wrong.push(format!("the {kind} reader's clock was never steered"));
        }
        if row.library_threads != 0 || row.real_time_threads != 0 || !row.rtprio_kept {
            wrong.push(format!(
                "the library took something of the {kind} reader's process"
            ));
        }
    }
    if !wrong.is_empty() {
        bail!("{}", wrong.join("; "));
    }
    Ok(())
}

/// One kind's figures, as its process printed them.
#[derive(Debug)]
struct Row {
    ns_per_read: f64,
    accuracy_ns: u64,
    steerings: u64,
    windups_a_second: f64,
    library_threads: i64,
    real_time_threads: u64,
    rtprio_kept: bool,
    /// The handler's cost reading every clock: ours, the kernel's.
    handler_ns: Option<(f64, f64)>,
}

impl Row {
    /// The `ROW` line of a child's `stdout`; `None` where it printed why
    /// its kind cannot be had here.
    fn parse(stdout: &str) -> Option<Row> {
        let line = stdout.lines().find(|l| l.starts_with("ROW "))?;
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
        };
        let number = |name: &str| field(name)?.parse::<f64>().ok();
        Some(Row {
            ns_per_read: number("ns_per_read")?,
            accuracy_ns: number("accuracy_ns")? as u64,
            steerings: number("steerings")? as u64,
            windups_a_second: number("windups_a_second")?,
            library_threads: number("library_threads")? as i64,
            real_time_threads: number("real_time_threads")? as u64,
            rtprio_kept: field("rtprio_kept")? == "true",
            handler_ns: number("handler_ours_ns").zip(number("handler_kernel_ns")),
        })
    }
}

/// The threads of this process (`/proc/self/task`): their count, and how
/// many run at a real-time policy (SCHED_FIFO, SCHED_RR).
fn threads() -> anyhow::Result<(usize, u64)> {
    let mut count = 0;
    let mut real_time = 0;
    for task in std::fs::read_dir("/proc/self/task").context("reading /proc/self/task")? {
        let tid: libc::pid_t = task?.file_name().to_string_lossy().parse()?;
        count += 1;
        // SAFETY: sched_getscheduler only reads the thread's policy.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        real_time += u64::from(policy == libc::SCHED_FIFO || policy == libc::SCHED_RR);
    }
    Ok((count, real_time))
}

/// RLIMIT_RTPRIO, soft and hard.
fn rtprio() -> (libc::rlim_t, libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to write.
    unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) };
    (limit.rlim_cur, limit.rlim_max)
}

fn kernel_ns() -> u64 {
    sys::kernel_nanos(KernelClock::Monotonic).unwrap_or(0)
}

/// Reads counted and the time they took, in ns, by the reader's batches.
static READS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// A batch of reads of `now()`, timed by the kernel's clock.
fn timed_batch() {
    const BATCH: u64 = 10_000;
    let before = kernel_ns();
    for _ in 0..BATCH {
        std::hint::black_box(now());
    }
    READS[1].fetch_add(kernel_ns() - before, Ordering::Relaxed);
    READS[0].fetch_add(BATCH, Ordering::Relaxed);
}

/// The bound `getres` states to the reader, asked on its thread.
fn stated_ns() -> u64 {
    getres(ClockId::Monotonic).accuracy.as_nanos() as u64
}

/// The kernel's clocks of the names ours has (CLOCK_TAI's too).
const KERNEL_IDS: [libc::clockid_t; 7] = [
    libc::CLOCK_MONOTONIC,
    libc::CLOCK_REALTIME,
    libc::CLOCK_BOOTTIME,
    libc::CLOCK_MONOTONIC_RAW,
    libc::CLOCK_REALTIME_COARSE,
    libc::CLOCK_MONOTONIC_COARSE,
    libc::CLOCK_TAI,
];

/// Handlers run, and their time in ns: ours (odd signals), the kernel's.
static SIGNALS: AtomicU64 = AtomicU64::new(0);
static HANDLER_NS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static SINK: AtomicU64 = AtomicU64::new(0);

/// Every clock of ours in one signal, the kernel's in the next, each timed.
extern "C" fn read_every_clock(_: libc::c_int) {
    let ours = SIGNALS.fetch_add(1, Ordering::Relaxed) % 2 == 0;
    let start = kernel_ns();
    let mut sum = 0u64;
    if ours {
        sum = sum.wrapping_add(now().as_nanos() ^ now_coarse().as_nanos());
        for id in ClockId::ALL {
            sum = sum.wrapping_add(gettime(id).subsec_nanos().into());
        }
    } else {
        for id in KERNEL_IDS {
            sum = sum.wrapping_add(sys::clock_nanos(id).unwrap_or(0));
        }
    }
    HANDLER_NS[usize::from(!ours)].fetch_add(kernel_ns() - start, Ordering::Relaxed);
    SINK.fetch_xor(sum, Ordering::Relaxed);
}

/// One kind's process: its reader reads for `long`, then the `ROW` line.
fn child(kind: &str, long: Duration) -> anyhow::Result<()> {
    let kind = Reader::of(kind).map_err(anyhow::Error::msg)?;
    let (threads_before, _) = threads()?;
    let rtprio_before = rtprio();
    let Some(stated) = kind
        .read(long, timed_batch, stated_ns, read_every_clock)
        .map_err(anyhow::Error::msg)?
    else {
        println!("SCHED_FIFO is not allowed here: skipped");
        return Ok(());
    };
    let (threads_after, real_time) = threads()?;
    let info = timehands::info();
    let handler = match kind {
        Reader::Handler => {
            let handled = SIGNALS.load(Ordering::Relaxed).max(2) as f64 / 2.0;
            let [ours, kernel] = &HANDLER_NS;
            format!(
                " handler_ours_ns={:.1} handler_kernel_ns={:.1}",
                ours.load(Ordering::Relaxed) as f64 / handled,
                kernel.load(Ordering::Relaxed) as f64 / handled
            )
        }
        _ => String::new(),
    };
    let [reads, timed] = &READS;
    let ns_per_read =
        timed.load(Ordering::Relaxed) as f64 / reads.load(Ordering::Relaxed).max(1) as f64;
    println!(
        "ROW ns_per_read={ns_per_read:.2} accuracy_ns={stated} steerings={} windups_a_second={:.1} library_threads={} real_time_threads={real_time} rtprio_kept={}{handler}",
        info.steerings,
        info.reader_windups as f64 / long.as_secs_f64(),
        threads_after as i64 - threads_before as i64,
        rtprio() == rtprio_before,
    );
    Ok(())
}
