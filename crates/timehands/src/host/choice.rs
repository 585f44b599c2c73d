//! Choosing the counter: the checks, their verdicts, and the cross-CPU
//! check of the TSC.

use super::counter::HostCounter;
#[cfg(target_arch = "aarch64")]
use crate::Counter;
use crate::host::brackets::Pair;
#[cfg(target_arch = "x86_64")]
use crate::host::kernel_clocks::SystemClocks;
use crate::hw::KernelCounter;
#[cfg(target_arch = "x86_64")]
use crate::os::KernelClock;
use std::borrow::Cow;

/// One check that went into choosing the counter.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Verdict {
    /// What was checked.
    pub check: &'static str,
    /// Whether the counter passed it.
    pub passed: bool,
    /// What was found.
    pub detail: String,
}

/// The counter chosen at startup, with its frequency and the reasons.
pub(super) struct Choice {
    pub(super) counter: HostCounter,
    pub(super) frequency_source: Cow<'static, str>,
    pub(super) verdicts: Vec<Verdict>,
    pub(super) fallback: Option<String>,
    /// A pair of the counter and CLOCK_MONOTONIC from the start of startup,
    /// where one was taken: the steering's first baseline.
    pub(super) anchor: Option<Pair>,
    /// How sure the frequency is, where it was measured (or is exact).
    pub(super) uncertainty_ppb: Option<u64>,
}

/// Picks the counter: see the module docs.
pub(super) fn choose() -> Choice {
    let mut verdicts = Vec::new();
    let forced = match std::env::var("TIMEHANDS_COUNTER") {
        Ok(v) if v == "tsc" || v == "kernel" => Some(v),
        Ok(v) => {
            // A library cannot refuse to tell the time: say so once, and choose
            // as if the variable were not set.
            eprintln!(
                "timehands: TIMEHANDS_COUNTER={v:?} is not a counter (use \"tsc\" or \"kernel\"); choosing automatically"
            );
            verdicts.push(Verdict {
                check: "TIMEHANDS_COUNTER",
                passed: false,
                detail: format!("{v:?} is not \"tsc\" or \"kernel\": ignored"),
            });
            None
        }
        Err(_) => None,
    };
    let kernel = |reason: String, verdicts: Vec<Verdict>| Choice {
        counter: HostCounter::Kernel(KernelCounter::monotonic()),
        frequency_source: kernel_frequency_source(),
        verdicts,
        fallback: Some(reason),
        anchor: None,
        // CLOCK_MONOTONIC counts nanoseconds by definition.
        uncertainty_ppb: Some(0),
    };
    if forced.as_deref() == Some("kernel") {
        return kernel("TIMEHANDS_COUNTER=kernel".to_string(), verdicts);
    }
    hardware(forced.is_some(), verdicts)
        .unwrap_or_else(|(reason, verdicts)| kernel(reason, verdicts))
}

/// The TSC, if it may keep time (or `forced`); else why not.
#[cfg(target_arch = "x86_64")]
pub(super) fn hardware(
    forced: bool,
    mut verdicts: Vec<Verdict>,
) -> Result<Choice, (String, Vec<Verdict>)> {
    // The TSC against the kernel from here to the end of the checks: the
    // frequency measurement, if CPUID states none, and the steering's anchor.
    let anchor = crate::host::brackets::pair(&SystemClocks, crate::host::brackets::read_tsc);
    let facts = crate::hw::TscFacts::read();
    verdicts.push(Verdict {
        check: "invariant TSC (CPUID 0x80000007)",
        passed: facts.invariant,
        detail: format!(
            "{} {}",
            facts.vendor,
            if facts.invariant {
                "says invariant"
            } else {
                "does not say invariant"
            }
        ),
    });
    // Linux's clocksource is evidence where it shows: a kernel that keeps
    // time with something else found the TSC wanting (or was told to). Where
    // it does not show (another OS, a container without sysfs), CPUID's word
    // stands, and the cross-CPU check and the watchdog have the last word.
    let source = crate::hw::kernel_clocksource();
    let kernel_distrusts = source.as_deref().is_some_and(|source| source != "tsc");
    verdicts.push(Verdict {
        check: "kernel clocksource",
        passed: !kernel_distrusts,
        detail: source
            .unwrap_or_else(|| format!("not shown on {}: not needed", std::env::consts::OS)),
    });
    let trusted = facts.invariant && !kernel_distrusts;
    if !(forced || trusted) {
        return Err((
            "the TSC is not trusted here (see the verdicts)".to_string(),
            verdicts,
        ));
    }
    let (hz, uncertainty_ppb, frequency_source) = match facts.stated_frequency() {
        Some(stated) if !stated.is_nominal() => {
            (stated.hz, None, format!("CPUID {:?}", stated.source).into())
        }
        _ => {
            let measured = crate::host::brackets::startup_frequency(
                &SystemClocks,
                &anchor,
                crate::host::brackets::read_tsc,
            );
            (
                measured.hz,
                Some(measured.uncertainty_ppb),
                format!(
                    "measured against {} at startup",
                    KernelClock::Monotonic.name()
                )
                .into(),
            )
        }
    };
    if forced {
        verdicts.push(Verdict {
            check: "TIMEHANDS_COUNTER",
            passed: true,
            detail: "tsc: forced".to_string(),
        });
    }
    Ok(Choice {
        counter: HostCounter::Tsc(crate::hw::Tsc::new(hz)),
        frequency_source,
        verdicts,
        fallback: None,
        anchor: Some(anchor),
        uncertainty_ppb,
    })
}

/// The generic timer: architected, synchronized and of known frequency.
#[cfg(target_arch = "aarch64")]
pub(super) fn hardware(
    _forced: bool,
    mut verdicts: Vec<Verdict>,
) -> Result<Choice, (String, Vec<Verdict>)> {
    let counter = crate::hw::Cntvct::new();
    verdicts.push(Verdict {
        check: "CNTFRQ_EL0",
        passed: true,
        detail: format!("{} Hz", counter.frequency()),
    });
    Ok(Choice {
        counter: HostCounter::Cntvct(counter),
        frequency_source: "CNTFRQ_EL0".into(),
        verdicts,
        fallback: None,
        anchor: None,
        // Firmware states CNTFRQ_EL0; the steering measures it.
        uncertainty_ppb: None,
    })
}

/// No hardware counter is supported on this architecture.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn hardware(
    _forced: bool,
    verdicts: Vec<Verdict>,
) -> Result<Choice, (String, Vec<Verdict>)> {
    Err((
        "no hardware counter is supported on this architecture".to_string(),
        verdicts,
    ))
}

/// How long the TSC is measured against CLOCK_MONOTONIC before it takes
/// over: long enough that the rate is known to some ppm (brackets some tens
/// of nanoseconds wide, 10 ms apart), so that from its first read our time
/// stays within 100 ns of the kernel's until the steering measures again.
/// A frequency CPUID states is off by up to some hundreds of ppm in a VM:
/// microseconds by the first steering. Until then readers read the
/// kernel's clock.
#[cfg(target_arch = "x86_64")]
pub(super) const SETTLE: std::time::Duration = std::time::Duration::from_millis(10);

/// How sure the settled frequency must be, in ppb: 50 ns over the 10 ms to
/// the next steering. A machine that preempts the brackets wide is measured
/// longer, up to [`SETTLE`] ten times.
#[cfg(target_arch = "x86_64")]
const SETTLED_PPB: u64 = 5_000;

/// The choice with its TSC's frequency measured from its anchor over
/// [`SETTLE`] (sleeping for the rest of it): the frequency the TSC takes
/// over with. Any other choice as it is.
pub(super) fn settle(choice: Choice) -> Choice {
    #[cfg(target_arch = "x86_64")]
    if let (HostCounter::Tsc(_), Some(anchor)) = (&choice.counter, choice.anchor) {
        use crate::host::brackets::{pair, read_tsc};
        use crate::host::kernel_clocks::KernelClocks;
        let waited = SystemClocks
            .nanos(KernelClock::Monotonic)
            .saturating_sub(anchor.kernel);
        let rest = (SETTLE.as_nanos() as u64).saturating_sub(waited);
        std::thread::sleep(std::time::Duration::from_nanos(rest));
        let longest = anchor.kernel + 10 * SETTLE.as_nanos() as u64;
        let measured = loop {
            let now = pair(&SystemClocks, read_tsc);
            let settled = anchor.frequency_to(&now, SETTLE).filter(|measured| {
                measured.uncertainty_ppb <= SETTLED_PPB || now.kernel >= longest
            });
            if let Some(measured) = settled {
                break measured;
            }
            std::thread::sleep(SETTLE / 10);
        };
        return Choice {
            counter: HostCounter::Tsc(crate::hw::Tsc::new(measured.hz)),
            frequency_source: format!(
                "measured against {} over {SETTLE:?} (startup: {})",
                KernelClock::Monotonic.name(),
                choice.frequency_source
            )
            .into(),
            uncertainty_ppb: Some(measured.uncertainty_ppb),
            ..choice
        };
    }
    choice
}

/// Where the frequency of the kernel's clock comes from, as `info` says:
/// no allocation, as the clock starts on it (in a signal handler, maybe).
pub(super) fn kernel_frequency_source() -> Cow<'static, str> {
    Cow::Borrowed("the OS's Monotonic counts nanoseconds")
}

/// What the cross-CPU check is called in the verdicts.
pub(super) const CROSS_CPU_CHECK: &str = "cross-CPU TSC check";

/// Hand-offs per CPU pair in the cross-CPU check: some milliseconds a pair,
/// on a thread of its own, with bounds about a round trip wide.
#[cfg(target_arch = "x86_64")]
pub(super) const CROSS_CPU_HANDOFFS: u64 = 2_000;

/// Each CPU's TSC against the first CPU's, as Linux checks at boot: the
/// verdict, and why to fail over if the TSCs disagree.
#[cfg(target_arch = "x86_64")]
pub(super) fn cross_cpu_verdict(hz: u64) -> (Verdict, Option<String>) {
    take_process_affinity();
    verdict_of(crate::diagnostics::tsc_sync::measure_against_first(
        CROSS_CPU_HANDOFFS,
        hz,
    ))
}

/// Gives the calling thread the affinity of the process's main thread: a
/// check on it then covers the CPUs the process was given (`taskset`, a
/// cpuset), not only those of the reader whose windup started the thread.
#[cfg(target_arch = "x86_64")]
pub(super) fn take_process_affinity() {
    // A failure leaves the affinity as it was: the check then covers this
    // thread's CPUs.
    if let Ok(cpus) = crate::os::process_cpus() {
        let _ = crate::os::pin_to_cpus(&cpus);
    }
}

/// The verdict of a cross-CPU measurement, and why to fail over if it found
/// two CPUs apart.
#[cfg(target_arch = "x86_64")]
pub(super) fn verdict_of(
    measured: Result<crate::diagnostics::tsc_sync::Report, crate::diagnostics::tsc_sync::SyncError>,
) -> (Verdict, Option<String>) {
    let report = match measured {
        Ok(report) => report,
        Err(e) => {
            let verdict = Verdict {
                check: CROSS_CPU_CHECK,
                passed: false,
                detail: format!("not run: {e}"),
            };
            return (verdict, None);
        }
    };
    if report.pairs.is_empty() {
        let verdict = Verdict {
            check: CROSS_CPU_CHECK,
            passed: false,
            detail: "not run: the process may run on one CPU only".to_string(),
        };
        return (verdict, None);
    }
    let apart = report.pairs.iter().find(|pair| !pair.synchronized());
    let widest = report
        .pairs
        .iter()
        .map(|pair| pair.hi_ns - pair.lo_ns)
        .fold(0.0, f64::max);
    let detail = match apart {
        None => format!(
            "{} CPU pairs agree, bounds at most {widest:.0} ns wide",
            report.pairs.len()
        ),
        Some(pair) => format!(
            "CPUs {:?} are [{:.0}, {:.0}] ns apart",
            pair.cpus, pair.lo_ns, pair.hi_ns
        ),
    };
    let why = apart.map(|_| format!("the {CROSS_CPU_CHECK} found {detail}"));
    let verdict = Verdict {
        check: CROSS_CPU_CHECK,
        passed: apart.is_none(),
        detail,
    };
    (verdict, why)
}
