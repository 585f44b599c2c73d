//! The cross-CPU TSC check on the machine the tests run on: the bounds it
//! gives, and its errors for CPUs and counts it cannot use.
//!
//! Pinning, CPUID and rdtsc do not run under miri, hence the cfg.
#![cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]

use std::time::Duration;

use timehands::Counter;
use timehands::diagnostics::hw::{KernelCounter, OrderedRead, Tsc, TscFacts};
use timehands::diagnostics::tsc_sync::{
    SyncError, measure_against_first, measure_all, measure_pair,
};

const HANDOFFS: u64 = 20_000;

/// The frequency CPUID states, or one measured against CLOCK_MONOTONIC_RAW
/// where it states none.
fn frequency() -> u64 {
    TscFacts::read().stated_frequency().map_or_else(
        || {
            let kernel = KernelCounter::monotonic_raw();
            let tsc =
                Tsc::with_read(0, OrderedRead::LfenceRdtsc).expect("lfence; rdtsc is always there");
            let (tsc_start, ns_start) = (tsc.read(), kernel.read());
            std::thread::sleep(Duration::from_millis(50));
            let (tsc_end, ns_end) = (tsc.read(), kernel.read());
            ((tsc_end - tsc_start) as u128 * 1_000_000_000 / (ns_end - ns_start) as u128) as u64
        },
        |stated| stated.hz,
    )
}

/// The CPUs this thread may run on, as the kernel lists them in
/// `/proc/thread-self/status` (`Cpus_allowed_list: 0-3,8`).
fn allowed_cpus() -> Vec<usize> {
    let status =
        std::fs::read_to_string("/proc/thread-self/status").expect("the status file is readable");
    let list = status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .expect("the status file lists the allowed CPUs");
    list.trim()
        .split(',')
        .flat_map(|range| {
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            let number = |text: &str| text.parse::<usize>().expect("a CPU number");
            number(first)..=number(last)
        })
        .collect()
}

#[test]
fn every_cpu_is_measured_against_the_first() {
    let report =
        measure_against_first(HANDOFFS, frequency()).expect("every allowed CPU can be pinned");
    let cpus = allowed_cpus();
    let expected: Vec<(usize, usize)> = cpus.iter().skip(1).map(|&b| (cpus[0], b)).collect();
    let measured: Vec<(usize, usize)> = report.pairs.iter().map(|pair| pair.cpus).collect();
    assert_eq!(measured, expected);
    assert!(report.pairs.iter().all(|pair| pair.lo <= pair.hi));
}

#[test]
fn every_pair_gets_consistent_bounds() {
    let hz = frequency();
    let report = measure_all(HANDOFFS, hz).expect("every allowed CPU can be pinned");
    let cpus = allowed_cpus();
    let expected: Vec<(usize, usize)> = cpus
        .iter()
        .enumerate()
        .flat_map(|(i, &a)| cpus[i + 1..].iter().map(move |&b| (a, b)))
        .collect();
    let measured: Vec<(usize, usize)> = report.pairs.iter().map(|pair| pair.cpus).collect();
    assert_eq!(measured, expected);
    for pair in &report.pairs {
        println!(
            "CPUs {:?}: offset in [{}, {}] counts ([{:.1}, {:.1}] ns), round trip {} counts ({:.1} ns), {} of {} hand-offs backward, synchronized: {}",
            pair.cpus,
            pair.lo,
            pair.hi,
            pair.lo_ns,
            pair.hi_ns,
            pair.min_round_trip,
            pair.min_round_trip_ns,
            pair.backward,
            pair.handoffs,
            pair.synchronized()
        );
        assert!(pair.lo <= pair.hi, "{pair:?}");
        assert!(pair.min_round_trip > 0, "{pair:?}");
        assert_eq!(pair.handoffs, HANDOFFS);
        assert!(pair.lo_ns <= pair.hi_ns && pair.min_round_trip_ns > 0.0);
    }
    assert_eq!(
        report.synchronized(),
        report.pairs.iter().all(|pair| pair.synchronized())
    );
}

#[test]
fn a_cpu_that_does_not_exist_is_named_in_the_error() {
    // A CPU this process may run on, paired with one no machine has.
    let error = measure_pair(allowed_cpus()[0], 4096, HANDOFFS, frequency()).unwrap_err();
    assert!(
        matches!(error, SyncError::Pin { cpu: 4096, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    println!("{message}");
    assert!(message.contains("CPU 4096"), "{message}");
    assert!(!message.contains('\n'), "{message}");
}

#[test]
fn fewer_than_two_handoffs_is_an_error() {
    for handoffs in [0, 1] {
        let error = measure_pair(0, 1, handoffs, 1_000_000_000).unwrap_err();
        assert!(matches!(error, SyncError::Handoffs { .. }), "{error:?}");
        assert!(error.to_string().contains("at least 2"), "{error}");
        assert!(matches!(
            measure_all(handoffs, 1_000_000_000),
            Err(SyncError::Handoffs { .. })
        ));
    }
}

#[test]
fn a_pair_of_one_cpu_or_no_frequency_is_an_error() {
    let error = measure_pair(0, 0, HANDOFFS, 1_000_000_000).unwrap_err();
    assert!(matches!(error, SyncError::SameCpu { cpu: 0 }), "{error:?}");
    assert!(matches!(
        measure_pair(0, 1, HANDOFFS, 0),
        Err(SyncError::Frequency)
    ));
}

#[test]
fn the_callers_thread_keeps_its_affinity() {
    let before = allowed_cpus();
    measure_pair(before[0], 4096, HANDOFFS, frequency()).unwrap_err();
    if let [a, b, ..] = before[..] {
        measure_pair(a, b, 100, frequency()).expect("two allowed CPUs can be pinned");
    }
    assert_eq!(allowed_cpus(), before);
}
