//! A fresh process's first milliseconds: every `timehands::now()` of its
//! first [`WINDOW`], each between two reads of the kernel's monotonic clock,
//! in many fresh processes. A read more than [`OFF`] ahead of the read after
//! it, or behind the read before it, is one that a program mixing our time
//! with the kernel's (or std's `Instant`) would see out of order.
//!
//! Each process is this binary, told by [`CHILD_ENV`] to be one: it reads
//! from its first call on, and prints how many reads were off and the worst.

use std::time::Duration;

use serde::Serialize;

use crate::child_line::field;
use timehands::sys::{KernelClock, kernel_nanos};

/// The child's orders: be a fresh process.
pub const CHILD_ENV: &str = "PEER_BENCH_FRESH";
/// How long each process reads.
const WINDOW: Duration = Duration::from_millis(50);
/// How far outside the kernel's bracket a read may be.
const OFF: u64 = 100;

/// What the processes saw.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub processes: u64,
    /// Processes with a read more than [`OFF`] ns outside its bracket.
    pub processes_off: u64,
    /// Such reads, in all the processes.
    pub reads_off: u64,
    /// Reads in all the processes.
    pub reads: u64,
    /// The farthest any read was outside its bracket, ns.
    pub worst_ns: u64,
}

/// Runs `processes` fresh processes, `env` added to their environment;
/// `None` where none could be run.
pub fn run(processes: u64, env: &[(&str, &str)]) -> Option<Outcome> {
    let exe = std::env::current_exe().ok()?;
    let mut outcome = Outcome {
        processes: 0,
        processes_off: 0,
        reads_off: 0,
        reads: 0,
        worst_ns: 0,
    };
    for i in 0..processes {
        if i % 100 == 0 {
            eprintln!("fresh processes: {i} of {processes}");
        }
        let output = match std::process::Command::new(&exe)
            .env(CHILD_ENV, "1")
            .envs(env.iter().copied())
            .output()
        {
            Ok(output) => output,
            Err(e) => {
                eprintln!("fresh process {i} did not run: {e}");
                continue;
            }
        };
        let line = String::from_utf8_lossy(&output.stdout);
        let (Some(reads), Some(off), Some(worst)) = (
            field::<u64>(&line, "reads"),
            field::<u64>(&line, "off"),
            field::<u64>(&line, "worst_ns"),
        ) else {
            eprintln!("fresh process {i} said nothing readable: {line}");
            continue;
        };
        outcome.processes += 1;
        outcome.reads += reads;
        outcome.reads_off += off;
        outcome.processes_off += u64::from(off > 0);
        outcome.worst_ns = outcome.worst_ns.max(worst);
    }
    Some(outcome)
}

/// The child: reads for [`WINDOW`] from its first call, and prints its line.
pub fn child() -> ! {
    let kernel = || kernel_nanos(KernelClock::Monotonic).unwrap_or(0);
    let start = kernel();
    let (mut reads, mut off, mut worst) = (0u64, 0u64, 0u64);
    loop {
        let before = kernel();
        let ours = timehands::now().as_nanos();
        let after = kernel();
        let outside = before.saturating_sub(ours).max(ours.saturating_sub(after));
        reads += 1;
        off += u64::from(outside > OFF);
        worst = worst.max(outside);

        if after - start >= WINDOW.as_nanos() as u64 {
            break;
        }
    }
    println!("reads={reads} off={off} worst_ns={worst}");

    std::process::exit(0)
}

/// The section's lines.
pub fn print(outcome: &Outcome) {
    println!(
        "a fresh process's first {} ms: every timehands now() between two reads of {}",
        WINDOW.as_millis(),
        KernelClock::Monotonic.name()
    );
    println!(
        "  {} processes, {} reads: {} reads more than {OFF} ns outside their bracket, in {} processes; the farthest {} ns",
        outcome.processes,
        outcome.reads,
        outcome.reads_off,
        outcome.processes_off,
        outcome.worst_ns
    );
}
