//! Cost: nanoseconds per call, in rounds of a fixed number of back-to-back calls.
//!
//! A warm-up round sizes each clock's rounds so that one lasts about
//! `round_ns`: a clock that costs a system call gets fewer calls, not minutes.
//! The minimum shows the clock undisturbed, the median what a caller usually
//! pays; ratios compare medians with `std::time::Instant::now`'s from the same
//! run.

use serde::Serialize;

use crate::clocks::{Clock, STD_INSTANT};

/// How many rounds, and how long each should last.
pub struct Plan {
    /// Rounds per clock.
    pub rounds: usize,
    /// The length a round aims at, in nanoseconds.
    pub round_ns: u64,
}

/// One clock's cost.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The clock's name.
    pub clock: String,
    /// Calls in each round.
    pub calls_per_round: u64,
    /// The cheapest round, per call.
    pub min_ns: f64,
    /// The median round, per call.
    pub median_ns: f64,
    /// `median_ns` over `std Instant::now`'s.
    pub ratio: Option<f64>,
}

/// Measures every clock.
pub fn run(clocks: &[Clock], plan: &Plan) -> Vec<Row> {
    let mut rows: Vec<Row> = clocks
        .iter()
        .map(|clock| {
            eprintln!("cost: {}", clock.name);
            measure(clock, plan)
        })
        .collect();
    let unit = rows
        .iter()
        .find(|row| row.clock == STD_INSTANT)
        .map(|row| row.median_ns);
    for row in &mut rows {
        row.ratio = unit.map(|unit| row.median_ns / unit);
    }
    rows
}

fn measure(clock: &Clock, plan: &Plan) -> Row {
    const WARM_UP_CALLS: u64 = 10_000;
    let warm_up_ns = (clock.time_calls)(WARM_UP_CALLS).max(1);
    let calls = (plan.round_ns * WARM_UP_CALLS / warm_up_ns).clamp(WARM_UP_CALLS, 10_000_000);
    let mut per_call: Vec<f64> = (0..plan.rounds)
        .map(|_| (clock.time_calls)(calls) as f64 / calls as f64)
        .collect();
    per_call.sort_by(f64::total_cmp);
    Row {
        clock: clock.name.to_string(),
        calls_per_round: calls,
        min_ns: per_call[0],
        median_ns: per_call[per_call.len() / 2],
        ratio: None,
    }
}

/// Prints the table.
pub fn print(rows: &[Row]) {
    println!("Cost (ns per call; ratio = median / {STD_INSTANT}'s median)");
    println!(
        "  {:<28} {:>10} {:>9} {:>9} {:>7}",
        "clock", "calls", "min", "median", "ratio"
    );
    for row in rows {
        let ratio = row.ratio.map_or("-".to_string(), |r| format!("{r:.2}x"));
        println!(
            "  {:<28} {:>10} {:>9.2} {:>9.2} {:>7}",
            row.clock, row.calls_per_round, row.min_ns, row.median_ns, ratio
        );
    }
}
