//! Choosing the counter: the checks, their verdicts, and the cross-CPU
//! check of the TSC.
//!
//! The TSC keeps time where CPUID says it is invariant and either the
//! kernel keeps time with it (clocksource `tsc`, or none shown) or, where
//! the kernel runs a hypervisor's paravirtual clocksource (`kvm-clock`,
//! `xen`, `hyperv_clocksource_tsc_page`), its own evidence holds: its rate
//! over the two halves of the first measurement against CLOCK_MONOTONIC
//! agrees (and with the frequency CPUID states, if it states one), checked
//! before it takes over; and the cross-CPU check passes, checked by the
//! upkeep thread once it has, which else retires it for the kernel's clock.
//! A paravirtual clocksource guards against a migration to a host whose TSC
//! runs at another rate; here the watchdog does, at every steering. Any
//! other clocksource (`hpet`, `acpi_pm`) means the kernel found the TSC
//! wanting: the kernel's clock is read. The generic timer on aarch64 is
//! architected and synchronized, and no clocksource gates it; but an
//! emulator's that reads the wall clock (qemu-user's) is refused.

use super::counter::HostCounter;
#[cfg(target_arch = "x86_64")]
use crate::host::brackets::Measured;
use crate::host::brackets::Pair;
#[cfg(target_arch = "x86_64")]
use crate::host::kernel_clocks::SystemClocks;
use crate::hw::KernelCounter;
#[cfg(target_arch = "x86_64")]
use crate::os::KernelClock;
use std::borrow::Cow;

#[cfg(any(target_arch = "aarch64", test))]
mod generic_timer;
#[cfg(target_arch = "aarch64")]
use generic_timer::hardware;

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
    /// Where the TSC is trusted on its own evidence (the kernel runs a
    /// paravirtual clocksource), what it must still show.
    pub(super) own_evidence: Option<OwnEvidence>,
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
    if forced.as_deref() == Some("kernel") {
        return kernel_choice("TIMEHANDS_COUNTER=kernel".to_string(), verdicts);
    }
    hardware(forced.is_some(), verdicts)
        .unwrap_or_else(|(reason, verdicts)| kernel_choice(reason, verdicts))
}

/// The kernel's clock, chosen because of `reason`.
fn kernel_choice(reason: String, verdicts: Vec<Verdict>) -> Choice {
    Choice {
        counter: HostCounter::Kernel(KernelCounter::monotonic()),
        frequency_source: kernel_frequency_source(),
        verdicts,
        fallback: Some(reason),
        anchor: None,
        // CLOCK_MONOTONIC counts nanoseconds by definition.
        uncertainty_ppb: Some(0),
        own_evidence: None,
    }
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
    let trust = Trust::of(source.as_deref());
    verdicts.push(Verdict {
        check: "kernel clocksource",
        passed: trust != Trust::Distrusted,
        detail: match (&source, trust) {
            (Some(source), Trust::OwnEvidence) => format!(
                "{source}: paravirtual, so the TSC's own evidence decides (CPUID, its rate against {} at startup, the {CROSS_CPU_CHECK})",
                KernelClock::Monotonic.name()
            ),
            (Some(source), _) => source.clone(),
            (None, _) => format!("not shown on {}: not needed", std::env::consts::OS),
        },
    });
    let trusted = facts.invariant && trust != Trust::Distrusted;
    if !(forced || trusted) {
        return Err((
            "the TSC is not trusted here (see the verdicts)".to_string(),
            verdicts,
        ));
    }
    // Trusted on its own evidence only where nothing forced it.
    let own_evidence = !forced && trust == Trust::OwnEvidence;
    verdicts.push(Verdict {
        check: TRUSTED_ON,
        passed: true,
        detail: if forced {
            "TIMEHANDS_COUNTER=tsc".to_string()
        } else if own_evidence {
            format!(
                "its own evidence: CPUID says invariant; its rate against {} (below) and the {CROSS_CPU_CHECK} must agree, else {} takes over",
                KernelClock::Monotonic.name(),
                KernelClock::Monotonic.name()
            )
        } else {
            "CPUID says invariant, and the kernel keeps time with it (or does not say)".to_string()
        },
    });
    let stated = facts
        .stated_frequency()
        .filter(|stated| !stated.is_nominal())
        .map(|stated| stated.hz);
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
        own_evidence: own_evidence.then_some(OwnEvidence { stated_hz: stated }),
    })
}

#[cfg(target_arch = "x86_64")]
/// What the check that says which evidence trusted the TSC is called.
pub(super) const TRUSTED_ON: &str = "TSC trusted on";

#[cfg(target_arch = "x86_64")]
/// What the rate check of a TSC trusted on its own evidence is called.
pub(super) const RATE_CHECK: &str = "TSC rate against the kernel's clock";

#[cfg(target_arch = "x86_64")]
/// The clocksources of hypervisors (KVM, Xen, Hyper-V and Azure, VMware):
/// the kernel keeps time with them because a guest's TSC *may* change rate
/// at a migration or differ between vCPUs, not because it found this one
/// wanting. There the TSC is trusted on its own evidence.
const PARAVIRTUAL: [&str; 4] = ["kvm-clock", "xen", "hyperv_clocksource_tsc_page", "vmw-tsc"];

#[cfg(target_arch = "x86_64")]
/// What the kernel's clocksource says of the TSC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Trust {
    /// The kernel keeps time with the TSC, or does not say (not Linux, no
    /// sysfs): CPUID's word stands, and the cross-CPU check and the
    /// watchdog have the last word.
    Kernel,
    /// A paravirtual clocksource: the TSC's own evidence decides (CPUID,
    /// its rate against CLOCK_MONOTONIC over the first measurement, the
    /// cross-CPU check, all of which must pass).
    OwnEvidence,
    /// Another clocksource (`hpet`, `acpi_pm`): the kernel found the TSC
    /// wanting (its own watchdog marked it unstable), or was told to.
    Distrusted,
}

#[cfg(target_arch = "x86_64")]
impl Trust {
    /// The trust the kernel's clocksource `source` (if shown) gives.
    pub(super) fn of(source: Option<&str>) -> Trust {
        match source {
            None | Some("tsc") => Trust::Kernel,
            Some(source) if PARAVIRTUAL.contains(&source) => Trust::OwnEvidence,
            Some(_) => Trust::Distrusted,
        }
    }
}

/// What a TSC trusted on its own evidence must still show before it takes
/// over ([`settle`]) and once the upkeep thread has checked it
/// ([`cross_cpu_failover`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OwnEvidence {
    /// The frequency CPUID states exactly (the hypervisor's leaf, the
    /// crystal's), which the measured rate must agree with.
    pub(super) stated_hz: Option<u64>,
}

#[cfg(target_arch = "x86_64")]
/// Whether the TSC's rate over the two halves of its first measurement
/// against CLOCK_MONOTONIC agree with each other, and with `stated_hz`
/// where CPUID states one: within the watchdog's bound
/// ([`RATE_BOUND_PPM`](super::watchdog::RATE_BOUND_PPM), a counter further
/// off is retired anyway) plus what the brackets can tell. A TSC the
/// hypervisor scales wrongly, or that runs at another rate on the vCPU the
/// second half ran on, fails it.
pub(super) fn rate_verdict(first: Measured, second: Measured, stated_hz: Option<u64>) -> Verdict {
    let ppm = |a: u64, b: u64| (a as f64 / b as f64 - 1.0) * 1e6;
    let bound = super::watchdog::RATE_BOUND_PPM;
    let halves = ppm(second.hz, first.hz);
    let halves_slack = (first.uncertainty_ppb + second.uncertainty_ppb) as f64 / 1e3;
    let mut passed = halves.abs() <= bound + halves_slack;
    let mut detail = format!(
        "{} Hz then {} Hz over two halves of {SETTLE:?}: {halves:+.1} ppm apart (bound ±{:.0} ppm)",
        first.hz,
        second.hz,
        bound + halves_slack
    );
    if let Some(stated) = stated_hz {
        let off = ppm(second.hz, stated);
        let slack = second.uncertainty_ppb as f64 / 1e3;
        passed &= off.abs() <= bound + slack;
        detail.push_str(&format!(
            "; {off:+.1} ppm off the {stated} Hz CPUID states (bound ±{:.0} ppm)",
            bound + slack
        ));
    }
    Verdict {
        check: RATE_CHECK,
        passed,
        detail,
    }
}

#[cfg(target_arch = "x86_64")]
/// Why a TSC trusted on its own evidence (`own_evidence`) must give way to
/// the kernel's clock after the cross-CPU check, if it must: where the
/// check found two CPUs apart (`why`, for any TSC), or did not pass at all
/// (not run: one CPU, no thread), as the paravirtual clocksource's word is
/// then all there is against a TSC that may differ between vCPUs.
pub(super) fn cross_cpu_failover(
    verdict: &Verdict,
    why: Option<String>,
    own_evidence: bool,
) -> Option<String> {
    why.or_else(|| {
        (own_evidence && !verdict.passed).then(|| {
            format!(
                "the TSC was trusted on its own evidence, and the {CROSS_CPU_CHECK} did not pass ({})",
                verdict.detail
            )
        })
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
        let sleep_until = |since_anchor: std::time::Duration| {
            let waited = SystemClocks
                .nanos(KernelClock::Monotonic)
                .saturating_sub(anchor.kernel);
            let rest = (since_anchor.as_nanos() as u64).saturating_sub(waited);
            std::thread::sleep(std::time::Duration::from_nanos(rest));
        };
        // A TSC trusted on its own evidence is measured in two halves, whose
        // rates must agree (see `rate_verdict`).
        let mid = choice.own_evidence.map(|_| {
            sleep_until(SETTLE / 2);
            pair(&SystemClocks, read_tsc)
        });
        sleep_until(SETTLE);
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
        let mut verdicts = choice.verdicts;
        if let (Some(evidence), Some(mid)) = (choice.own_evidence, mid) {
            let now = pair(&SystemClocks, read_tsc);
            let halves = anchor
                .frequency_to(&mid, std::time::Duration::ZERO)
                .zip(mid.frequency_to(&now, std::time::Duration::ZERO));
            let verdict = match halves {
                Some((first, second)) => rate_verdict(first, second, evidence.stated_hz),
                None => Verdict {
                    check: RATE_CHECK,
                    passed: false,
                    detail: format!("{} did not advance", KernelClock::Monotonic.name()),
                },
            };
            let passed = verdict.passed;
            verdicts.push(verdict);
            if !passed {
                return kernel_choice(
                    format!("the TSC's own evidence failed: the {RATE_CHECK} (see the verdicts)"),
                    verdicts,
                );
            }
        }
        return Choice {
            counter: HostCounter::Tsc(crate::hw::Tsc::new(measured.hz)),
            frequency_source: format!(
                "measured against {} over {SETTLE:?} (startup: {})",
                KernelClock::Monotonic.name(),
                choice.frequency_source
            )
            .into(),
            uncertainty_ppb: Some(measured.uncertainty_ppb),
            verdicts,
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

#[cfg(target_arch = "x86_64")]
#[cfg(test)]
mod tests {
    use super::*;

    /// A rate measured to `uncertainty_ppb`.
    fn measured(hz: u64, uncertainty_ppb: u64) -> Measured {
        Measured {
            hz,
            uncertainty_ppb,
        }
    }

    /// `tsc` (or no clocksource shown) is the kernel's trust; the
    /// hypervisors' clocksources leave it to the TSC's own evidence; any
    /// other is the kernel's distrust.
    #[test]
    fn the_clocksource_says_whose_evidence_decides() {
        assert_eq!(Trust::of(None), Trust::Kernel);
        assert_eq!(Trust::of(Some("tsc")), Trust::Kernel);
        for source in ["kvm-clock", "xen", "hyperv_clocksource_tsc_page", "vmw-tsc"] {
            assert_eq!(Trust::of(Some(source)), Trust::OwnEvidence, "{source}");
        }
        for source in ["hpet", "acpi_pm", "jiffies", "refined-jiffies"] {
            assert_eq!(Trust::of(Some(source)), Trust::Distrusted, "{source}");
        }
    }

    /// The two halves' rates must agree within the watchdog's bound plus
    /// their uncertainties, and with a stated frequency within the bound:
    /// a TSC that changed rate by 0.2 %, or runs 0.2 % off what CPUID
    /// states, fails; one 50 ppm apart passes.
    #[test]
    fn the_rate_check_wants_the_halves_and_the_statement_to_agree() {
        const HZ: u64 = 2_600_000_000;
        let steady = rate_verdict(measured(HZ, 5_000), measured(HZ + 130_000, 5_000), None);
        assert!(steady.passed, "{steady:?}");
        assert_eq!(steady.check, RATE_CHECK);
        let changed = rate_verdict(measured(HZ, 5_000), measured(HZ * 1002 / 1000, 5_000), None);
        assert!(!changed.passed, "{changed:?}");
        let wide = rate_verdict(
            measured(HZ, 600_000),
            measured(HZ * 1001 / 1000, 600_000),
            None,
        );
        assert!(wide.passed, "brackets too wide to tell: {wide:?}");
        let stated = rate_verdict(measured(HZ, 5_000), measured(HZ, 5_000), Some(HZ));
        assert!(stated.passed, "{stated:?}");
        let off = rate_verdict(
            measured(HZ, 5_000),
            measured(HZ, 5_000),
            Some(HZ * 1000 / 1002),
        );
        assert!(!off.passed, "{off:?}");
    }

    /// A TSC trusted on its own evidence fails over where the cross-CPU
    /// check did not pass, even where it found no pair apart (it could
    /// not run); one the kernel trusts only where a pair was apart.
    #[test]
    fn own_evidence_needs_the_cross_cpu_check_to_pass() {
        let not_run = Verdict {
            check: CROSS_CPU_CHECK,
            passed: false,
            detail: "not run: the process may run on one CPU only".to_string(),
        };
        let passed = Verdict {
            passed: true,
            detail: "1 CPU pairs agree".to_string(),
            ..not_run.clone()
        };
        assert!(cross_cpu_failover(&not_run, None, false).is_none());
        let why = cross_cpu_failover(&not_run, None, true).expect("a failover");
        assert!(
            why.contains("own evidence") && why.contains("one CPU"),
            "{why}"
        );
        assert!(cross_cpu_failover(&passed, None, true).is_none());
        let apart = Some("the check found CPUs apart".to_string());
        assert_eq!(cross_cpu_failover(&passed, apart.clone(), false), apart);
        assert_eq!(cross_cpu_failover(&passed, apart.clone(), true), apart);
    }
}
