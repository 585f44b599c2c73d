//! Choosing the counter: the checks, their verdicts, and the cross-CPU
//! check of the TSC.
//!
//! The TSC keeps time where CPUID says it is invariant and either the
//! kernel keeps time with it (clocksource `tsc`, or none shown) or, where
//! the kernel runs a hypervisor's paravirtual clocksource (`kvm-clock`,
//! `xen`, `hyperv_clocksource_tsc_page`), its own evidence holds: its rate
//! over the two halves of the first measurement against CLOCK_MONOTONIC
//! agrees (and with the frequency CPUID states, if it states one), checked
//! before it takes over; and the cross-CPU check passed, which a program
//! runs (`cross_cpu.rs`): until then the kernel's clock keeps time there.
//! A paravirtual clocksource guards against a migration to a host whose TSC
//! runs at another rate; here the watchdog does, at every steering. Any
//! other clocksource (`hpet`, `acpi_pm`) means the kernel found the TSC
//! wanting: the kernel's clock is read. The generic timer on aarch64 is
//! architected and synchronized, and no clocksource gates it; but an
//! emulator's that reads the wall clock (qemu-user's) is refused.

use super::counter::HostCounter;
use super::text::{Text, text};
#[cfg(target_arch = "x86_64")]
use crate::host::brackets::Measured;
use crate::host::brackets::Pair;
#[cfg(target_arch = "x86_64")]
use crate::host::kernel_clocks::SystemClocks;
use crate::hw::KernelCounter;
#[cfg(target_arch = "x86_64")]
use crate::os::KernelClock;
#[cfg(target_arch = "x86_64")]
use std::fmt::Write;

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

/// A [`Verdict`] as the clock keeps it: its detail in a [`Text`], written
/// without allocating by whichever read makes the choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KeptVerdict {
    pub(super) check: &'static str,
    pub(super) passed: bool,
    pub(super) detail: Text,
}

impl KeptVerdict {
    /// The verdict `info` reports.
    pub(super) fn verdict(&self) -> Verdict {
        Verdict {
            check: self.check,
            passed: self.passed,
            detail: self.detail.to_string(),
        }
    }
}

/// The most verdicts a choice keeps: it makes at most five.
const VERDICTS: usize = 6;

/// The verdicts of a choice, kept inline.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KeptVerdicts {
    kept: [Option<KeptVerdict>; VERDICTS],
}

impl KeptVerdicts {
    /// Keeps `verdict` (past [`VERDICTS`], which no choice reaches, the
    /// last is replaced).
    pub(super) fn push(&mut self, verdict: KeptVerdict) {
        let at = self
            .kept
            .iter()
            .position(Option::is_none)
            .unwrap_or(VERDICTS - 1);
        self.kept[at] = Some(verdict);
    }

    /// The verdicts in the order they were kept.
    pub(super) fn iter(&self) -> impl Iterator<Item = &KeptVerdict> {
        self.kept.iter().flatten()
    }
}

/// The counter chosen at startup, with its frequency and the reasons.
#[derive(Clone)]
pub(super) struct Choice {
    pub(super) counter: HostCounter,
    pub(super) frequency_source: Text,
    pub(super) verdicts: KeptVerdicts,
    pub(super) fallback: Option<Text>,
    /// A pair of the counter and CLOCK_MONOTONIC from the start of startup,
    /// where one was taken: the steering's first baseline.
    pub(super) anchor: Option<Pair>,
    /// How sure the frequency is, where it was measured (or is exact).
    pub(super) uncertainty_ppb: Option<u64>,
    /// Where the TSC is trusted on its own evidence (the kernel runs a
    /// paravirtual clocksource), what it must still show.
    pub(super) own_evidence: Option<OwnEvidence>,
}

/// What `TIMEHANDS_COUNTER` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Forced {
    /// Nothing: the checks decide.
    No,
    /// `tsc`: the hardware counter, whatever the checks say.
    Hardware,
    /// `kernel`: the kernel's clock.
    Kernel,
}

/// What `TIMEHANDS_COUNTER` asks for, with a verdict for a value that is
/// not a counter (ignored: a library cannot refuse to tell the time).
fn forced(verdicts: &mut KeptVerdicts) -> Forced {
    let mut buf = [0; 32];
    match crate::os::env_var(c"TIMEHANDS_COUNTER", &mut buf) {
        None => Forced::No,
        Some(b"tsc") => Forced::Hardware,
        Some(b"kernel") => Forced::Kernel,
        Some(other) => {
            verdicts.push(KeptVerdict {
                check: "TIMEHANDS_COUNTER",
                passed: false,
                detail: text!(
                    "{:?} is not \"tsc\" or \"kernel\": ignored, the counter chosen automatically",
                    std::str::from_utf8(other).unwrap_or("(not UTF-8)")
                ),
            });
            Forced::No
        }
    }
}

/// Picks the counter (see the module docs), allocating nothing: whichever
/// read finds the choice due makes it, a signal handler's maybe. A TSC
/// still has its frequency measured before it takes over (see
/// [`Settling`]).
pub(super) fn choose() -> Choice {
    let mut verdicts = KeptVerdicts::default();
    let forced = forced(&mut verdicts);
    if forced == Forced::Kernel {
        return kernel_choice("TIMEHANDS_COUNTER=kernel".into(), verdicts);
    }
    hardware(forced == Forced::Hardware, verdicts)
}

/// The kernel's clock, chosen because of `reason`.
pub(super) fn kernel_choice(reason: Text, verdicts: KeptVerdicts) -> Choice {
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

/// The TSC, if it may keep time (or `forced`); else the kernel's clock,
/// with the reason.
#[cfg(target_arch = "x86_64")]
pub(super) fn hardware(forced: bool, mut verdicts: KeptVerdicts) -> Choice {
    // The TSC against the kernel from here on: the frequency measurement
    // (see `Settling`) and the steering's anchor.
    let anchor = crate::host::brackets::pair(&SystemClocks, crate::host::brackets::read_tsc);
    let facts = crate::hw::TscFacts::read();
    verdicts.push(KeptVerdict {
        check: "invariant TSC (CPUID 0x80000007)",
        passed: facts.invariant,
        detail: text!(
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
    // stands, and the watchdog has the last word.
    let mut name = [0; crate::hw::CLOCKSOURCE_NAME];
    let source = crate::hw::kernel_clocksource_in(&mut name);
    let trust = Trust::of(source);
    verdicts.push(KeptVerdict {
        check: "kernel clocksource",
        passed: trust != Trust::Distrusted,
        detail: match (source, trust) {
            (Some(source), Trust::OwnEvidence) => text!(
                "{source}: paravirtual, so the TSC's own evidence decides (CPUID, its rate against {} at startup, the {CROSS_CPU_CHECK})",
                KernelClock::Monotonic.name()
            ),
            (Some(source), _) => text!("{source}"),
            (None, _) => text!("not shown on {}: not needed", std::env::consts::OS),
        },
    });
    let trusted = facts.invariant && trust != Trust::Distrusted;
    if !(forced || trusted) {
        return kernel_choice(
            "the TSC is not trusted here (see the verdicts)".into(),
            verdicts,
        );
    }
    // Trusted on its own evidence only where nothing forced it.
    let own_evidence = !forced && trust == Trust::OwnEvidence;
    verdicts.push(KeptVerdict {
        check: TRUSTED_ON,
        passed: true,
        detail: if forced {
            "TIMEHANDS_COUNTER=tsc".into()
        } else if own_evidence {
            text!(
                "its own evidence: CPUID says invariant; its rate against {} (below) and the {CROSS_CPU_CHECK} must agree, else {} takes over",
                KernelClock::Monotonic.name(),
                KernelClock::Monotonic.name()
            )
        } else {
            "CPUID says invariant, and the kernel keeps time with it (or does not say)".into()
        },
    });
    let stated = facts
        .stated_frequency()
        .filter(|stated| !stated.is_nominal());
    // The frequency the TSC takes over with is measured (see `Settling`);
    // what CPUID states is the one its rate must agree with.
    let (hz, frequency_source) = match stated {
        Some(stated) => (stated.hz, text!("CPUID {:?}", stated.source)),
        None => (
            facts
                .stated_frequency()
                .map_or(1_000_000_000, |nominal| nominal.hz),
            text!("measured against {}", KernelClock::Monotonic.name()),
        ),
    };
    if forced {
        verdicts.push(KeptVerdict {
            check: "TIMEHANDS_COUNTER",
            passed: true,
            detail: "tsc: forced".into(),
        });
    }
    Choice {
        counter: HostCounter::Tsc(crate::hw::Tsc::new(hz)),
        frequency_source,
        verdicts,
        fallback: None,
        anchor: Some(anchor),
        uncertainty_ppb: None,
        own_evidence: own_evidence.then_some(OwnEvidence {
            stated_hz: stated.map(|stated| stated.hz),
        }),
    }
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
/// over ([`Settling`]), and after it ([`cross_cpu_failover`]).
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
pub(super) fn rate_verdict(
    first: Measured,
    second: Measured,
    stated_hz: Option<u64>,
) -> KeptVerdict {
    let ppm = |a: u64, b: u64| (a as f64 / b as f64 - 1.0) * 1e6;
    let bound = super::watchdog::RATE_BOUND_PPM;
    let halves = ppm(second.hz, first.hz);
    let halves_slack = (first.uncertainty_ppb + second.uncertainty_ppb) as f64 / 1e3;
    let mut passed = halves.abs() <= bound + halves_slack;
    let mut detail = text!(
        "{} Hz then {} Hz over two halves of {SETTLE:?}: {halves:+.1} ppm apart (bound ±{:.0} ppm)",
        first.hz,
        second.hz,
        bound + halves_slack
    );
    if let Some(stated) = stated_hz {
        let off = ppm(second.hz, stated);
        let slack = second.uncertainty_ppb as f64 / 1e3;
        passed &= off.abs() <= bound + slack;
        let _ = write!(
            detail,
            "; {off:+.1} ppm off the {stated} Hz CPUID states (bound ±{:.0} ppm)",
            bound + slack
        );
    }
    KeptVerdict {
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

/// No hardware counter is supported on this architecture: the kernel's
/// clock.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn hardware(_forced: bool, verdicts: KeptVerdicts) -> Choice {
    kernel_choice(
        "no hardware counter is supported on this architecture".into(),
        verdicts,
    )
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

/// A choice on its way to take over: a TSC measured against CLOCK_MONOTONIC
/// from its anchor over [`SETTLE`], a step at each windup that finds the
/// choice due (a read's, wherever it runs: nothing here waits or
/// allocates); any other choice settled at once.
pub(super) struct Settling {
    choice: Choice,
    /// Whether the choice is measured already, and only waits for a
    /// hand-over that found the writer lock held.
    settled: bool,
    /// Where a TSC trusted on its own evidence was measured halfway, once it
    /// was: its rate over the two halves must agree (see [`rate_verdict`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    mid: Option<Pair>,
}

/// Where a step of [`Settling`] leaves the choice.
pub(super) enum Settled {
    /// Still measuring (only a TSC is measured, hence the allowance).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Not(Settling),
    /// Ready to take over.
    Done(Choice),
}

impl Settling {
    /// `choice`, to be measured where it needs to be.
    pub(super) fn new(choice: Choice) -> Settling {
        Settling {
            choice,
            settled: false,
            mid: None,
        }
    }

    /// `choice`, measured already.
    pub(super) fn done(choice: Choice) -> Settling {
        Settling {
            settled: true,
            ..Settling::new(choice)
        }
    }

    /// One step: the TSC measured halfway, or its frequency settled (known
    /// to [`SETTLED_PPB`], or measured over ten times [`SETTLE`], on a
    /// machine that preempts the brackets wide), or not yet. A TSC trusted
    /// on its own evidence whose two halves disagree gives way to the
    /// kernel's clock.
    pub(super) fn step(self) -> Settled {
        if self.settled {
            return Settled::Done(self.choice);
        }
        #[cfg(target_arch = "x86_64")]
        if let (HostCounter::Tsc(_), Some(anchor)) = (&self.choice.counter, self.choice.anchor) {
            return self.step_tsc(anchor);
        }
        Settled::Done(self.choice)
    }

    #[cfg(target_arch = "x86_64")]
    fn step_tsc(mut self, anchor: Pair) -> Settled {
        use crate::host::brackets::{pair, read_tsc};
        use crate::host::kernel_clocks::KernelClocks;
        let since = |kernel: u64| kernel.saturating_sub(anchor.kernel);
        let half = SETTLE.as_nanos() as u64 / 2;
        // Nothing to measure yet: one read of the kernel's clock says so.
        let earliest = match (self.choice.own_evidence, self.mid) {
            (Some(_), None) => half,
            (Some(_), Some(mid)) => (mid.kernel - anchor.kernel + half).max(2 * half),
            (None, _) => 2 * half,
        };
        if since(SystemClocks.nanos(KernelClock::Monotonic)) < earliest {
            return Settled::Not(self);
        }
        let now = pair(&SystemClocks, read_tsc);
        if self.choice.own_evidence.is_some() && self.mid.is_none() {
            self.mid = Some(now);
            return Settled::Not(self);
        }
        let longest = 10 * SETTLE.as_nanos() as u64;
        let Some(measured) = anchor.frequency_to(&now, SETTLE).filter(|measured| {
            measured.uncertainty_ppb <= SETTLED_PPB || since(now.kernel) >= longest
        }) else {
            return Settled::Not(self);
        };
        let mut choice = self.choice;
        if let (Some(evidence), Some(mid)) = (choice.own_evidence, self.mid) {
            let halves = anchor
                .frequency_to(&mid, std::time::Duration::ZERO)
                .zip(mid.frequency_to(&now, std::time::Duration::ZERO));
            let verdict = match halves {
                Some((first, second)) => rate_verdict(first, second, evidence.stated_hz),
                None => KeptVerdict {
                    check: RATE_CHECK,
                    passed: false,
                    detail: text!("{} did not advance", KernelClock::Monotonic.name()),
                },
            };
            choice.verdicts.push(verdict);
            if !verdict.passed {
                return Settled::Done(kernel_choice(
                    text!("the TSC's own evidence failed: the {RATE_CHECK} (see the verdicts)"),
                    choice.verdicts,
                ));
            }
        }
        let HostCounter::Tsc(tsc) = &choice.counter else {
            unreachable!("a TSC is settled")
        };
        Settled::Done(Choice {
            counter: HostCounter::Tsc(tsc.at_frequency(measured.hz)),
            frequency_source: text!(
                "measured against {} over {SETTLE:?} (startup: {})",
                KernelClock::Monotonic.name(),
                choice.frequency_source
            ),
            uncertainty_ppb: Some(measured.uncertainty_ppb),
            ..choice
        })
    }
}

/// Where the frequency of the kernel's clock comes from, as `info` says.
pub(super) fn kernel_frequency_source() -> Text {
    "the OS's Monotonic counts nanoseconds".into()
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

/// Gives the calling thread (the check's own) the affinity of the process's
/// main thread: a check on it then covers the CPUs the process was given
/// (`taskset`, a cpuset), not only those of the thread that asked for it.
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
