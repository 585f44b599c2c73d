//! The host's counters on the machine the tests run on: what CPUID says against
//! what Linux says, fenced reads that never go backwards on one thread or across
//! two, and timekeepers that agree with `std::time::Instant`.
//!
//! Hardware instructions and clock_gettime do not run under miri, hence the cfg.
#![cfg(all(target_os = "linux", not(miri)))]

use std::time::{Duration, Instant};

use timehands::Counter;
use timehands::diagnostics::hw::{KernelCounter, available_clocksources, kernel_clocksource};

/// How far a clock may stray from `Instant` over a short sleep: loose, because
/// the two are read a few instructions (or a preemption) apart.
/// How far two clocks may disagree over a short sleep: loose, so that a
/// preemption between paired reads on a loaded machine does not fail a test.
const AGREEMENT: Duration = Duration::from_millis(50);

#[test]
fn kernel_monotonic_tracks_instant() {
    let counter = KernelCounter::monotonic();
    assert_eq!(counter.frequency(), 1_000_000_000);
    assert_eq!(counter.name(), "CLOCK_MONOTONIC");
    let (start, instant) = (counter.read(), Instant::now());
    std::thread::sleep(Duration::from_millis(20));
    let (end, elapsed) = (counter.read(), instant.elapsed());
    let counted = Duration::from_nanos(end - start);
    assert!(
        counted.abs_diff(elapsed) < AGREEMENT,
        "CLOCK_MONOTONIC counted {counted:?}, Instant {elapsed:?}"
    );
}

#[test]
fn kernel_monotonic_raw_moves_forward() {
    let counter = KernelCounter::monotonic_raw();
    assert_eq!(counter.name(), "CLOCK_MONOTONIC_RAW");
    let start = counter.read();
    std::thread::sleep(Duration::from_millis(2));
    assert!(counter.read() >= start + 2_000_000);
}

#[test]
fn kernel_clocksource_is_one_of_the_available() {
    let Some(current) = kernel_clocksource() else {
        println!("skipped: sysfs shows no current_clocksource here");
        return;
    };
    let available = available_clocksources();
    assert!(
        available.contains(&current),
        "current clocksource {current:?} is not among {available:?}"
    );
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, OnceLock};
    use std::time::{Duration, Instant};

    use timehands::diagnostics::hw::{
        CrystalRatio, FrequencySource, KernelCounter, OrderedRead, StatedFrequency, Tsc, TscFacts,
    };
    use timehands::{Counter, Timekeeper};

    use super::AGREEMENT;

    /// The TSC's frequency measured over `window` against CLOCK_MONOTONIC_RAW.
    fn measured_frequency(window: Duration) -> u64 {
        let kernel = KernelCounter::monotonic_raw();
        let tsc =
            Tsc::with_read(0, OrderedRead::LfenceRdtsc).expect("lfence; rdtsc is always there");
        let (tsc_start, ns_start) = (tsc.read(), kernel.read());
        std::thread::sleep(window);
        let (tsc_end, ns_end) = (tsc.read(), kernel.read());
        ((tsc_end - tsc_start) as u128 * 1_000_000_000 / (ns_end - ns_start) as u128) as u64
    }

    /// The frequency CPUID states, or a measured one where it states none;
    /// found once.
    fn frequency() -> u64 {
        static FREQUENCY: OnceLock<u64> = OnceLock::new();
        *FREQUENCY.get_or_init(|| {
            TscFacts::read()
                .stated_frequency()
                .map_or_else(|| measured_frequency(Duration::from_millis(50)), |f| f.hz)
        })
    }

    /// Every `Tsc` the machine supports, one per fenced read.
    fn tscs() -> Vec<Tsc> {
        [OrderedRead::Rdtscp, OrderedRead::LfenceRdtsc]
            .into_iter()
            .filter_map(|read| {
                let tsc = Tsc::with_read(frequency(), read);
                if tsc.is_none() {
                    println!("skipped {read:?}: CPUID 0x8000_0001 EDX bit 27 (rdtscp) is clear");
                }
                tsc
            })
            .collect()
    }

    fn cpuinfo_has_flag(flag: &str) -> bool {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo is readable");
        let flags: Vec<&str> = cpuinfo
            .lines()
            .filter(|line| line.starts_with("flags"))
            .collect();
        assert!(!flags.is_empty(), "/proc/cpuinfo lists no flags");
        flags
            .iter()
            .all(|line| line.split_whitespace().any(|word| word == flag))
    }

    #[test]
    fn invariant_agrees_with_the_kernel_flags() {
        let facts = TscFacts::read();
        println!("{facts:#?}\nstated: {:?}", facts.stated_frequency());
        assert_eq!(
            facts.invariant,
            cpuinfo_has_flag("constant_tsc") && cpuinfo_has_flag("nonstop_tsc"),
        );
        assert_eq!(facts.rdtscp, cpuinfo_has_flag("rdtscp"));
        assert_eq!(facts.hypervisor, cpuinfo_has_flag("hypervisor"));
    }

    #[test]
    fn stated_frequency_agrees_with_a_measured_one() {
        let Some(stated) = TscFacts::read().stated_frequency() else {
            println!("skipped: CPUID states no TSC frequency here");
            return;
        };
        let measured = measured_frequency(Duration::from_millis(50));
        let error = stated.hz.abs_diff(measured) as f64 / measured as f64;
        println!(
            "stated {stated:?}, measured {measured} Hz: {:.4}% apart",
            error * 100.0
        );
        assert!(error < 0.02, "stated {stated:?}, measured {measured} Hz");
    }

    #[test]
    fn stated_frequency_prefers_crystal_then_hypervisor_then_base() {
        let all = TscFacts {
            crystal_ratio: Some(CrystalRatio {
                denominator: 2,
                numerator: 176,
                crystal_hz: 25_000_000,
            }),
            hypervisor_tsc_khz: Some(2_100_000),
            base_mhz: Some(2_000),
            ..TscFacts::default()
        };
        let crystal = StatedFrequency {
            hz: 2_200_000_000,
            source: FrequencySource::CrystalRatio,
        };
        assert_eq!(all.stated_frequency(), Some(crystal));
        assert!(!crystal.is_nominal());

        // A leaf 0x15 without the crystal frequency states nothing.
        let no_crystal = TscFacts {
            crystal_ratio: Some(CrystalRatio {
                crystal_hz: 0,
                ..all.crystal_ratio.unwrap()
            }),
            ..all
        };
        assert_eq!(
            no_crystal.stated_frequency(),
            Some(StatedFrequency {
                hz: 2_100_000_000,
                source: FrequencySource::Hypervisor,
            })
        );

        let base_only = TscFacts {
            hypervisor_tsc_khz: None,
            ..no_crystal
        };
        let base = base_only.stated_frequency().unwrap();
        assert_eq!(base.hz, 2_000_000_000);
        assert!(base.is_nominal());

        assert_eq!(TscFacts::default().stated_frequency(), None);
    }

    #[test]
    fn new_chooses_an_available_read_and_reports_its_cost() {
        let hz = frequency();
        let started = Instant::now();
        let tsc = Tsc::new(hz);
        let took = started.elapsed();
        let cost = tsc.read_cost().expect("Tsc::new measures");
        println!(
            "Tsc::new took {took:?}: {cost:?} TSC counts per read, chose {:?}",
            tsc.ordered_read()
        );
        match cost.rdtscp {
            None => assert_eq!(tsc.ordered_read(), OrderedRead::LfenceRdtsc),
            Some(rdtscp) => assert_eq!(
                tsc.ordered_read(),
                if rdtscp <= cost.lfence_rdtsc {
                    OrderedRead::Rdtscp
                } else {
                    OrderedRead::LfenceRdtsc
                }
            ),
        }
        assert_eq!(tsc.name(), "TSC");
        assert_eq!(tsc.mask(), u64::MAX);
        assert_eq!(tsc.frequency(), hz);
    }

    #[test]
    fn ordered_reads_never_decrease_on_one_thread() {
        for tsc in tscs() {
            let mut last = tsc.read();
            for _ in 0..1_000_000 {
                let now = tsc.read();
                assert!(now >= last, "{:?}: {now} after {last}", tsc.ordered_read());
                last = now;
            }
        }
    }

    #[test]
    fn a_value_handed_to_another_thread_is_never_ahead_of_its_read() {
        const HANDOFFS: u32 = 200_000;
        for tsc in tscs() {
            let shared = Arc::new(AtomicU64::new(0));
            let done = Arc::new(AtomicBool::new(false));
            let writer = std::thread::spawn({
                let (shared, done) = (shared.clone(), done.clone());
                move || {
                    while !done.load(Ordering::Relaxed) {
                        shared.store(tsc.read(), Ordering::Release);
                    }
                }
            });
            let (mut last, mut handoffs, mut backward) = (0, 0, 0);
            while handoffs < HANDOFFS {
                let handed = shared.load(Ordering::Acquire);
                let now = tsc.read();
                if handed != last {
                    handoffs += 1;
                    backward += u32::from(now < handed);
                    last = handed;
                } else {
                    std::hint::spin_loop();
                }
            }
            done.store(true, Ordering::Relaxed);
            writer.join().expect("the writer thread does not panic");
            assert_eq!(
                backward,
                0,
                "{:?}: {backward} of {HANDOFFS} reads were behind the value handed over",
                tsc.ordered_read()
            );
        }
    }

    #[test]
    fn a_timekeeper_on_the_tsc_agrees_with_instant() {
        let tk = Timekeeper::new(Tsc::new(frequency())).expect("the TSC is a valid counter");
        let (start, instant) = (tk.uptime(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (end, elapsed) = (tk.uptime(), instant.elapsed());
        let counted = Duration::try_from(end - start).expect("uptime does not go backwards");
        // The frequency may be CPUID's nominal one, a fraction of a percent
        // off: allow 2% of the interval on top.
        assert!(
            counted.abs_diff(elapsed) < AGREEMENT + elapsed / 50,
            "the timekeeper counted {counted:?}, Instant {elapsed:?}"
        );
    }

    #[test]
    fn read_unordered_moves_forward() {
        let tsc = Tsc::with_read(frequency(), OrderedRead::LfenceRdtsc).unwrap();
        let start = tsc.read_unordered();
        std::thread::sleep(Duration::from_millis(1));
        assert!(tsc.read_unordered() > start);
    }
}
