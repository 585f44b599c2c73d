//! The report's answer, first: which clock to use on this machine, what it
//! costs against the kernel's monotonic clock (Linux's CLOCK_MONOTONIC) and
//! std's `Instant::now()`, and how far timehands' `now()` was from the
//! kernel's clock.

use serde::Serialize;

use crate::bracket::Offset;
use crate::clocks::Clock;
use crate::rounds::Cost;

/// The three ways a program reads a precise monotonic clock.
const CANDIDATES: [Clock; 3] = [Clock::Now, Clock::KernelMonotonic, Clock::StdInstant];

/// The verdict, as JSON names it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// The clock to use here: the cheapest of the three by median cost.
    pub clock: String,
    /// Median ns per call of timehands `now()`.
    pub timehands_ns: f64,
    /// Median ns per call of the kernel's monotonic clock.
    pub kernel_ns: f64,
    /// Median ns per call of std's `Instant::now()`.
    pub std_ns: f64,
    /// timehands `now()` minus the kernel's monotonic clock, ns.
    pub error_ns: i64,
    /// Half the bracket the error was read in: it is exact to within this.
    pub error_within_ns: u64,
    /// Why timehands reads the kernel's clock here, when it does.
    pub fallback: Option<String>,
    /// The verdict in two sentences.
    pub text: String,
}

/// The verdict from the report's costs and `now()`'s offset; `None` when one
/// of the three clocks was not measured.
pub fn of(costs: &[Cost], now_offset: &Offset, fallback: Option<&str>) -> Option<Verdict> {
    let median = |clock: Clock| {
        costs
            .iter()
            .find(|c| c.clock == clock.key())
            .map(|c| c.ns_per_call.median)
    };
    let [timehands_ns, kernel_ns, std_ns] = CANDIDATES.map(median);
    let (timehands_ns, kernel_ns, std_ns) = (timehands_ns?, kernel_ns?, std_ns?);
    let (best, best_ns) = CANDIDATES
        .into_iter()
        .zip([timehands_ns, kernel_ns, std_ns])
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let kernel = Clock::KernelMonotonic.label();
    let mut text = if best == Clock::Now {
        format!(
            "Use timehands now() here: {timehands_ns:.1} ns per call, {} {kernel} ({kernel_ns:.1} ns) and {} std's Instant::now() ({std_ns:.1} ns).",
            against(timehands_ns, kernel_ns),
            against(timehands_ns, std_ns),
        )
    } else {
        format!(
            "Use {} here: {best_ns:.1} ns per call; timehands now() costs {timehands_ns:.1} ns, {} it.",
            best.label(),
            against(timehands_ns, best_ns),
        )
    };
    let error_within_ns = now_offset.bracket_ns.div_ceil(2);
    text.push_str(&format!(
        " timehands now() read {} ns from {kernel}, exact to within {error_within_ns} ns.",
        now_offset.offset_ns
    ));
    if let Some(why) = fallback {
        text.push_str(&format!(" It reads the kernel's clock here: {why}."));
    }
    Some(Verdict {
        clock: best.label().to_string(),
        timehands_ns,
        kernel_ns,
        std_ns,
        error_ns: now_offset.offset_ns,
        error_within_ns,
        fallback: fallback.map(str::to_string),
        text,
    })
}

impl Verdict {
    /// Says what a call of `now()` saves against the kernel's monotonic
    /// clock on the kernel's clocksource `source` (Linux's
    /// `current_clocksource`, where shown): the saving is the clocksource's
    /// (a paravirtual one, `kvm-clock`, costs the kernel more than `tsc`).
    pub fn tell_clocksource(&mut self, source: Option<&str>) {
        let Some(source) = source else { return };
        let saved = self.kernel_ns - self.timehands_ns;
        self.text.push_str(&format!(
            " On the kernel's clocksource {source}, a call of timehands now() saves {saved:.1} ns against {} ({:.2}x its cost).",
            Clock::KernelMonotonic.label(),
            self.timehands_ns / self.kernel_ns.max(f64::MIN_POSITIVE)
        ));
    }
}

/// Costs closer than this ratio are told as about the same.
const SAME_COST: f64 = 1.05;

/// `ours` against `theirs` in words: "3.1x cheaper than", "1.2x dearer
/// than", or "about the cost of" within 5%.
fn against(ours: f64, theirs: f64) -> String {
    if ours.max(theirs) < ours.min(theirs) * SAME_COST {
        "about the cost of".to_string()
    } else if ours <= theirs {
        format!("{:.1}x cheaper than", theirs / ours.max(f64::MIN_POSITIVE))
    } else {
        format!("{:.1}x dearer than", ours / theirs.max(f64::MIN_POSITIVE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Summary;

    fn cost(clock: Clock, median: f64) -> Cost {
        Cost {
            clock: clock.key(),
            label: clock.label().to_string(),
            calls: 10,
            discarded: 0,
            ns_per_call: Summary::of(&[median]).expect("a value"),
        }
    }

    fn offset(offset_ns: i64, bracket_ns: u64) -> Offset {
        Offset {
            kernel_ns: 0,
            offset_ns,
            bracket_ns,
        }
    }

    #[test]
    fn the_cheapest_of_the_three_is_the_clock_to_use_with_its_ratios() {
        let costs = [
            cost(Clock::Now, 5.0),
            cost(Clock::KernelMonotonic, 20.0),
            cost(Clock::StdInstant, 25.0),
            cost(Clock::NowCoarse, 1.0),
        ];
        let v = of(&costs, &offset(-12, 41), None).expect("all measured");
        assert_eq!(v.clock, "timehands now()");
        let kernel = Clock::KernelMonotonic.label();
        assert_eq!(
            v.text,
            format!(
                "Use timehands now() here: 5.0 ns per call, 4.0x cheaper than \
                 {kernel} (20.0 ns) and 5.0x cheaper than std's Instant::now() (25.0 ns). \
                 timehands now() read -12 ns from {kernel}, exact to within 21 ns."
            )
        );
        assert_eq!((v.error_ns, v.error_within_ns), (-12, 21));
    }

    /// The clocksource's saving is told where the clocksource is shown.
    #[test]
    fn the_clocksource_and_its_saving_are_told() {
        let costs = [
            cost(Clock::Now, 18.0),
            cost(Clock::KernelMonotonic, 24.0),
            cost(Clock::StdInstant, 25.0),
        ];
        let mut v = of(&costs, &offset(0, 0), None).expect("all measured");
        let before = v.text.clone();
        v.tell_clocksource(None);
        assert_eq!(v.text, before);
        v.tell_clocksource(Some("kvm-clock"));
        let kernel = Clock::KernelMonotonic.label();
        assert!(
            v.text.ends_with(&format!(
                " On the kernel's clocksource kvm-clock, a call of timehands now() saves 6.0 ns against {kernel} (0.75x its cost)."
            )),
            "{}",
            v.text
        );
    }

    #[test]
    fn a_cheaper_kernel_clock_is_named_and_a_fallback_told() {
        let costs = [
            cost(Clock::Now, 30.0),
            cost(Clock::KernelMonotonic, 20.0),
            cost(Clock::StdInstant, 25.0),
        ];
        let v = of(&costs, &offset(3, 10), Some("the TSC is not invariant")).expect("measured");
        let kernel = Clock::KernelMonotonic.label();
        assert_eq!(v.clock, kernel);
        assert!(
            v.text.starts_with(&format!(
                "Use {kernel} here: 20.0 ns per call; timehands now() costs 30.0 ns, 1.5x dearer than it."
            )),
            "{}",
            v.text
        );
        assert!(
            v.text
                .ends_with("It reads the kernel's clock here: the TSC is not invariant.")
        );
    }

    #[test]
    fn costs_within_five_percent_are_about_the_same() {
        assert_eq!(against(26.3, 25.2), "about the cost of");
        assert_eq!(against(25.2, 26.3), "about the cost of");
        assert_eq!(against(30.0, 25.0), "1.2x dearer than");
        assert_eq!(against(10.0, 25.0), "2.5x cheaper than");
    }

    #[test]
    fn without_one_of_the_three_there_is_no_verdict() {
        let costs = [cost(Clock::Now, 5.0), cost(Clock::KernelMonotonic, 20.0)];
        assert_eq!(of(&costs, &offset(0, 0), None), None);
    }
}
