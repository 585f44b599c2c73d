//! The report of `timehands timers`: each setup's figures, the ratios,
//! the targets and whether each was met, as JSON and as text.

use serde::Serialize;

use super::pile::{Pile, Spell};
use super::{Args, Measured, Storm, ms, ratio};

/// One setup's figures, as JSON names them.
#[derive(Serialize)]
pub(super) struct Setup {
    name: String,
    hard_expiries: u64,
    hard_missed: u64,
    p50_ns: u64,
    p99_ns: u64,
    max_ns: u64,
    soft_expiries: u64,
    /// Soft expiries in the window's steady part (its first half where a
    /// pile comes in the second), and of those, the ones after deadline +
    /// slack + one soft tick (the service's bound; 0 for the naive queue,
    /// which promises none), the ones whose worker was busy with callbacks
    /// since before the bound, and the ones whose worker was still waiting
    /// after it.
    steady_soft_expiries: u64,
    soft_beyond_bound: u64,
    soft_beyond_bound_behind_callbacks: u64,
    soft_beyond_bound_stalled: u64,
    /// How long the soft workers waited for a CPU while they could run
    /// (Linux, Android; 0 elsewhere and for the naive queue).
    soft_workers_waited_for_cpu_ms: f64,
    /// The machine's steal time during the window, where the OS says (not
    /// for the naive queue).
    steal_ms: Option<f64>,
}

impl Setup {
    fn new(name: String, m: &Measured) -> Setup {
        let hard = &m.hard;
        Setup {
            name,
            hard_expiries: hard.len(),
            hard_missed: m.missed,
            p50_ns: hard.value_at_quantile(0.5),
            p99_ns: hard.value_at_quantile(0.99),
            max_ns: hard.max(),
            soft_expiries: m.soft.fired,
            steady_soft_expiries: m.steady.fired,
            soft_beyond_bound: m.steady.beyond_bound,
            soft_beyond_bound_behind_callbacks: m.steady.beyond_bound_behind_callbacks,
            soft_beyond_bound_stalled: m.steady.beyond_bound_stalled,
            soft_workers_waited_for_cpu_ms: ms(m.steady.waited_for_cpu),
            steal_ms: m.steal.map(ms),
        }
    }
}

/// Ratios between setups, as JSON names them.
#[derive(Serialize)]
pub(super) struct Ratios {
    naive_over_service_p50: f64,
    naive_over_service_p99: f64,
    naive_over_service_max: f64,
    loaded_over_unloaded_p99: f64,
}

/// The whole report, as JSON names it.
#[derive(Serialize)]
pub(super) struct Report {
    soft_timers: usize,
    interval_us: u64,
    duration_s: f64,
    window_ms: u64,
    slack_us: u64,
    work_ns: u64,
    soft_workers: usize,
    /// The service's soft tick.
    soft_tick_us: f64,
    /// How long the service took to arm the soft timers, and how far that
    /// ran past their first deadlines (0 when it ended before them).
    soft_arming_ms: f64,
    soft_arming_overran_ms: f64,
    /// The pile armed in the middle of the loaded window (none without
    /// soft timers).
    pile: Option<Pile>,
    hard_scheduling: String,
    naive_scheduling: String,
    setups: [Setup; 3],
    ratios: Ratios,
    /// The targets missed, by name (the command then exits non-zero).
    pub(super) missed: Vec<String>,
}

/// The most soft expiries beyond their bound in the steady state, in
/// percent, on a quiet machine.
const SOFT_BEYOND_TARGET_PERCENT: f64 = 0.1;

/// Whether each target the command prints was met.
struct Targets {
    /// Soft expiries beyond their bound in the steady part, at most
    /// [`SOFT_BEYOND_TARGET_PERCENT`].
    steady: bool,
    /// None of the soft timers due while the pile went in beyond its bound,
    /// the pile in the workers' wheel before the window's end.
    pile: bool,
    /// The hard p99 with soft timers within 1.2x of the one without.
    hard_p99: bool,
}

impl Targets {
    /// The names of the targets missed.
    fn missed(&self) -> Vec<String> {
        [
            (self.steady, "soft expiries beyond their bound"),
            (self.pile, "soft timers due while the pile went in"),
            (self.hard_p99, "hard p99 with / without soft timers"),
        ]
        .into_iter()
        .filter(|&(met, _)| !met)
        .map(|(_, name)| name.to_string())
        .collect()
    }
}

/// A spell's soft counts, as a line's part.
fn spell_text(spell: &Spell) -> String {
    format!(
        "(the {:.1} ms until the last was past its bound and taken): {} fired, {} beyond the bound \
         ({} behind callbacks, {} stalled; the soft workers waited {:.1} ms for a CPU)",
        spell.span_ms,
        spell.soft_expiries,
        spell.soft_beyond_bound,
        spell.soft_beyond_bound_behind_callbacks,
        spell.soft_beyond_bound_stalled,
        spell.soft_workers_waited_for_cpu_ms
    )
}

/// The word a target's line ends with.
fn met(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

impl Report {
    /// The report of the three setups, in order: the service without soft
    /// timers, with them, and the naive queue.
    pub(super) fn new(
        args: &Args,
        storm: &Storm,
        [unloaded, loaded, stacked]: [&Measured; 3],
    ) -> Report {
        let m = storm.soft;
        let arming = loaded.arming.unwrap_or_default();
        let setups = [
            Setup::new("service, no soft timers".into(), unloaded),
            Setup::new(format!("service, {m} soft timers"), loaded),
            Setup::new(format!("naive queue, {m} soft timers"), stacked),
        ];
        let ratios = Ratios {
            naive_over_service_p50: ratio(setups[2].p50_ns, setups[1].p50_ns),
            naive_over_service_p99: ratio(setups[2].p99_ns, setups[1].p99_ns),
            naive_over_service_max: ratio(setups[2].max_ns, setups[1].max_ns),
            loaded_over_unloaded_p99: ratio(setups[1].p99_ns, setups[0].p99_ns),
        };
        let mut report = Report {
            soft_timers: m,
            interval_us: args.interval,
            duration_s: args.duration,
            window_ms: args.window,
            slack_us: args.slack,
            work_ns: args.work,
            soft_workers: storm.soft_workers,
            soft_tick_us: storm.soft_tick().as_nanos() as f64 / 1000.0,
            soft_arming_ms: ms(arming.0),
            soft_arming_overran_ms: ms(arming.1),
            pile: loaded.pile,
            hard_scheduling: unloaded.scheduling.to_string(),
            naive_scheduling: stacked.scheduling.to_string(),
            setups,
            ratios,
            missed: Vec::new(),
        };
        report.missed = report.targets().missed();
        report
    }

    /// The soft expiries beyond their bound in the steady part, in percent.
    fn steady_beyond_percent(&self) -> f64 {
        let loaded = &self.setups[1];
        100.0 * ratio(loaded.soft_beyond_bound, loaded.steady_soft_expiries)
    }

    /// Whether each target was met (no pile, without soft timers, misses
    /// nothing).
    fn targets(&self) -> Targets {
        Targets {
            steady: self.steady_beyond_percent() <= SOFT_BEYOND_TARGET_PERCENT,
            pile: self.pile.as_ref().is_none_or(Pile::met),
            hard_p99: self.ratios.loaded_over_unloaded_p99 <= 1.2,
        }
    }
}

/// The report as lines of text.
pub(super) fn text(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "hard timer every {} µs; {} soft timers with periods of {}-{} ms, slack {} µs, {} ns of work each; {} s per setup",
        r.interval_us,
        r.soft_timers,
        r.window_ms / 2,
        r.window_ms,
        r.slack_us,
        r.work_ns,
        r.duration_s
    );
    let _ = writeln!(
        out,
        "service hard thread: {}; {} soft workers, soft tick {:.0} µs",
        r.hard_scheduling, r.soft_workers, r.soft_tick_us
    );
    let _ = writeln!(out, "naive queue thread:  {}", r.naive_scheduling);
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<32} {:>8} {:>7} {:>10} {:>10} {:>10} {:>12}",
        "hard-timer lateness", "expiries", "missed", "p50 µs", "p99 µs", "max µs", "soft fired"
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    for s in &r.setups {
        let _ = writeln!(
            out,
            "{:<32} {:>8} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>12}",
            s.name,
            s.hard_expiries,
            s.hard_missed,
            us(s.p50_ns),
            us(s.p99_ns),
            us(s.max_ns),
            s.soft_expiries
        );
    }
    let loaded = &r.setups[1];
    if r.soft_timers > 0 {
        let _ = writeln!(
            out,
            "service's soft timers armed in {:.1} ms, {}",
            r.soft_arming_ms,
            if r.soft_arming_overran_ms > 0.0 {
                format!(
                    "{:.1} ms past their first deadlines (those due meanwhile waited for arming)",
                    r.soft_arming_overran_ms
                )
            } else {
                "before their first deadlines".to_string()
            }
        );
    }
    let targets = r.targets();
    let _ = writeln!(
        out,
        "service's soft timers beyond deadline + slack + one tick{}: {} of {} ({:.3}%, \
         target <= {SOFT_BEYOND_TARGET_PERCENT}%: {}): \
         {} behind callbacks, {} stalled (a worker waiting for its alarm or a CPU); \
         the soft workers waited {:.0} ms for a CPU",
        if r.soft_timers > 0 {
            " in the window's first half"
        } else {
            ""
        },
        loaded.soft_beyond_bound,
        loaded.steady_soft_expiries,
        r.steady_beyond_percent(),
        met(targets.steady),
        loaded.soft_beyond_bound_behind_callbacks,
        loaded.soft_beyond_bound_stalled,
        loaded.soft_workers_waited_for_cpu_ms
    );
    let steal = |s: &Setup| s.steal_ms.map_or("-".to_string(), |ms| format!("{ms:.0}"));
    let _ = writeln!(
        out,
        "machine's steal time in the service's windows: {} ms without soft timers, {} ms with",
        steal(&r.setups[0]),
        steal(loaded)
    );
    if let Some(p) = &r.pile {
        let applied = p
            .applied_ms
            .map_or("not by the window's end".to_string(), |ms| {
                format!("{ms:.1} ms after the first")
            });
        let _ = writeln!(
            out,
            "a pile of {} more soft timers armed mid-window in {:.1} ms ({:.0} ns each), \
             all in the workers' wheel {applied}; soft timers due meanwhile {} (target 0 beyond: {})",
            p.timers,
            p.arming_ms,
            p.arming_ms * 1e6 / p.timers.max(1) as f64,
            spell_text(&p.spell),
            met(targets.pile),
        );
        let _ = writeln!(
            out,
            "the control, later, the arming thread spinning as long as arming took: soft timers due {}",
            p.control
                .as_ref()
                .map_or("no room left in the window".to_string(), spell_text)
        );
    }
    out.push('\n');
    let x = &r.ratios;
    let _ = writeln!(
        out,
        "naive queue / service: p50 {:.2}x, p99 {:.2}x, max {:.2}x",
        x.naive_over_service_p50, x.naive_over_service_p99, x.naive_over_service_max
    );
    let _ = writeln!(
        out,
        "service with / without soft timers: p99 {:.2}x (target <= 1.2x: {})",
        x.loaded_over_unloaded_p99,
        met(targets.hard_p99)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::{Pile, Spell, Targets};

    /// Each target missed is named, in the order the text prints them;
    /// none missed, none named (and the command exits zero).
    #[test]
    fn the_targets_missed_are_named() {
        let targets = |steady, pile, hard_p99| Targets {
            steady,
            pile,
            hard_p99,
        };
        assert!(targets(true, true, true).missed().is_empty());
        assert_eq!(
            targets(false, true, false).missed(),
            [
                "soft expiries beyond their bound",
                "hard p99 with / without soft timers"
            ]
        );
        assert_eq!(
            targets(true, false, true).missed(),
            ["soft timers due while the pile went in"]
        );
    }

    /// A pile meets its target with none beyond the bound, and only once
    /// it was all in the workers' wheel before the window's end.
    #[test]
    fn a_pile_meets_its_target_only_in_the_wheel_and_with_none_beyond() {
        let pile = |applied_ms, soft_beyond_bound| Pile {
            applied_ms,
            spell: Spell {
                soft_beyond_bound,
                ..Spell::default()
            },
            ..Pile::default()
        };
        assert!(pile(Some(40.0), 0).met());
        assert!(!pile(Some(40.0), 1).met());
        assert!(!pile(None, 0).met(), "not in the wheel by the window's end");
    }
}
