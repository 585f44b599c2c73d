//! `steal_nanos`: the time the hypervisor has run other guests on this
//! machine's CPUs while they had work (steal time), summed over the CPUs,
//! where the OS says: Linux and Android, in /proc/stat's first line, in
//! clock ticks (of 10 ms on most kernels). Elsewhere `None`.
//!
//! A stall that shows there stalls every thread of the machine at once,
//! whichever timers it runs, so the service reports it beside the timers
//! that came out late (see [`Statistics::steal`](crate::Statistics)).

/// The CPUs' steal time so far, in nanoseconds; `None` where the OS does
/// not say.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn steal_nanos() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: u64 = stat
        .lines()
        .next()?
        .split_whitespace()
        .nth(8)?
        .parse()
        .ok()?;
    // SAFETY: sysconf takes no pointer and has no precondition (a name it
    // does not know gives -1).
    let ticks_per_s = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).ok()?;
    Some(ticks.saturating_mul(1_000_000_000) / ticks_per_s.max(1))
}

/// Steal time is /proc/stat's, Linux's and Android's.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn steal_nanos() -> Option<u64> {
    None
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    #[test]
    fn steal_time_is_read_and_never_goes_back() {
        let first = super::steal_nanos().expect("/proc/stat has a steal column");
        let second = super::steal_nanos().unwrap();
        assert!(second >= first, "{first} then {second}");
    }
}
