//! The clock the first-call section times a child's start by, read the same
//! way by `peer-bench` at spawn and by the child first thing in `main`: the
//! OS's monotonic clock, which every process reads alike. It needs libc only
//! (on Windows, the system's own calls), so that a child links nothing but
//! the library it measures.

/// The variable holding [`monotonic_ns`] at spawn time.
pub const SPAWN_ENV: &str = "PEER_BENCH_SPAWN_NS";

/// CLOCK_MONOTONIC in nanoseconds.
#[cfg(unix)]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `QueryPerformanceCounter` in nanoseconds.
#[cfg(windows)]
pub fn monotonic_ns() -> u64 {
    use windows_sys::Win32::System::Performance::{
        QueryPerformanceCounter, QueryPerformanceFrequency,
    };

    let (mut ticks, mut hz) = (0i64, 0i64);
    // SAFETY: each call writes one i64 through a pointer to a live one; both
    // succeed on every Windows since XP.
    unsafe {
        QueryPerformanceCounter(&mut ticks);
        QueryPerformanceFrequency(&mut hz);
    }
    (i128::from(ticks) * 1_000_000_000 / i128::from(hz.max(1))) as u64
}
