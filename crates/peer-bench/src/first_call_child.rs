//! The child side of the first-call section, included by each
//! `src/bin/first-call-*.rs`. Like [`spawn_clock`], whose clock it reads, it
//! uses libc only, so a child links nothing but the library it measures.

use std::hint::black_box;

#[path = "spawn_clock.rs"]
mod spawn_clock;

use spawn_clock::SPAWN_ENV;
pub use spawn_clock::monotonic_ns;

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
