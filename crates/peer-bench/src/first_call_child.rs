//! The child side of the first-call section, included by each
//! `src/bin/first-call-*.rs`. It uses libc only, so a child links nothing but
//! the library it measures.

use std::hint::black_box;

/// The variable holding CLOCK_MONOTONIC at spawn time, in nanoseconds.
const SPAWN_ENV: &str = "PEER_BENCH_SPAWN_NS";

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Times the first call of `now` and prints, on one line, the nanoseconds from
/// spawn to `main_at` and those the first call took.
pub fn report<T>(main_at: u64, now: impl FnOnce() -> T) {
    let before = monotonic_ns();
    black_box(now());
    let first_call = monotonic_ns() - before;
    let spawned_at: Option<u64> = std::env::var(SPAWN_ENV).ok().and_then(|v| v.parse().ok());
    match spawned_at {
        Some(spawned_at) => println!(
            "before_main_ns={} first_call_ns={first_call}",
            main_at.saturating_sub(spawned_at)
        ),
        None => {
            eprintln!("{SPAWN_ENV} is not set: this program is run by peer-bench");
            std::process::exit(2);
        }
    }
}
