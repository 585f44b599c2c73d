//! What a clock costs: rounds of back-to-back calls, as the
//! `clock-gettime-bench.c` of OpenBSD's 2021 clock_gettime patch takes them.
//!
//! A round is `calls` calls of one clock timed as a whole (the timer's two
//! reads are spread over all the calls). A round in which the kernel preempted
//! the thread (its count of involuntary context switches, from `getrusage`,
//! moved) measured some other program too: it is discarded, counted, and taken
//! again. Windows keeps no such count a program can read: there every round
//! is kept, and [`KEPT`] says so. Rounds go round the clocks, one of each in turn, so that a slow
//! spell of the machine lands on every clock alike.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde::Serialize;

use crate::clocks::Clock;
use crate::progress;
use crate::summary::Summary;

/// How many preempted rounds in a row make a clock's measurement give up: the
/// machine is too busy for a round of this length.
const MAX_PREEMPTED_IN_A_ROW: u64 = 1000;

/// How long the clocks are read before they are measured.
const WARM_UP: Duration = Duration::from_millis(200);

/// The most rounds `--rounds` takes: the kept rounds are held in memory, 8
/// bytes each per clock, so that a mistyped count fails at once rather than
/// in an allocation the machine cannot make. (An i64, which clap's range
/// of a u32 flag takes.)
pub const MAX_ROUNDS: i64 = 1_000_000;

/// The most calls `--calls` takes: a round of a 30 ns clock then lasts 3 s,
/// and one preemption throws the whole round away.
pub const MAX_CALLS: u64 = 100_000_000;

/// Which rounds are kept, as `bench` and `report` say it.
#[cfg(unix)]
pub const KEPT: &str = "a round with an involuntary context switch is discarded and taken again";
/// Which rounds are kept, as `bench` and `report` say it.
#[cfg(windows)]
pub const KEPT: &str = "every round is kept (Windows counts no involuntary context switches to tell a preempted one by)";

/// The shape of a measurement.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Rounds kept per clock.
    pub rounds: usize,
    /// Calls per round.
    pub calls: u64,
    /// How long the rounds may take in all: past it, no more are taken
    /// (every clock keeps at least one), so that a preempted machine, which
    /// retakes most rounds, still gets an answer in time. `None`: no limit.
    pub budget: Option<Duration>,
}

/// One clock's rounds.
pub struct Rounds {
    /// The clock.
    pub clock: Clock,
    /// Nanoseconds per call of each kept round, in the order taken.
    pub ns_per_call: Vec<f64>,
    /// Rounds thrown away for an involuntary context switch.
    pub discarded: u64,
}

/// One clock's cost, as tables and JSON give it.
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// The name `--clocks` takes.
    pub clock: String,
    /// The call.
    pub label: String,
    /// Calls per round.
    pub calls: u64,
    /// Rounds discarded for an involuntary context switch.
    pub discarded: u64,
    /// Nanoseconds per call over the kept rounds.
    pub ns_per_call: Summary,
}

/// Takes `plan.rounds` undisturbed rounds of every clock (fewer if the
/// budget runs out), with a progress bar when that will take a while.
pub fn measure(clocks: &[Clock], plan: Plan) -> anyhow::Result<Vec<Rounds>> {
    // Rounds of each clock for WARM_UP first, which warm them up (the first
    // reads start timehands' clock, and its windups choose the counter,
    // some 10 ms on), and tell how long the whole will take.
    let warming = Instant::now();
    let mut one_round: Duration = clocks.iter().map(|c| c.time_calls(plan.calls)).sum();
    while warming.elapsed() < WARM_UP {
        one_round = clocks.iter().map(|c| c.time_calls(plan.calls)).sum();
    }
    let expected = one_round.saturating_mul(u32::try_from(plan.rounds).unwrap_or(u32::MAX));
    let progress = progress::bar("rounds", plan.rounds as u64, expected);
    let mut measured: Vec<Rounds> = clocks
        .iter()
        .map(|&clock| Rounds {
            clock,
            ns_per_call: Vec::with_capacity(plan.rounds),
            discarded: 0,
        })
        .collect();
    let began = Instant::now();
    for round in 0..plan.rounds {
        if round > 0 && plan.budget.is_some_and(|budget| began.elapsed() > budget) {
            break;
        }
        for rounds in &mut measured {
            rounds.take_one(plan.calls)?;
        }
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(measured)
}

impl Rounds {
    /// Takes rounds until one runs without a preemption, and keeps it.
    fn take_one(&mut self, calls: u64) -> anyhow::Result<()> {
        for _ in 0..MAX_PREEMPTED_IN_A_ROW {
            let before = involuntary_switches();
            let took = self.clock.time_calls(calls);
            if involuntary_switches() == before {
                self.ns_per_call.push(took.as_nanos() as f64 / calls as f64);
                return Ok(());
            }
            self.discarded += 1;
        }
        bail!(
            "{}: {MAX_PREEMPTED_IN_A_ROW} rounds of {calls} calls in a row were preempted: the machine is too busy; ask for fewer --calls per round",
            self.clock.label()
        )
    }

    /// The cost figures; `None` for no rounds.
    pub fn cost(&self, calls: u64) -> Option<Cost> {
        Some(Cost {
            clock: self.clock.key(),
            label: self.clock.label().to_string(),
            calls,
            discarded: self.discarded,
            ns_per_call: Summary::of(&self.ns_per_call)?,
        })
    }
}

/// This thread's involuntary context switches so far. Only the measuring
/// thread's count matters: a progress bar's thread being preempted disturbs
/// nothing. (Where there is no per-thread count, macOS, the process's.)
#[cfg(unix)]
fn involuntary_switches() -> Option<i64> {
    #[cfg(any(target_os = "linux", target_os = "freebsd"))]
    const WHO: libc::c_int = libc::RUSAGE_THREAD;
    #[cfg(not(any(target_os = "linux", target_os = "freebsd")))]
    const WHO: libc::c_int = libc::RUSAGE_SELF;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage for the call to write; WHO is a valid
    // target, so the call cannot fail.
    unsafe { libc::getrusage(WHO, &mut usage) };
    Some(usage.ru_nivcsw as i64)
}

/// None: Windows has no count of a thread's involuntary context switches.
#[cfg(windows)]
fn involuntary_switches() -> Option<i64> {
    None
}

/// The costs as a table, ns per call.
pub fn table(costs: &[Cost]) -> String {
    let mut text = format!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}\n",
        "clock (ns per call)", "rounds", "min", "median", "avg", "max", "stddev", "discarded"
    );
    for cost in costs {
        let s = &cost.ns_per_call;
        text.push_str(&format!(
            "{:<34} {:>9} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>10}\n",
            cost.label, s.n, s.min, s.median, s.avg, s.max, s.stddev, cost.discarded
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(budget: Option<Duration>) -> Vec<usize> {
        let plan = Plan {
            rounds: 3,
            calls: 10,
            budget,
        };
        let measured = measure(&[Clock::KernelMonotonic, Clock::Now], plan).expect("measured");
        measured.iter().map(|r| r.ns_per_call.len()).collect()
    }

    #[test]
    fn every_round_is_kept_without_a_budget_and_one_when_it_is_spent() {
        assert_eq!(kept(None), [3, 3]);
        assert_eq!(kept(Some(Duration::ZERO)), [1, 1]);
    }
}
