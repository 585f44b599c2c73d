//! `timehands latency`'s flags: cyclictest's, with its defaults and limits.

use std::path::PathBuf;
use std::time::Duration;

use super::duration;
use super::realtime::Policy;

/// cyclictest's default interval, µs.
pub(super) const DEFAULT_INTERVAL_US: u32 = 1000;
/// cyclictest's default distance between the threads' intervals, µs.
pub(super) const DEFAULT_DISTANCE_US: u32 = 500;
/// cyclictest's largest histogram, in units.
pub(super) const MAX_HISTOGRAM: u32 = 1_000_000;
/// The most memory the histograms of all threads may take, 1 GiB.
pub(super) const MAX_HISTOGRAM_BYTES: usize = 1 << 30;
/// More measuring threads than this is a typo, not a test.
pub(super) const MAX_THREADS: usize = 4096;
/// cyclictest's default count of spikes kept (`--spike-nodes`).
pub(super) const DEFAULT_SPIKE_NODES: usize = 1024;

const EXAMPLES: &str = "\
Examples:
  timehands latency -p 80 -i 1000 -l 10000 -q       cyclictest's classic run
  timehands latency -S -p 80 -m -D 10m -h 200 -q   one pinned thread per CPU, a histogram
  timehands latency -p 80 -l 100000 --json out.json   cyclictest's JSON, plus percentiles
  timehands latency -p 80 -b 100 --tracemark       stop and mark the trace at 100 us
  timehands latency -l 1000 --json | jq '.thread[\"0\"].p99_us'

Flags, defaults and output are cyclictest's (rt-tests 2.40); `#` lines add
missed periods, p50/p99/p99.9, the system and the timer slack. The timer slack
is left as the thread has it, as cyclictest leaves it; --least-slack asks for
1 ns. Ctrl-C stops and prints the summary.";

/// Flags of `timehands latency` (cyclictest's, and `--service`,
/// `--least-slack`).
#[derive(clap::Args)]
#[command(disable_help_flag = true, after_help = EXAMPLES)]
pub struct Args {
    /// Pin the threads round-robin to CPUSET (such as 0, 2-3 or 3-5,0); alone,
    /// or without -a, thread N runs on the N-th CPU this process may use, as
    /// cyclictest 2.40 places them.
    #[arg(short = 'a', long = "affinity", value_name = "CPUSET", num_args = 0..=1, default_missing_value = "")]
    pub affinity: Option<String>,

    /// Start all threads together, thread N's wakeups shifted by N * USEC.
    #[arg(short = 'A', long = "aligned", value_name = "USEC", num_args = 0..=1, default_missing_value = "0", conflicts_with = "secaligned", allow_negative_numbers = true)]
    pub aligned: Option<u32>,

    /// Stop at the first latency above USEC (0: never), and print which
    /// thread saw it; with --tracemark, also mark the kernel's trace and stop
    /// tracing.
    #[arg(short = 'b', long = "breaktrace", value_name = "USEC")]
    pub breaktrace: Option<u64>,

    /// The clock to sleep on and measure with: 0 CLOCK_MONOTONIC, 1
    /// CLOCK_REALTIME.
    #[arg(short = 'c', long = "clock", value_name = "CLOCK", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub clock: u8,

    /// Do not tune the system: leave /dev/cpu_dma_latency alone.
    #[arg(long = "default-system")]
    pub default_system: bool,

    /// Distance of the threads' intervals in µs (thread N runs at
    /// interval + N * distance); 500 by default, 0 with a histogram.
    #[arg(short = 'd', long = "distance", value_name = "DIST")]
    pub distance: Option<u32>,

    /// Stop after TIME: seconds, or a number with s, m, h or d.
    #[arg(short = 'D', long = "duration", value_name = "TIME", value_parser = duration::parse)]
    pub duration: Option<Duration>,

    /// Create a named pipe at PATH and write the threads' lines to each
    /// reader that opens it.
    #[arg(short = 'F', long = "fifo", value_name = "PATH")]
    pub fifo: Option<PathBuf>,

    /// Keep a histogram of US one-µs buckets (one-ns with -N) and print it
    /// after the run.
    #[arg(short = 'h', long = "histogram", value_name = "US", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_HISTOGRAM)), conflicts_with = "histofall")]
    pub histogram: Option<u32>,

    /// Like -h, with a column summing all threads.
    #[arg(short = 'H', long = "histofall", value_name = "US", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_HISTOGRAM)))]
    pub histofall: Option<u32>,

    /// Write the histogram to PATH instead of stdout.
    #[arg(long = "histfile", value_name = "PATH")]
    pub histfile: Option<PathBuf>,

    /// Base interval of the threads in µs.
    #[arg(short = 'i', long = "interval", value_name = "INTV", default_value_t = DEFAULT_INTERVAL_US, value_parser = clap::value_parser!(u32).range(1..))]
    pub interval: u32,

    /// Write the results as JSON to FILE (cyclictest's --json=FILE, with more
    /// fields); alone, print only the JSON, on stdout.
    #[arg(long = "json", value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,

    /// Save battery: leave /dev/cpu_dma_latency alone (poorer figures).
    #[arg(long = "laptop")]
    pub laptop: bool,

    /// The wakeup latency, µs, asked of the CPUs' idle states through
    /// /dev/cpu_dma_latency (a negative value is 0).
    #[arg(
        long = "latency",
        value_name = "PM_QOS",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub pm_qos: i32,

    /// Run the main thread on CPUSET (the measuring threads are placed by -a).
    #[arg(long = "mainaffinity", value_name = "CPUSET")]
    pub mainaffinity: Option<String>,

    /// Wakeups per thread; 0 for no limit. As cyclictest, the run ends when
    /// the first thread has made them (the others stop at their next wakeup).
    #[arg(short = 'l', long = "loops", value_name = "LOOPS", default_value_t = 0)]
    pub loops: u64,

    /// Set the threads' timer slack to the least, 1 ns (cyclictest leaves
    /// the thread's own, 50 µs by default, which SCHED_OTHER sleeps may use).
    #[arg(long = "least-slack")]
    pub least_slack: bool,

    /// Lock current and future memory (mlockall).
    #[arg(short = 'm', long = "mlockall")]
    pub mlockall: bool,

    /// Redraw the live display only when a new maximum comes.
    #[arg(short = 'M', long = "refresh_on_max")]
    pub refresh_on_max: bool,

    /// Figures in ns instead of µs (the histogram too).
    #[arg(short = 'N', long = "nsecs")]
    pub nsecs: bool,

    /// With -v, print one line per RED wakeups: the largest of them.
    #[arg(short = 'o', long = "oscope", value_name = "RED", value_parser = clap::value_parser!(u64).range(1..))]
    pub oscope: Option<u64>,

    /// Real-time priority of the first thread (1-99; 0 picks threads + 1, as
    /// cyclictest does). Without -p the threads run SCHED_OTHER.
    #[arg(short = 'p', long = "priority", value_name = "PRIO", value_parser = clap::value_parser!(u8).range(0..=99))]
    pub priority: Option<u8>,

    /// Scheduling policy of the threads: other, normal, batch, idle, fifo or
    /// rr (a priority needs fifo or rr; other policies run as other).
    #[arg(long = "policy", value_name = "NAME", value_enum, ignore_case = true)]
    pub policy: Option<Policy>,

    /// Give thread N the priority of -p minus N.
    #[arg(long = "priospread")]
    pub priospread: bool,

    /// Print the summary only, on exit.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Sleep one interval from each wakeup (relative) instead of to absolute
    /// deadlines.
    #[arg(short = 'r', long = "relative")]
    pub relative: bool,

    /// Measure the clock's resolution first (clock_getres against many
    /// clock_gettime calls), and warn when it is coarser than reported.
    #[arg(short = 'R', long = "resolution")]
    pub resolution: bool,

    /// Start all threads at the next full second, plus USEC.
    #[arg(long = "secaligned", value_name = "USEC", num_args = 0..=1, default_missing_value = "0", allow_negative_numbers = true)]
    pub secaligned: Option<u32>,

    /// Wait on hard timers of the timehands timer service instead of
    /// clock_nanosleep: the service's expiry thread (SCHED_FIFO at -p) fires
    /// each timer and wakes the measuring thread.
    #[arg(long = "service", conflicts_with_all = ["relative", "system", "posix_timers"])]
    pub service: bool,

    /// Sleep with the nanosleep system call (relative) instead of
    /// clock_nanosleep.
    #[arg(short = 's', long = "system")]
    pub system: bool,

    /// Count the SMIs (System Management Interrupts) of each thread's CPU,
    /// from the CPU's MSR (Intel, root, the msr module).
    #[arg(long = "smi")]
    pub smi: bool,

    /// One thread per CPU, each pinned to its CPU, all at the same priority.
    #[arg(short = 'S', long = "smp")]
    pub smp: bool,

    /// Record every latency above TRIGGER µs (0: none) and list them after
    /// the run.
    #[arg(long = "spike", value_name = "TRIGGER")]
    pub spike: Option<u64>,

    /// How many spikes are listed (the rest are counted).
    #[arg(long = "spike-nodes", value_name = "NUM", default_value_t = DEFAULT_SPIKE_NODES)]
    pub spike_nodes: usize,

    /// Number of measuring threads; alone, one per CPU this process may use.
    #[arg(short = 't', long = "threads", value_name = "NUM", num_args = 0..=1, default_missing_value = "", value_parser = parse_threads)]
    pub threads: Option<ThreadCount>,

    /// With -b, write the break into the kernel's trace_marker and stop
    /// tracing (tracefs must be mounted).
    #[arg(long = "tracemark")]
    pub tracemark: bool,

    /// Write each line as it is made (output is never held back here; the
    /// flag is taken for cyclictest's scripts).
    #[arg(short = 'u', long = "unbuffered")]
    pub unbuffered: bool,

    /// Print every latency as it comes, `thread:cycle:value`, instead of the
    /// thread lines.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,

    /// With -R, list the clock_gettime readings it took, on stderr.
    #[arg(long = "dbg_cyclictest")]
    pub dbg_cyclictest: bool,

    /// Wait on a POSIX interval timer (timer_create, a signal per expiry)
    /// instead of clock_nanosleep.
    #[arg(short = 'x', long = "posix_timers")]
    pub posix_timers: bool,

    /// Print help.
    #[arg(long = "help", action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// `-t`'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadCount {
    /// `-t` alone: one per CPU.
    PerCpu,
    /// `-t N`.
    Exactly(usize),
}

fn parse_threads(text: &str) -> Result<ThreadCount, String> {
    if text.is_empty() {
        return Ok(ThreadCount::PerCpu);
    }
    match text.parse::<usize>() {
        Ok(n @ 1..=MAX_THREADS) => Ok(ThreadCount::Exactly(n)),
        _ => Err(format!(
            "bad thread count {text:?}: want 1 to {MAX_THREADS}"
        )),
    }
}
