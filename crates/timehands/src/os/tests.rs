//! The OS boundary on the OS it runs on: each check holds on every OS, or
//! the error names the OS.

use std::io;

use super::*;

/// Every clock reads, and between two reads of it.
#[test]
#[cfg_attr(miri, ignore = "reads the OS's clocks")]
fn every_clock_reads_between_two_reads_of_it() {
    for clock in [
        KernelClock::Monotonic,
        KernelClock::MonotonicRaw,
        KernelClock::Boottime,
        KernelClock::Realtime,
    ] {
        let first = kernel_nanos(clock).expect("the OS's clock");
        let second = kernel_nanos(clock).expect("the OS's clock");
        assert!(second >= first, "{}: {first} then {second}", clock.name());
    }
    // 2023 or later: Realtime counts from the Unix epoch.
    assert!(kernel_nanos(KernelClock::Realtime).expect("Realtime") > 1_700_000_000_000_000_000);
}

/// Monotonic is the clock std's `Instant` reads: an interval std measures
/// is within the interval Monotonic measures around it.
#[test]
#[cfg_attr(miri, ignore = "reads the OS's clocks")]
fn monotonic_is_the_clock_of_std_instant() {
    let outer_start = kernel_nanos(KernelClock::Monotonic).expect("Monotonic");
    let start = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let inner = start.elapsed();
    let outer = kernel_nanos(KernelClock::Monotonic).expect("Monotonic") - outer_start;
    assert!(inner.as_nanos() as u64 <= outer, "{inner:?} in {outer} ns");
}

#[cfg(unix)]
#[test]
#[cfg_attr(miri, ignore = "calls clock_gettime")]
fn a_posix_clock_reads_and_a_wrong_id_is_refused() {
    use super::posix::{clock_nanos, clock_timespec, timespec_nanos};
    let before = clock_nanos(libc::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    let ts = clock_timespec(libc::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    let after = clock_nanos(libc::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    assert!((before..=after).contains(&timespec_nanos(&ts)));
    let refused = clock_nanos(libc::clockid_t::MAX).expect_err("no clock has that id");
    assert_eq!(refused.raw_os_error(), Some(libc::EINVAL));
}

#[cfg(unix)]
#[test]
#[allow(deprecated)] // musl's `time_t`: the libc crate will make it 64 bits.
fn timespecs_beyond_a_u64_saturate() {
    use super::posix::timespec_nanos;
    let ts = |tv_sec, tv_nsec| libc::timespec { tv_sec, tv_nsec };
    assert_eq!(timespec_nanos(&ts(5, 7)), 5_000_000_007);
    assert_eq!(timespec_nanos(&ts(-1, 0)), 0);
    assert_eq!(timespec_nanos(&ts(libc::time_t::MAX, 0)), u64::MAX);
}

/// Where the OS pins threads: pinning to an allowed CPU runs there, a CPU no
/// machine has is named in the error, and the affinity is put back. Where
/// it does not: every call says so, naming the OS.
#[test]
#[cfg_attr(miri, ignore = "calls sched_setaffinity")]
fn pinning_runs_on_the_cpu_or_names_what_is_missing() {
    std::thread::spawn(|| {
        let allowed = match allowed_cpus() {
            Ok(allowed) => allowed,
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
                assert!(e.to_string().contains(std::env::consts::OS), "{e}");
                let refused = pin_to_cpus(&[0]).expect_err("no affinity here");
                assert_eq!(refused.kind(), io::ErrorKind::Unsupported, "{refused}");
                return;
            }
        };
        assert!(!allowed.is_empty());
        let last = *allowed.last().expect("a CPU");
        pin_to_cpus(&[last]).expect("an allowed CPU");
        if let Some(cpu) = current_cpu() {
            assert_eq!(cpu, last);
        }
        let error = pin_to_cpus(&[100_000]).expect_err("no machine has CPU 100000");
        assert!(error.to_string().contains("CPU"), "{error}");
        let error = pin_to_cpus(&[]).expect_err("an empty set");
        assert!(error.to_string().contains("no CPU"), "{error}");
        pin_to_cpus(&allowed).expect("the thread's own CPUs");
        assert_eq!(allowed_cpus().expect("the affinity"), allowed);
        assert!(
            process_cpus()
                .expect("the process's affinity")
                .contains(&last)
        );
    })
    .join()
    .expect("the pinned thread's checks held");
}

/// A priority no OS has is refused with a message naming it, or the OS.
#[test]
#[cfg_attr(miri, ignore = "calls sched_get_priority_max")]
fn a_priority_out_of_range_is_named() {
    let error = set_scheduling(Policy::Fifo, 1_000).expect_err("no SCHED_FIFO priority 1000");
    match error.kind() {
        io::ErrorKind::InvalidInput => assert!(
            error.to_string().contains("SCHED_FIFO priority 1000"),
            "{error}"
        ),
        io::ErrorKind::Unsupported => {
            assert!(error.to_string().contains(std::env::consts::OS), "{error}")
        }
        _ => panic!("{error}"),
    }
}

/// The NTP state reads (no privilege needed) where the OS keeps one, with
/// the kernel's bounds (at most 16 s: NTP's MAXPHASE-based cap); elsewhere
/// the error names the OS.
#[test]
#[cfg_attr(miri, ignore = "calls adjtimex")]
fn the_kernel_ntp_state_reads_or_names_the_os() {
    match ntp() {
        Ok(ntp) => {
            assert!(ntp.maxerror_us <= 16_000_000, "{ntp:?}");
            assert!(ntp.esterror_us <= 16_000_000, "{ntp:?}");
        }
        Err(e) => {
            assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
            assert!(e.to_string().contains(std::env::consts::OS), "{e}");
        }
    }
}
