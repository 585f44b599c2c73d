//! Targets: the ratios timehands aims at, computed from the other sections'
//! results by entry name. A target whose entries (or section) are missing is
//! left out, so this prints nothing until the timehands entries exist.

use serde::Serialize;

use crate::clocks::{
    DROP_IN_NOW, LFENCE_RDTSC, MONOTONIC_COARSE, RDTSC, RDTSCP, TIMEHANDS_NOW,
    TIMEHANDS_NOW_COARSE, TIMEHANDS_NOW_UNORDERED, TIMEHANDS_REALTIME, monotonic_name,
};
use crate::{Report, cost, ordering};

/// One target and how the run did.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// What is measured.
    pub what: String,
    /// The measured value.
    pub value: f64,
    /// The goal, as text (`<= 1.10`).
    pub goal: String,
    /// Whether the value meets it.
    pub met: bool,
}

/// How a value must compare with its bound.
#[derive(Clone, Copy)]
enum Goal {
    AtMost(f64),
    Below(f64),
}

impl Goal {
    fn met(self, value: f64) -> bool {
        match self {
            Goal::AtMost(bound) => value <= bound,
            Goal::Below(bound) => value < bound,
        }
    }

    fn describe(self) -> String {
        match self {
            Goal::AtMost(bound) => format!("<= {bound}"),
            Goal::Below(bound) => format!("< {bound}"),
        }
    }
}

/// Every target whose inputs are in the report.
pub fn evaluate(report: &Report) -> Vec<Target> {
    let mut targets = Vec::new();
    let mut push = |what: String, value: Option<f64>, goal: Goal| {
        if let Some(value) = value {
            targets.push(Target {
                what,
                value,
                goal: goal.describe(),
                met: goal.met(value),
            });
        }
    };
    let cost = |name: &str| -> Option<f64> {
        let rows: &[cost::Row] = report.cost.as_deref()?;
        rows.iter().find(|r| r.clock == name).map(|r| r.median_ns)
    };
    let ratio = |a: &str, b: &str| Some(cost(a)? / cost(b)?);
    let monotonic = monotonic_name();

    let bare_ordered = [LFENCE_RDTSC, RDTSCP]
        .into_iter()
        .filter_map(|name| cost(name).map(|ns| (name, ns)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((name, bare)) = bare_ordered {
        push(
            format!("cost {TIMEHANDS_NOW} / the bare ordered read ({name})"),
            cost(TIMEHANDS_NOW).map(|t| t / bare),
            Goal::AtMost(1.1),
        );
        // What each adds to the counter read: ours at most a third of the
        // kernel's.
        push(
            format!("cost over {name}: {TIMEHANDS_NOW} / {monotonic}"),
            cost(TIMEHANDS_NOW)
                .zip(cost(monotonic))
                .map(|(ours, kernel)| (ours - bare) / (kernel - bare)),
            Goal::AtMost(0.34),
        );
    }
    push(
        format!("cost {TIMEHANDS_NOW} / {monotonic}"),
        ratio(TIMEHANDS_NOW, monotonic),
        Goal::Below(1.0),
    );
    push(
        format!("cost {TIMEHANDS_NOW_UNORDERED} / {RDTSC}"),
        ratio(TIMEHANDS_NOW_UNORDERED, RDTSC),
        Goal::AtMost(1.05),
    );
    push(
        format!("cost {TIMEHANDS_NOW_COARSE} / {MONOTONIC_COARSE}"),
        ratio(TIMEHANDS_NOW_COARSE, MONOTONIC_COARSE),
        Goal::AtMost(1.0),
    );
    push(
        format!("cost {TIMEHANDS_REALTIME} / {TIMEHANDS_NOW}"),
        ratio(TIMEHANDS_REALTIME, TIMEHANDS_NOW),
        Goal::AtMost(1.1),
    );
    // The drop-in adds nothing to the read it forwards.
    push(
        format!("cost {DROP_IN_NOW} / {TIMEHANDS_NOW}"),
        ratio(DROP_IN_NOW, TIMEHANDS_NOW),
        Goal::AtMost(1.02),
    );

    if let Some(ordering::Outcome::Rows { rows, .. }) = &report.ordering {
        for clock in [TIMEHANDS_NOW, DROP_IN_NOW] {
            push(
                format!("ping-pong backward steps of {clock}"),
                rows.iter()
                    .find(|r| r.clock == clock)
                    .map(|r| r.backward_steps as f64),
                Goal::AtMost(0.0),
            );
        }
    }
    if let Some(first_call) = &report.first_call {
        for library in ["timehands", "quanta-drop-in"] {
            push(
                format!("first call of {library}, µs"),
                first_call
                    .rows
                    .iter()
                    .find(|r| r.library == library)
                    .map(|r| r.first_call_ns as f64 / 1e3),
                Goal::Below(50.0),
            );
        }
    }
    if let Some(row) = report
        .tracking
        .iter()
        .flatten()
        .find(|r| r.clock == TIMEHANDS_NOW)
    {
        push(
            format!("tracking |offset| of {TIMEHANDS_NOW}, µs"),
            row.offset_ns.map(|o| o.abs() / 1e3),
            Goal::Below(1.0),
        );
        push(
            format!("tracking |rate error| of {TIMEHANDS_NOW}, ppm"),
            Some(row.rate_ppm.abs()),
            Goal::Below(0.1),
        );
    }
    if let Some(row) = report
        .tracking
        .iter()
        .flatten()
        .find(|r| r.clock == DROP_IN_NOW)
    {
        push(
            format!("tracking |rate error| of {DROP_IN_NOW}, ppm"),
            Some(row.rate_ppm.abs()),
            Goal::AtMost(0.01),
        );
    }
    if let Some(fresh) = &report.fresh {
        push(
            "fresh processes with a now() over 100 ns outside CLOCK_MONOTONIC".to_string(),
            Some(fresh.processes_off as f64),
            Goal::AtMost(0.0),
        );
    }
    if let Some(rows) = &report.keeping {
        let cost = |clock: &str, workload: usize| {
            rows.iter()
                .find(|r| r.clock == clock)
                .and_then(|r| r.costs.get(workload).copied().flatten())
        };
        let now = "timehands now()";
        let coarse = "timehands now_coarse()";
        let std_instant = "std Instant::now";
        // timehands' readers keep its clock: it has no thread to wake.
        for clock in [now, coarse] {
            for (workload, what) in [(0, "read, then sleep"), (1, "once a millisecond")] {
                push(
                    format!("keeping {clock} {what}: its threads' wakeups/s"),
                    cost(clock, workload).map(|c| c.wakeups),
                    Goal::AtMost(0.0),
                );
                push(
                    format!("keeping {clock} {what}: its threads' CPU ms/s"),
                    cost(clock, workload).map(|c| c.thread_cpu_ms),
                    Goal::AtMost(0.0),
                );
            }
        }
        push(
            format!("keeping {now} once a ms: process CPU ms/s over std's"),
            cost(now, 1)
                .zip(cost(std_instant, 1))
                .map(|(ours, std)| ours.process_cpu_ms - std.process_cpu_ms),
            Goal::AtMost(2.0),
        );
    }
    if let Some(keeper) = &report.keeper {
        keeper_targets(keeper, &mut push);
    }
    targets
}

/// The keeper's targets: the page's reads as cheap as the process's own,
/// a fresh process's first read cheap and right, and one keeper costing
/// the machine no more than one process keeping its own clock.
fn keeper_targets(
    keeper: &crate::keeper::Outcome,
    push: &mut impl FnMut(String, Option<f64>, Goal),
) {
    if let Some(one) = keeper.rows.iter().find(|row| row.processes == 1) {
        push(
            "keeper: now() on the page / the process's own now()".to_string(),
            Some(one.page_now_ns / one.own_now_ns),
            Goal::AtMost(1.05),
        );
    }
    for row in &keeper.rows {
        push(
            format!(
                "keeper: of {} readers, those not on the page",
                row.processes
            ),
            Some((row.processes - row.on_page) as f64),
            Goal::AtMost(0.0),
        );
    }
    if let Some(row) = keeper.rows.iter().max_by_key(|row| row.processes) {
        let keeping_one = (row.own_cpu_ms - row.page_cpu_ms) / row.processes as f64;
        push(
            format!(
                "keeper: its CPU / one process's keeping, {} readers",
                row.processes
            ),
            Some(row.keeper_cpu_ms / keeping_one),
            Goal::AtMost(1.0),
        );
    }
    push(
        "keeper: first now() of a fresh process on the page, µs".to_string(),
        keeper.first_now_ns.map(|ns| ns as f64 / 1e3),
        Goal::AtMost(5.0),
    );
    push(
        "keeper: fresh processes on the page with a now() over 100 ns outside".to_string(),
        keeper
            .fresh
            .as_ref()
            .map(|fresh| fresh.processes_off as f64),
        Goal::AtMost(0.0),
    );
}

/// Prints the targets that could be computed.
pub fn print(targets: &[Target]) {
    println!("Targets");
    if targets.is_empty() {
        println!("  none computed: the table has no timehands entries yet");
    }
    for target in targets {
        let verdict = if target.met { "met" } else { "MISSED" };
        println!(
            "  {:<60} {:>10.3} {:<8} {}",
            target.what, target.value, target.goal, verdict
        );
    }
}
