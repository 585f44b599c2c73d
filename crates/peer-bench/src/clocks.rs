//! The clocks under comparison: one table, read by every section.
//!
//! Each entry gives two views of one clock. `read` turns a reading into a `u64`
//! that never decreases on one CPU (nanoseconds, 2^-32 s, or counter cycles) and
//! `ns_per_unit` converts differences of it to nanoseconds: the ordering and
//! tracking sections need no more. `time_calls` runs the library's own call as a
//! user writes it (`Instant::now()`, not our conversion to a `u64`), in a loop
//! monomorphised per clock, so that the cost section measures the call and not an
//! indirect jump or our arithmetic.
//!
//! The kernel's clocks are the OS's ([`KernelClock`]), by the OS's names,
//! each once (macOS's MonotonicRaw is its Monotonic, Windows' three are one
//! counter); the coarse one is Linux's and FreeBSD's alone. Every peer builds
//! on every OS, but minstant and fastant read the TSC only on x86 Linux:
//! elsewhere (or where the TSC is not usable) their `now()` is std's
//! `Instant`, and their names end in `(std)`.

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use timehands::sys::KernelClock;

/// The name of `std::time::Instant::now`'s entry, the cost section's unit.
pub const STD_INSTANT: &str = "std Instant::now";
/// The bare counter read.
pub const RDTSC: &str = "rdtsc";
/// The counter read ordered after earlier loads.
pub const LFENCE_RDTSC: &str = "lfence; rdtsc";
/// The counter read that waits for earlier instructions.
pub const RDTSCP: &str = "rdtscp";
/// The kernel's coarse monotonic clock (Linux's and FreeBSD's only).
pub const MONOTONIC_COARSE: &str = "CLOCK_MONOTONIC_COARSE";
/// `quanta::Instant::now()`.
pub const QUANTA_NOW: &str = "quanta now";
/// `quanta::Instant::now()` of the drop-in (compat/quanta), on timehands.
pub const DROP_IN_NOW: &str = "quanta drop-in now";
/// `minstant::Instant::now()`.
pub const MINSTANT_NOW: &str = "minstant now";
/// `timehands::now()`.
pub const TIMEHANDS_NOW: &str = "timehands now()";
/// `timehands::now_unordered()`.
pub const TIMEHANDS_NOW_UNORDERED: &str = "timehands now_unordered()";
/// `timehands::now_coarse()`.
pub const TIMEHANDS_NOW_COARSE: &str = "timehands now_coarse()";
/// `timehands::gettime(ClockId::Realtime)`.
pub const TIMEHANDS_REALTIME: &str = "timehands gettime(Realtime)";

/// Where a clock's readings count from, which decides how it is tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Exact time units since CLOCK_MONOTONIC's origin: tracked, with the
    /// absolute offset reported.
    Monotonic,
    /// Exact time units since an origin of its own: tracked for rate only.
    Own,
    /// A raw counter whose rate we calibrated ourselves: tracking it would
    /// measure our calibration, so it is not tracked.
    Counter,
}

/// One clock under comparison.
pub struct Clock {
    /// The name in every table (and the key the targets look up).
    pub name: &'static str,
    /// A reading as a `u64` that never decreases on one CPU.
    pub read: fn() -> u64,
    /// Nanoseconds per unit of `read`.
    pub ns_per_unit: f64,
    /// Where `read` counts from.
    pub origin: Origin,
    /// Runs the library's own call `calls` times back to back and returns the
    /// nanoseconds that took.
    pub time_calls: fn(calls: u64) -> u64,
}

/// The entry of the kernel's clock `KernelClock::$clock`.
macro_rules! kernel_clock {
    ($clock:ident, $origin:expr) => {
        Clock {
            name: KernelClock::$clock.name(),
            read: || kernel_ns(KernelClock::$clock),
            ns_per_unit: 1.0,
            origin: $origin,
            time_calls: |calls| time_calls(calls, || kernel_ns(KernelClock::$clock)),
        }
    };
}

/// The table of clocks, in the order the sections print them.
pub fn clocks() -> Vec<Clock> {
    let mut table = vec![
        Clock {
            name: STD_INSTANT,
            read: std_instant,
            ns_per_unit: 1.0,
            origin: Origin::Own,
            time_calls: |calls| time_calls(calls, std::time::Instant::now),
        },
        Clock {
            name: "std SystemTime::now",
            read: system_time,
            ns_per_unit: 1.0,
            origin: Origin::Own,
            time_calls: |calls| time_calls(calls, SystemTime::now),
        },
    ];
    // Boottime counts from the same boot but runs on through suspend.
    for kernel in [
        kernel_clock!(Monotonic, Origin::Monotonic),
        kernel_clock!(Realtime, Origin::Own),
        kernel_clock!(MonotonicRaw, Origin::Own),
        kernel_clock!(Boottime, Origin::Own),
    ] {
        // A clock the OS reads as another is in the table once.
        if !table.iter().any(|clock| clock.name == kernel.name) {
            table.push(kernel);
        }
    }
    #[cfg(any(target_os = "linux", target_os = "freebsd"))]
    table.push(Clock {
        name: MONOTONIC_COARSE,
        read: monotonic_coarse_ns,
        ns_per_unit: 1.0,
        origin: Origin::Monotonic,
        time_calls: |calls| time_calls(calls, monotonic_coarse_ns),
    });
    #[cfg(target_arch = "x86_64")]
    table.extend(tsc::clocks());
    table.extend([
        Clock {
            name: TIMEHANDS_NOW,
            read: || timehands::now().as_nanos(),
            ns_per_unit: 1.0,
            origin: Origin::Monotonic,
            time_calls: |calls| time_calls(calls, timehands::now),
        },
        Clock {
            name: TIMEHANDS_NOW_UNORDERED,
            read: || timehands::now_unordered().as_nanos(),
            ns_per_unit: 1.0,
            origin: Origin::Monotonic,
            time_calls: |calls| time_calls(calls, timehands::now_unordered),
        },
        Clock {
            name: TIMEHANDS_NOW_COARSE,
            read: || timehands::now_coarse().as_nanos(),
            ns_per_unit: 1.0,
            origin: Origin::Monotonic,
            time_calls: |calls| time_calls(calls, timehands::now_coarse),
        },
        Clock {
            name: TIMEHANDS_REALTIME,
            read: || realtime_nanos(timehands::gettime(timehands::ClockId::Realtime)),
            ns_per_unit: 1.0,
            origin: Origin::Own,
            time_calls: |calls| {
                time_calls(calls, || timehands::gettime(timehands::ClockId::Realtime))
            },
        },
        Clock {
            name: QUANTA_NOW,
            read: || quanta_nanos(quanta::Instant::now()),
            ns_per_unit: 1.0,
            origin: Origin::Own,
            time_calls: |calls| time_calls(calls, quanta::Instant::now),
        },
        Clock {
            name: "quanta recent",
            read: || quanta_nanos(quanta::Instant::recent()),
            ns_per_unit: 1.0,
            origin: Origin::Own,
            time_calls: |calls| time_calls(calls, quanta::Instant::recent),
        },
        // The drop-in's instants are timehands' nanoseconds: on Monotonic.
        Clock {
            name: DROP_IN_NOW,
            read: || drop_in_nanos(quanta_drop_in::Instant::now()),
            ns_per_unit: 1.0,
            origin: Origin::Monotonic,
            time_calls: |calls| time_calls(calls, quanta_drop_in::Instant::now),
        },
        Clock {
            name: "quanta drop-in recent",
            read: || drop_in_nanos(quanta_drop_in::Instant::recent()),
            ns_per_unit: 1.0,
            origin: Origin::Monotonic,
            time_calls: |calls| time_calls(calls, quanta_drop_in::Instant::recent),
        },
        Clock {
            name: if minstant::is_tsc_available() {
                MINSTANT_NOW
            } else {
                "minstant now (std)"
            },
            read: || {
                let now = minstant::Instant::now();
                now.duration_since(minstant::Instant::ZERO).as_nanos() as u64
            },
            ns_per_unit: 1.0,
            origin: Origin::Own,
            time_calls: |calls| time_calls(calls, minstant::Instant::now),
        },
        Clock {
            name: if fastant::is_tsc_available() {
                "fastant now"
            } else {
                "fastant now (std)"
            },
            read: || {
                let now = fastant::Instant::now();
                now.duration_since(fastant::Instant::ZERO).as_nanos() as u64
            },
            ns_per_unit: 1.0,
            origin: Origin::Own,
            time_calls: |calls| time_calls(calls, fastant::Instant::now),
        },
        Clock {
            // In units of 2^-32 s: CLOCK_MONOTONIC_COARSE underneath on Linux
            // and FreeBSD, a clock of another origin elsewhere.
            name: "coarsetime now",
            read: || coarsetime::Instant::now().as_ticks(),
            ns_per_unit: 1e9 / (1u64 << 32) as f64,
            origin: if cfg!(any(target_os = "linux", target_os = "freebsd")) {
                Origin::Monotonic
            } else {
                Origin::Own
            },
            time_calls: |calls| time_calls(calls, coarsetime::Instant::now),
        },
    ]);
    // Libraries that calibrate lazily do it now, not inside a measurement.
    for clock in &table {
        black_box((clock.read)());
    }
    table
}

/// The kernel's monotonic clock in nanoseconds: the reference every section
/// measures with.
pub fn monotonic_ns() -> u64 {
    kernel_ns(KernelClock::Monotonic)
}

/// Times `calls` calls of `call`; generic so that the call is direct and inlined
/// as it would be in a user's code.
fn time_calls<T>(calls: u64, call: impl Fn() -> T) -> u64 {
    let start = monotonic_ns();
    for _ in 0..calls {
        black_box(call());
    }
    monotonic_ns() - start
}

/// The kernel's clock `clock` in nanoseconds.
fn kernel_ns(clock: KernelClock) -> u64 {
    // Each is a clock every OS timehands runs on has.
    timehands::sys::kernel_nanos(clock).unwrap_or_default()
}

/// CLOCK_MONOTONIC_COARSE in nanoseconds (FreeBSD's CLOCK_MONOTONIC_FAST).
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
fn monotonic_coarse_ns() -> u64 {
    // The id comes from libc: every Linux and FreeBSD has it.
    timehands::sys::clock_nanos(libc::CLOCK_MONOTONIC_COARSE).unwrap_or_default()
}

/// The name of the kernel's monotonic clock (on Linux CLOCK_MONOTONIC,
/// through the vDSO), the reference every section measures with.
pub fn monotonic_name() -> &'static str {
    KernelClock::Monotonic.name()
}

/// `std::time::Instant` hides its value: count from an instant taken once.
fn std_instant() -> u64 {
    static BASE: OnceLock<std::time::Instant> = OnceLock::new();
    let base = *BASE.get_or_init(std::time::Instant::now);
    std::time::Instant::now().duration_since(base).as_nanos() as u64
}

/// A realtime reading (a `Duration` since the epoch) in nanoseconds.
fn realtime_nanos(since_epoch: std::time::Duration) -> u64 {
    since_epoch.as_nanos() as u64
}

fn system_time() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH);
    since_epoch.map_or(0, realtime_nanos)
}

/// `quanta::Instant` hides its value too. `recent()` may lag the base by one
/// upkeep interval; the subtraction saturates at zero then.
fn quanta_nanos(instant: quanta::Instant) -> u64 {
    static BASE: OnceLock<quanta::Instant> = OnceLock::new();
    let base = *BASE.get_or_init(quanta::Instant::now);
    instant.duration_since(base).as_nanos() as u64
}

/// The drop-in's instant in nanoseconds: timehands' own.
fn drop_in_nanos(instant: quanta_drop_in::Instant) -> u64 {
    timehands::Instant::from(instant).as_nanos()
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    use core::arch::x86_64::{__cpuid, __rdtscp, _mm_lfence, _rdtsc};
    use std::thread;
    use std::time::Duration;

    use super::*;

    /// The three ways to read the TSC; `rdtscp` only where the CPU has it.
    pub(super) fn clocks() -> Vec<Clock> {
        let ns_per_cycle = ns_per_cycle();
        let mut table = vec![
            Clock {
                name: RDTSC,
                read: rdtsc,
                ns_per_unit: ns_per_cycle,
                origin: Origin::Counter,
                time_calls: |calls| time_calls(calls, rdtsc),
            },
            Clock {
                name: LFENCE_RDTSC,
                read: lfence_rdtsc,
                ns_per_unit: ns_per_cycle,
                origin: Origin::Counter,
                time_calls: |calls| time_calls(calls, lfence_rdtsc),
            },
        ];
        if has_rdtscp() {
            table.push(Clock {
                name: RDTSCP,
                read: rdtscp,
                ns_per_unit: ns_per_cycle,
                origin: Origin::Counter,
                time_calls: |calls| time_calls(calls, rdtscp),
            });
        }
        table
    }

    /// CPUID's extended leaf 0x8000_0001, EDX bit 27 (std's feature detection
    /// does not name rdtscp).
    fn has_rdtscp() -> bool {
        // SAFETY: every x86_64 CPU has cpuid; leaves past the highest one
        // reported are not asked. (`__cpuid` is safe on newer toolchains but
        // not at our rust-version.)
        #[allow(unused_unsafe)]
        unsafe {
            __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).edx & 1 << 27 != 0
        }
    }

    fn rdtsc() -> u64 {
        // SAFETY: every x86_64 CPU has rdtsc.
        unsafe { _rdtsc() }
    }

    fn lfence_rdtsc() -> u64 {
        // SAFETY: lfence is SSE2, part of x86_64; rdtsc as above.
        unsafe {
            _mm_lfence();
            _rdtsc()
        }
    }

    fn rdtscp() -> u64 {
        let mut aux = 0;
        // SAFETY: the entry exists only where the CPU reports rdtscp.
        unsafe { __rdtscp(&mut aux) }
    }

    /// The TSC's period against CLOCK_MONOTONIC over 50 ms, each end taken from
    /// the tightest of a few brackets so that a preemption does not skew it.
    fn ns_per_cycle() -> f64 {
        fn sample() -> (u64, u64) {
            let mut best = (u64::MAX, 0, 0);
            for _ in 0..5 {
                let before = monotonic_ns();
                let cycles = rdtsc();
                let after = monotonic_ns();
                if after - before < best.0 {
                    best = (after - before, before + (after - before) / 2, cycles);
                }
            }
            (best.1, best.2)
        }
        let (ns0, cycles0) = sample();
        thread::sleep(Duration::from_millis(50));
        let (ns1, cycles1) = sample();
        (ns1 - ns0) as f64 / (cycles1 - cycles0) as f64
    }
}
