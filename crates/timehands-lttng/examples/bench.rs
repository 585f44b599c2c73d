//! The cost of an event with LTTng's own clock and with timehands', in one run:
//! a session daemon of its own (with the plugin, as the trace's metadata
//! needs), one channel in overwrite mode (so that no event is discarded for a
//! full buffer), and `tests/c/bench.c` (a loop of one minimal tracepoint, an
//! int field) run in alternation without and with `LTTNG_UST_CLOCK_PLUGIN`.
//!
//! ```sh
//! scripts/lttng-bench.sh [EVENTS [ROUNDS]]
//! ```
//!
//! (which builds the plugin and this example in release, and runs it).
//!
//! Prints each clock's ns per event (CLOCK_MONOTONIC around the loop): the
//! median, min and max over the rounds.

// The test's session; the benchmark reads no trace back (no babeltrace2).
#[allow(dead_code)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::process::ExitCode;

use support::Lttng;

const USAGE: &str = "usage: bench [EVENTS [ROUNDS]] (defaults 1000000 and 7)";

/// The positional argument `index`, or `default`.
fn count(args: &[String], index: usize, default: usize) -> Result<usize, String> {
    match args.get(index) {
        None => Ok(default),
        Some(text) => match text.parse() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{text:?} is not a positive count; {USAGE}")),
        },
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() > 2 {
        return Err(USAGE.to_string());
    }
    let events = count(&args, 0, 1_000_000)?;
    let rounds = count(&args, 1, 7)?;
    if let Some(why) = support::missing_tools() {
        return Err(format!("LTTng cannot run here: {why}"));
    }
    let lttng = Lttng::start(&support::plugin()?)?;
    let program = lttng.build("bench.c")?;
    let output_option = format!("--output={}", lttng.dir().join("trace").display());
    lttng.lttng(&["create", "timehands-bench", &output_option])?;
    lttng.lttng(&["enable-channel", "--userspace", "--overwrite", "bench"])?;
    lttng.lttng(&[
        "enable-event",
        "--userspace",
        "--channel=bench",
        "timehands_test:tick",
    ])?;
    lttng.lttng(&["start"])?;
    let clocks = [
        ("LTTng's clock (CLOCK_MONOTONIC)", false),
        ("timehands", true),
    ];
    let mut costs = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for ((_, plugin), costs) in clocks.iter().zip(&mut costs) {
            let output = lttng.trace(&program, &[&events.to_string()], *plugin)?;
            let cost: f64 = output
                .trim()
                .parse()
                .map_err(|_| format!("bench printed {output:?}, not ns per event"))?;
            costs.push(cost);
        }
    }
    lttng.destroy("timehands-bench")?;
    println!("{rounds} rounds of {events} events per clock, ns per event");
    println!("{:<34} {:>8} {:>8} {:>8}", "clock", "median", "min", "max");
    for ((name, _), mut costs) in clocks.into_iter().zip(costs) {
        costs.sort_by(f64::total_cmp);
        println!(
            "{name:<34} {:>8.2} {:>8.2} {:>8.2}",
            costs[costs.len() / 2],
            costs[0],
            costs[costs.len() - 1]
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("bench: {why}");
            ExitCode::FAILURE
        }
    }
}
