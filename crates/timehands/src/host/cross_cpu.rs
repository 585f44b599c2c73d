//! The cross-CPU check of the TSC, run when a program asks for it.
//!
//! The check measures each CPU's TSC against the first CPU's, as Linux does
//! at boot, on threads pinned to each CPU the process may run on: threads
//! and CPUs a read must not take (a read may be a signal handler's, or a
//! real-time thread's whose CPUs the program planned), so no read runs it.
//! Where the kernel keeps time with the TSC (clocksource `tsc`), the kernel
//! checked it at boot, and its watchdog and ours go on checking: the TSC
//! is read without this. Where the kernel runs a hypervisor's paravirtual
//! clocksource (`kvm-clock`, `xen`, Hyper-V's page), the TSC's own evidence
//! must include this check: until a program runs it, the clock reads the
//! kernel's clock there, and once it passed, the next windup chooses the
//! TSC. A check that finds two CPUs apart retires a TSC in use for the
//! kernel's clock.

#[cfg(target_arch = "x86_64")]
use std::time::Duration;

use super::choice::Verdict;
use super::process::clock;

/// Checks the TSC of each CPU this process may run on against the first
/// CPU's (as Linux checks each CPU against the boot CPU), once, and returns
/// the verdict (the same one after the first call). It starts one thread
/// for some milliseconds a CPU, pinned in turn to each CPU of the process
/// (those of its main thread), at the caller's own scheduling policy; it
/// leaves the caller's own affinity alone.
///
/// Call it once at startup where the TSC should keep time on a guest whose
/// kernel reads a paravirtual clock (`kvm-clock`, `xen`, Hyper-V's page):
/// there it is the evidence the TSC still needs, and once it passed, the
/// clock moves to the TSC (`timehands report` calls it). Elsewhere it
/// checks what the kernel checked at boot, and retires a TSC found apart.
/// [`info`](crate::info()) lists the verdict with the others.
///
/// Not async-signal-safe (it starts a thread and waits for it), unlike the
/// reads.
///
/// ```
/// let verdict = timehands::check_across_cpus();
/// println!("{}: {}", verdict.check, verdict.detail);
/// ```
pub fn check_across_cpus() -> Verdict {
    let clock = clock();
    if let Some(verdict) = clock.cross_cpu.get() {
        return verdict.clone();
    }
    let (verdict, apart) = measure();
    let verdict = {
        let _steering = clock.steering();
        clock.cross_cpu.get_or_init(|| verdict).clone()
    };
    #[cfg(target_arch = "x86_64")]
    {
        let own_evidence = clock.facts().own_evidence;
        if let Some(why) = super::choice::cross_cpu_failover(&verdict, apart, own_evidence) {
            // A failover waits for a windup that holds the writer lock (this
            // is no read: it may wait), a millisecond at a time.
            while !clock.fail_over(&mut clock.steering(), &why) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = apart;
    if verdict.passed {
        clock.choose_again_after_check();
    }
    verdict
}

/// The check itself, on a thread of its own (its affinity is the one it
/// changes): the verdict, and why to fail over if two CPUs are apart.
#[cfg(target_arch = "x86_64")]
fn measure() -> (Verdict, Option<String>) {
    let thread = std::thread::Builder::new()
        .name("timehands-check".to_string())
        .spawn(|| {
            super::choice::take_process_affinity();
            super::choice::cross_cpu_verdict(tsc_frequency())
        });
    let not_run = |why: String| {
        let verdict = Verdict {
            check: super::choice::CROSS_CPU_CHECK,
            passed: false,
            detail: format!("not run: {why}"),
        };
        (verdict, None)
    };
    match thread.map(std::thread::JoinHandle::join) {
        Ok(Ok(measured)) => measured,
        Ok(Err(_)) => not_run("the check's thread panicked".to_string()),
        Err(e) => not_run(format!("no thread for it ({e})")),
    }
}

/// The TSC's frequency: the clock's, where it runs on the TSC; else what
/// CPUID states, or a measurement of 10 ms against CLOCK_MONOTONIC.
#[cfg(target_arch = "x86_64")]
fn tsc_frequency() -> u64 {
    use crate::Counter;
    use crate::host::brackets::{pair, read_tsc};
    use crate::host::kernel_clocks::SystemClocks;
    let timekeeper = clock().timekeeper();
    if let super::counter::HostCounter::Tsc(tsc) = timekeeper.counter() {
        return tsc.frequency();
    }
    if let Some(stated) = crate::hw::TscFacts::read().stated_frequency() {
        return stated.hz;
    }
    let start = pair(&SystemClocks, read_tsc);
    std::thread::sleep(Duration::from_millis(10));
    start
        .frequency_to(&pair(&SystemClocks, read_tsc), Duration::ZERO)
        .map_or(0, |measured| measured.hz)
}

/// No TSC here: nothing to check.
#[cfg(not(target_arch = "x86_64"))]
fn measure() -> (Verdict, Option<String>) {
    let verdict = Verdict {
        check: super::choice::CROSS_CPU_CHECK,
        passed: true,
        detail: format!(
            "no TSC on {}: its counter needs no check",
            std::env::consts::ARCH
        ),
    };
    (verdict, None)
}
