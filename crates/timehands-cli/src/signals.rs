//! `timehands signals`: processes whose every clock is read in a signal
//! handler, at a high rate, from their first read, while their threads
//! allocate and read; how many hang.
//!
//! A profiler stamps its samples in a `SIGPROF` handler; a tracer fires
//! probes from handlers; a C program that swaps `clock_gettime` for
//! `th_clock_gettime` keeps calling it where it did. POSIX lets a handler
//! call `clock_gettime`, and the kernel's clocks never wait. Each process
//! here arms a POSIX timer on CLOCK_MONOTONIC that sends `SIGPROF` to the
//! process at `--rate`, before its first read (so that the clock may be
//! started, and its thread spawned, under the signals); two threads then
//! allocate and read `now()` for `--ms`, and the handler reads every clock
//! (`gettime` of each id, `now`, `now_coarse`, `now_unordered`). A process
//! hangs when it waits for something that never comes: a read that waits
//! for a step of the clock's life that the thread it interrupted was
//! taking, one that allocates in a handler that interrupted `malloc` and
//! deadlocks in it. Such a process uses no CPU: one still running that
//! used none for `--hang-after` seconds (its CPU time in `/proc`) is killed
//! and counts as hung. A slow one (a debug build at 20 kHz spends most of
//! its time in the handler) uses CPU all along, and is waited for. Where
//! `/proc` does not say, a process still running after `--hang-after`
//! seconds counts as hung.
//!
//! `--program` runs another workload under the same count: a program that
//! takes the rate and the milliseconds as its two arguments (the C
//! library's test, `th_clock_gettime` in the handler); one that says it
//! hung (exit status 3: the C test's own watch of its reading threads) or
//! dies of `SIGALRM` (its own alarm) counts as hung too.
//! The run exits non-zero when any process hung or failed: the target is
//! none.

use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use timehands::ClockId;

use crate::output;

/// Flags of `timehands signals`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  timehands signals                        100 processes at each of 100 Hz, 1 kHz and 50 kHz
  timehands signals -r 50000 -p 1000       a thousand processes at 50 kHz
  timehands signals --program ./c-signals  another workload (RATE MS), counted alike

Exit status: 0 when no process hung or failed, 1 otherwise.")]
pub struct Args {
    /// Signals a second, each rate a run of its own (repeat the flag).
    #[arg(short, long = "rate", default_values_t = [100, 1_000, 50_000],
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rates: Vec<u32>,
    /// Processes at each rate.
    #[arg(short, long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub processes: u32,
    /// How long each process reads, in milliseconds.
    #[arg(long, default_value_t = 400,
          value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub ms: u32,
    /// Seconds without CPU time used after which a process still running
    /// counts as hung.
    #[arg(long, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=3_600))]
    pub hang_after: u32,
    /// Processes run at once.
    #[arg(short = 'j', long, default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: u32,
    /// Run this program instead of timehands' own workload: it takes the
    /// rate and the milliseconds as its two arguments.
    #[arg(long, value_name = "PATH")]
    pub program: Option<std::path::PathBuf>,
    /// The workload of one process (run by this command itself).
    #[arg(long, hide = true)]
    pub child: bool,
}

/// How processes ended at one rate.
#[derive(Default)]
struct Count {
    passed: u32,
    hung: u32,
    failed: u32,
}

/// Runs the processes (or, with `--child`, is one).
pub fn run(args: &Args) -> anyhow::Result<()> {
    if args.child {
        let rate = *args.rates.first().context("a child is given one rate")?;
        return workload(rate, args.ms);
    }
    if let Some(program) = &args.program {
        anyhow::ensure!(
            program.is_file(),
            "--program {}: no such file",
            program.display()
        );
    }
    output::print(&format!(
        "{} processes a rate, each reading for {} ms under SIGPROF, hung if running with no CPU used for {} s\n",
        args.processes, args.ms, args.hang_after
    ))?;
    let mut missed = false;
    for &rate in &args.rates {
        let count = count_processes(args, rate)?;
        output::print(&format!(
            "{rate:>7} Hz: {} hung, {} failed, {} passed\n",
            count.hung, count.failed, count.passed
        ))?;
        missed |= count.hung > 0 || count.failed > 0;
    }
    if missed {
        bail!("processes hung or failed: the target is none");
    }
    Ok(())
}

/// Runs `args.processes` processes at `rate`, `args.jobs` at a time.
fn count_processes(args: &Args, rate: u32) -> anyhow::Result<Count> {
    let exe = std::env::current_exe().context("finding this program to run it as a child")?;
    let command = || {
        let mut command;
        match &args.program {
            Some(program) => {
                command = Command::new(program);
                command.args([rate.to_string(), args.ms.to_string()]);
            }
            None => {
                command = Command::new(&exe);
                command.args(["signals", "--child", "--rate"]).args([
                    rate.to_string(),
                    "--ms".to_string(),
                    args.ms.to_string(),
                ]);
            }
        }
        command
    };
    let mut count = Count::default();
    let mut started = 0;
    while started < args.processes {
        let batch = args.jobs.min(args.processes - started);
        let children = (0..batch)
            .map(|_| command().spawn())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("starting {}", command().get_program().to_string_lossy()))?;
        started += batch;
        for ended in watch(children, Duration::from_secs(args.hang_after.into()))? {
            match ended {
                Ended::Passed => count.passed += 1,
                Ended::Hung => count.hung += 1,
                Ended::Failed => count.failed += 1,
            }
        }
    }
    Ok(count)
}

/// How often the running processes are looked at.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Waits for `children`, killing one that used no CPU for `hang_after`
/// while it ran (see the module docs): how each ended.
fn watch(children: Vec<std::process::Child>, hang_after: Duration) -> anyhow::Result<Vec<Ended>> {
    struct Running {
        child: std::process::Child,
        cpu: Option<u64>,
        since: Instant,
    }
    let mut running: Vec<Running> = children
        .into_iter()
        .map(|child| Running {
            cpu: cpu_ticks(child.id()),
            since: Instant::now(),
            child,
        })
        .collect();
    let mut ended = Vec::with_capacity(running.len());
    while !running.is_empty() {
        std::thread::sleep(LOOK_EVERY);
        let mut still = Vec::with_capacity(running.len());
        for mut process in running {
            if let Some(status) = process.child.try_wait().context("waiting for a process")? {
                ended.push(status_of(status));
                continue;
            }
            let cpu = cpu_ticks(process.child.id());
            if cpu.is_some() && cpu != process.cpu {
                process.cpu = cpu;
                process.since = Instant::now();
            } else if process.since.elapsed() >= hang_after {
                // A kill that races its exit finds it ended: then it hung
                // no more than any other.
                let _ = process.child.kill();
                process
                    .child
                    .wait()
                    .context("waiting for a killed process")?;
                ended.push(Ended::Hung);
                continue;
            }
            still.push(process);
        }
        running = still;
    }
    Ok(ended)
}

/// The CPU time process `pid` used so far, in clock ticks (`utime` and
/// `stime` of `/proc/PID/stat`), where `/proc` says.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's name, which may hold spaces in its
    // parentheses: the state first, then utime and stime 11 and 12 on.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let ticks = |at: usize| fields.get(at)?.parse::<u64>().ok();
    Some(ticks(11)? + ticks(12)?)
}

/// How a process ended.
enum Ended {
    Passed,
    /// It used no CPU for the time given while it ran (killed), said so
    /// (exit status 3), or died of its own alarm.
    Hung,
    Failed,
}

fn status_of(status: std::process::ExitStatus) -> Ended {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        Ended::Passed
    } else if status.signal() == Some(libc::SIGALRM) || status.code() == Some(3) {
        Ended::Hung
    } else {
        Ended::Failed
    }
}

/// What the handler read, summed: kept so that no read is optimized away.
static SINK: AtomicU64 = AtomicU64::new(0);

/// Every clock, as a profiler's handler would read it: nothing here may
/// wait or allocate. (`getres` and `realtime_bounds` ask the kernel's NTP
/// state, a system call each: at 50 kHz a handler of those would leave the
/// process no time of its own. The crate's tests read them in handlers at
/// each step of the clock's life.)
extern "C" fn read_every_clock(_: libc::c_int) {
    let mut sum = timehands::now().as_nanos();
    sum = sum.wrapping_add(timehands::now_coarse().as_nanos());
    sum = sum.wrapping_add(timehands::now_unordered().as_nanos());
    for id in ClockId::ALL {
        sum = sum.wrapping_add(timehands::gettime(id).as_nanos() as u64);
    }
    SINK.fetch_add(sum, Ordering::Relaxed);
}

/// One process: the handler, the timer, then two threads that allocate and
/// read for `ms`.
fn workload(rate: u32, ms: u32) -> anyhow::Result<()> {
    // SAFETY: the handler only reads clocks and an atomic; the timer sends
    // SIGPROF to this process, and is deleted before it exits.
    let timer = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = read_every_clock as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()) != 0 {
            bail!("sigaction: {}", std::io::Error::last_os_error());
        }
        signal_timer(rate)?
    };
    // std's clock for the deadline: the one under test may not decide
    // when the test ends.
    let end = Instant::now() + Duration::from_millis(ms.into());
    let allocate_and_read = move || {
        while Instant::now() < end {
            let stamps: Vec<u64> = (0..64).map(|_| timehands::now().as_nanos()).collect();
            black_box(stamps);
        }
    };
    std::thread::scope(|s| {
        s.spawn(allocate_and_read);
        allocate_and_read();
    });
    // SAFETY: deletes the timer made above.
    unsafe { libc::timer_delete(timer) };
    Ok(())
}

/// A POSIX timer on CLOCK_MONOTONIC that sends SIGPROF to this process
/// `rate` times a second.
///
/// # Safety
/// A handler for SIGPROF must be installed: the default action ends the
/// process.
unsafe fn signal_timer(rate: u32) -> anyhow::Result<libc::timer_t> {
    // SAFETY: a zeroed sigevent asking for SIGPROF is valid; the timer is
    // written by timer_create before it is armed.
    unsafe {
        let mut event: libc::sigevent = std::mem::zeroed();
        event.sigev_notify = libc::SIGEV_SIGNAL;
        event.sigev_signo = libc::SIGPROF;
        let mut timer: libc::timer_t = std::mem::zeroed();
        if libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) != 0 {
            bail!("timer_create: {}", std::io::Error::last_os_error());
        }
        let period_ns = 1_000_000_000 / i64::from(rate);
        let period = libc::timespec {
            tv_sec: (period_ns / 1_000_000_000) as _,
            tv_nsec: (period_ns % 1_000_000_000) as _,
        };
        let spec = libc::itimerspec {
            it_interval: period,
            it_value: period,
        };
        if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
            bail!("timer_settime: {}", std::io::Error::last_os_error());
        }
        Ok(timer)
    }
}
