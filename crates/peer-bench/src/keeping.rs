//! The cost of keeping time: what a clock library costs a process beyond its
//! reads, in the threads it starts and in the process's CPU.
//!
//! Each clock runs in a fresh process of its own (this binary, told by
//! [`CHILD_ENV`] which clock and which workload), since a library's threads
//! are per process. The child reads as its workload says, then measures one
//! window of [`WINDOW`]: the wakeups (voluntary context switches: each sleep
//! that ends is one; a preemption by another program is not the library's)
//! and the CPU time of every thread but the main one, from
//! `/proc/self/task/*/status` and `schedstat`, and the whole process's CPU.
//! The workloads:
//!
//! - **read, then sleep**: reads for 100 ms, sleeps 1.5 s, and measures a
//!   window of sleep: what a library costs a program that stopped reading;
//! - **once a millisecond**: a read, then a 1 ms sleep, over and over;
//! - **continuously**: reads back to back.
//!
//! Linux only (the figures are `/proc`'s); elsewhere the section says so.

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::child_line::field;

/// The child's orders: `clock index:workload index:tenths`, where the
/// workload's times are so many tenths of those the docs give (10; 1 with
/// `--quick`, which only shows the table's shape).
pub const CHILD_ENV: &str = "PEER_BENCH_KEEPING";
/// The window a child measures, at full length.
const WINDOW: Duration = Duration::from_secs(1);

/// A clock as a program starts and reads it.
struct Kept {
    name: &'static str,
    /// Starts what the library needs started (a thread), kept for the run.
    start: fn() -> Option<Box<dyn std::any::Any>>,
    read: fn(),
}

/// The clocks compared: each library as its users read it.
fn kept() -> Vec<Kept> {
    vec![
        Kept {
            name: "std Instant::now",
            start: || None,
            read: || {
                black_box(std::time::Instant::now());
            },
        },
        Kept {
            name: "timehands now()",
            start: || None,
            read: || {
                black_box(timehands::now());
            },
        },
        Kept {
            name: "timehands now_coarse()",
            start: || None,
            read: || {
                black_box(timehands::now_coarse());
            },
        },
        Kept {
            name: "quanta now",
            start: || None,
            read: || {
                black_box(quanta::Instant::now());
            },
        },
        Kept {
            name: "quanta recent, Upkeep 1 ms",
            start: || {
                let handle = quanta::Upkeep::new(Duration::from_millis(1)).start();
                handle.ok().map(|h| Box::new(h) as Box<dyn std::any::Any>)
            },
            read: || {
                black_box(quanta::Instant::recent());
            },
        },
        Kept {
            name: "quanta drop-in now",
            start: || None,
            read: || {
                black_box(quanta_drop_in::Instant::now());
            },
        },
        Kept {
            name: "quanta drop-in recent, Upkeep 1 ms",
            start: || {
                let handle = quanta_drop_in::Upkeep::new(Duration::from_millis(1)).start();
                handle.ok().map(|h| Box::new(h) as Box<dyn std::any::Any>)
            },
            read: || {
                black_box(quanta_drop_in::Instant::recent());
            },
        },
        Kept {
            name: "coarsetime recent, updater 1 ms",
            start: || {
                let updater = coarsetime::Updater::new(1).start();
                updater.ok().map(|u| Box::new(u) as Box<dyn std::any::Any>)
            },
            read: || {
                black_box(coarsetime::Instant::recent());
            },
        },
        Kept {
            name: "minstant now",
            start: || None,
            read: || {
                black_box(minstant::Instant::now());
            },
        },
        Kept {
            name: "fastant now",
            start: || None,
            read: || {
                black_box(fastant::Instant::now());
            },
        },
    ]
}

/// The workloads, in the order of a row's columns.
const WORKLOADS: [&str; 3] = ["read, then sleep", "once a millisecond", "continuously"];

/// What one child measured over its window, per second.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Cost {
    /// Wakeups of the library's threads.
    pub wakeups: f64,
    /// CPU of the library's threads, ms.
    pub thread_cpu_ms: f64,
    /// CPU of the whole process, ms.
    pub process_cpu_ms: f64,
}

/// One clock's costs, one per workload.
#[derive(Debug, Serialize)]
pub struct Row {
    pub clock: &'static str,
    pub costs: Vec<Option<Cost>>,
}

/// Runs every clock under every workload, each in a child, at full length
/// or, `quick`, a tenth of it; `None` off Linux.
pub fn run(quick: bool) -> Option<Vec<Row>> {
    let tenths = if quick { 1 } else { 10 };
    if !cfg!(target_os = "linux") {
        eprintln!("keeping: the threads' wakeups and CPU are read from Linux's /proc: skipped");
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let rows = kept()
        .iter()
        .enumerate()
        .map(|(clock, kept)| {
            eprintln!("keeping: {}", kept.name);
            let costs = (0..WORKLOADS.len())
                .map(|workload| {
                    let output = std::process::Command::new(&exe)
                        .env(CHILD_ENV, format!("{clock}:{workload}:{tenths}"))
                        .output()
                        .ok()?;
                    parse(&String::from_utf8_lossy(&output.stdout))
                })
                .collect();
            Row {
                clock: kept.name,
                costs,
            }
        })
        .collect();
    Some(rows)
}

/// A child's line: `wakeups=… thread_cpu_ms=… process_cpu_ms=…`.
fn parse(line: &str) -> Option<Cost> {
    Some(Cost {
        wakeups: field(line, "wakeups")?,
        thread_cpu_ms: field(line, "thread_cpu_ms")?,
        process_cpu_ms: field(line, "process_cpu_ms")?,
    })
}

/// The child: runs `orders` (see [`CHILD_ENV`]) and prints its line.
pub fn child(orders: &str) -> ! {
    let numbers: Vec<usize> = orders.split(':').filter_map(|n| n.parse().ok()).collect();
    let clocks = kept();
    let (kept, workload, tenths) = match numbers[..] {
        [clock, workload, tenths] if clock < clocks.len() && (1..=10).contains(&tenths) => {
            (&clocks[clock], workload, tenths as u32)
        }
        _ => {
            eprintln!("{CHILD_ENV}={orders:?} names no clock, workload and length");
            std::process::exit(2);
        }
    };
    let ms = |full: u64| Duration::from_millis(full) * tenths / 10;
    let window = ms(WINDOW.as_millis() as u64);
    let _started = (kept.start)();
    let read = kept.read;
    let (before, after) = match workload {
        0 => {
            let until = Instant::now() + ms(100);
            while Instant::now() < until {
                read();
            }
            std::thread::sleep(ms(1500));
            let before = sample();
            std::thread::sleep(window);
            (before, sample())
        }
        1 => {
            let warm = Instant::now() + ms(500);
            while Instant::now() < warm {
                read();
                std::thread::sleep(Duration::from_millis(1));
            }
            let before = sample();
            let until = Instant::now() + window;
            while Instant::now() < until {
                read();
                std::thread::sleep(Duration::from_millis(1));
            }
            (before, sample())
        }
        _ => {
            let warm = Instant::now() + ms(200);
            while Instant::now() < warm {
                read();
            }
            let before = sample();
            let until = Instant::now() + window;
            while Instant::now() < until {
                for _ in 0..1000 {
                    read();
                }
            }
            (before, sample())
        }
    };
    let seconds = after.at.duration_since(before.at).as_secs_f64();
    let threads = |s: &Sample| (s.thread_wakeups, s.thread_cpu_ns);
    let (w0, c0) = threads(&before);
    let (w1, c1) = threads(&after);
    println!(
        "wakeups={:.1} thread_cpu_ms={:.3} process_cpu_ms={:.3}",
        w1.saturating_sub(w0) as f64 / seconds,
        c1.saturating_sub(c0) as f64 / 1e6 / seconds,
        after.process_cpu_ns.saturating_sub(before.process_cpu_ns) as f64 / 1e6 / seconds
    );
    std::process::exit(0)
}

/// The process's threads at one moment: the wakeups and CPU of all but the
/// main one, and the CPU of all.
struct Sample {
    at: Instant,
    thread_wakeups: u64,
    thread_cpu_ns: u64,
    process_cpu_ns: u64,
}

/// Reads `/proc/self/task/*` (a thread that ended meanwhile is left out).
fn sample() -> Sample {
    let main = std::process::id().to_string();
    let mut sample = Sample {
        at: Instant::now(),
        thread_wakeups: 0,
        thread_cpu_ns: 0,
        process_cpu_ns: 0,
    };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return sample;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let cpu: u64 = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        sample.process_cpu_ns += cpu;
        if task.file_name().to_string_lossy() == main {
            continue;
        }
        let switches: u64 = std::fs::read_to_string(path.join("status"))
            .map(|status| {
                status
                    .lines()
                    .filter(|l| l.starts_with("voluntary_ctxt_switches"))
                    .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        sample.thread_wakeups += switches;
        sample.thread_cpu_ns += cpu;
    }
    sample
}

/// The table: per clock, per workload, wakeups/s and CPU ms/s of the
/// library's threads, and the process's CPU ms/s.
pub fn print(rows: &[Row]) {
    println!("cost of keeping time (per second; the library's threads, then the whole process)");
    print!("{:<34}", "clock");
    for workload in WORKLOADS {
        print!(" | {workload:^32}");
    }
    println!();
    print!("{:<34}", "");
    for _ in WORKLOADS {
        print!(
            " | {:>9} {:>10} {:>11}",
            "wakeups", "thread ms", "process ms"
        );
    }
    println!();
    for row in rows {
        print!("{:<34}", row.clock);
        for cost in &row.costs {
            match cost {
                Some(c) => print!(
                    " | {:>9.1} {:>10.3} {:>11.3}",
                    c.wakeups, c.thread_cpu_ms, c.process_cpu_ms
                ),
                None => print!(" | {:>32}", "failed"),
            }
        }
        println!();
    }
}
