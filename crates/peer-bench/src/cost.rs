//! Cost: nanoseconds per call, in rounds of a fixed number of back-to-back calls.
//!
//! A warm-up round sizes each clock's rounds so that one lasts about
//! `round_ns`: a clock that costs a system call gets fewer calls, not minutes.
//! Each round is a fixed number of calls timed as a whole, so the clock that
//! times it costs two reads per round, not per call.
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

/// Measures every clock. Rounds go round the table, one round of each clock
/// in turn, so that a disturbance (another process, a frequency change) lands
/// on every clock alike rather than on whichever ran at the time.
pub fn run(clocks: &[Clock], plan: &Plan) -> Vec<Row> {
    let calls: Vec<u64> = clocks
        .iter()
        .map(|clock| calls_per_round(clock, plan))
        .collect();
    let mut per_call: Vec<Vec<f64>> = vec![Vec::with_capacity(plan.rounds); clocks.len()];
    for round in 1..=plan.rounds {
        eprintln!("cost: round {round} of {}", plan.rounds);
        for ((clock, &calls), samples) in clocks.iter().zip(&calls).zip(&mut per_call) {
            samples.push((clock.time_calls)(calls) as f64 / calls as f64);
        }
    }
    let mut rows: Vec<Row> = clocks
        .iter()
        .zip(calls)
        .zip(&mut per_call)
        .map(|((clock, calls), samples)| {
            samples.sort_by(f64::total_cmp);
            Row {
                clock: clock.name.to_string(),
                calls_per_round: calls,
                min_ns: samples[0],
                median_ns: samples[samples.len() / 2],
                ratio: None,
            }
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

/// Sizes a clock's rounds from the quickest of three warm-up rounds (one
/// disturbed warm-up would otherwise shrink every round).
fn calls_per_round(clock: &Clock, plan: &Plan) -> u64 {
    const WARM_UP_CALLS: u64 = 10_000;
    let warm_up_ns = (0..3)
        .map(|_| (clock.time_calls)(WARM_UP_CALLS))
        .min()
        .unwrap_or(0)
        .max(1);
    (plan.round_ns * WARM_UP_CALLS / warm_up_ns).clamp(WARM_UP_CALLS, 10_000_000)
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
