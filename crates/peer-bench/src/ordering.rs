//! Ordering: does a clock read on one CPU ever lag a reading that another CPU
//! took before it, as far as the memory model can tell?
//!
//! Two threads pinned to two CPUs pass one baton back and forth: a reading of
//! the clock, stored with `Release`. The other thread, once its `Acquire` load
//! sees the baton, reads its own clock: the reading it got must not be below
//! the one it was handed, since that one happened before. A clock that reads an
//! unordered counter, or one whose CPUs disagree, fails here.
//!
//! The baton is `reading << 1 | sender`, so that equal readings (a coarse
//! clock) still change hands; readings fit in 63 bits for centuries.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use serde::Serialize;

use crate::clocks::{Clock, monotonic_ns};

/// One clock's result.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The clock's name.
    pub clock: String,
    /// Hand-offs made.
    pub handoffs: u64,
    /// Readings below the one handed over.
    pub backward_steps: u64,
    /// The largest such step, in nanoseconds (0 if none).
    pub worst_step_ns: f64,
    /// Nanoseconds per hand-off, for scale.
    pub ns_per_handoff: f64,
}

/// The section's result: rows, or why it did not run.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// One row per clock.
    Rows {
        /// The two CPUs the threads ran on.
        cpus: [usize; 2],
        /// The rows.
        rows: Vec<Row>,
    },
    /// Why the section was skipped.
    Skipped(String),
}

/// Plays ping-pong with every clock.
pub fn run(clocks: &[Clock], handoffs: u64) -> Outcome {
    let cpus = match allowed_cpus() {
        Ok(cpus) if cpus.len() >= 2 => [cpus[0], cpus[1]],
        Ok(cpus) => {
            return Outcome::Skipped(format!(
                "only {} CPU available: ping-pong needs two",
                cpus.len()
            ));
        }
        Err(e) => return Outcome::Skipped(e),
    };
    let mut rows = Vec::with_capacity(clocks.len());
    for clock in clocks {
        eprintln!("ordering: {}", clock.name);
        match ping_pong(clock, cpus, handoffs) {
            Ok(row) => rows.push(row),
            Err(e) => return Outcome::Skipped(e),
        }
    }
    Outcome::Rows { cpus, rows }
}

/// What one side saw.
#[derive(Default)]
struct Side {
    backward_steps: u64,
    worst_step: u64,
}

fn ping_pong(clock: &Clock, cpus: [usize; 2], handoffs: u64) -> Result<Row, String> {
    // Side 1 "sent" the empty baton, so side 0 starts.
    let baton = AtomicU64::new(1);
    // Set by a side that cannot play, so that the other stops waiting for it.
    let halt = AtomicBool::new(false);
    let start = monotonic_ns();
    let sides: Vec<Result<Side, String>> = thread::scope(|scope| {
        let (baton, halt) = (&baton, &halt);
        // One turn more than the hand-offs: the first baton carries no reading.
        let all_turns = handoffs + 1;
        let players: Vec<_> = (0..2u64)
            .map(|me| {
                // Side 0 takes the odd-numbered turns (the first is 1).
                let turns = (all_turns + 1 - me) / 2;
                scope.spawn(move || {
                    if let Err(error) = pin_to(cpus[me as usize]) {
                        halt.store(true, Ordering::Relaxed);
                        return Err(error);
                    }
                    Ok(play(clock.read, baton, halt, me, turns))
                })
            })
            .collect();
        players
            .into_iter()
            .map(|p| p.join().expect("a ping-pong thread panicked"))
            .collect()
    });
    let elapsed = monotonic_ns() - start;
    let mut total = Side::default();
    for side in sides {
        let side = side?;
        total.backward_steps += side.backward_steps;
        total.worst_step = total.worst_step.max(side.worst_step);
    }
    Ok(Row {
        clock: clock.name.to_string(),
        handoffs,
        backward_steps: total.backward_steps,
        worst_step_ns: total.worst_step as f64 * clock.ns_per_unit,
        ns_per_handoff: elapsed as f64 / handoffs.max(1) as f64,
    })
}

fn play(read: fn() -> u64, baton: &AtomicU64, halt: &AtomicBool, me: u64, turns: u64) -> Side {
    let mut side = Side::default();
    for turn in 0..turns {
        let handed = loop {
            let value = baton.load(Ordering::Acquire);
            if value & 1 != me {
                break value >> 1;
            }
            if halt.load(Ordering::Relaxed) {
                return side;
            }
            std::hint::spin_loop();
        };
        let mine = read() & (u64::MAX >> 1);
        // The very first baton carries no reading.
        let first = me == 0 && turn == 0;
        if !first && mine < handed {
            side.backward_steps += 1;
            side.worst_step = side.worst_step.max(handed - mine);
        }
        baton.store(mine << 1 | me, Ordering::Release);
    }
    side
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Result<Vec<usize>, String> {
    timehands::sys::allowed_cpus()
        .map_err(|e| format!("the CPUs this process may run on are unknown: {e}"))
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) -> Result<(), String> {
    timehands::sys::pin_to_cpu(cpu).map_err(|e| e.to_string())
}

/// Prints the table.
pub fn print(outcome: &Outcome) {
    println!("Ordering (ping-pong: a reading handed over must not exceed the receiver's next one)");
    match outcome {
        Outcome::Skipped(why) => println!("  skipped: {why}"),
        Outcome::Rows { cpus, rows } => {
            println!("  CPUs {} and {}", cpus[0], cpus[1]);
            println!(
                "  {:<28} {:>10} {:>9} {:>12} {:>12}",
                "clock", "handoffs", "backward", "worst ns", "ns/handoff"
            );
            for row in rows {
                println!(
                    "  {:<28} {:>10} {:>9} {:>12.1} {:>12.1}",
                    row.clock,
                    row.handoffs,
                    row.backward_steps,
                    row.worst_step_ns,
                    row.ns_per_handoff
                );
            }
        }
    }
}
