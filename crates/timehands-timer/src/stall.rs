//! What tells a stall of the machine from work: the time the hypervisor
//! has run other guests on this machine's CPUs while they had work (steal
//! time, [`steal_nanos`]), and the time a thread has waited for a CPU while
//! it could run ([`RunDelay`]: preempted by other threads or processes; a
//! thread that sleeps, in a blocking callback say, is not waiting for a
//! CPU, nor is one whose CPU the hypervisor stole).
//!
//! Steal time is the OS's where it says: Linux and Android, in /proc/stat's
//! first line, summed over the CPUs, in clock ticks (of 10 ms on most
//! kernels). A stall that shows there stalls every thread of the machine at
//! once, whichever timers it runs, so the service reports it beside the
//! timers that came out late (see [`Statistics::steal`](crate::Statistics)).
//! A thread's run delay is the scheduler's, in /proc/thread-self/schedstat
//! on Linux and Android (one read, a system call, per soft round); the
//! other OSes have none here.

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

/// A thread's run delay: the time it has waited for a CPU while it could
/// run, Linux's and Android's /proc/thread-self/schedstat (its second
/// field, in nanoseconds), kept open by the thread that opened it. None
/// elsewhere.
pub(crate) struct RunDelay {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    schedstat: Option<std::fs::File>,
}

impl RunDelay {
    /// The calling thread's: to be read by that thread alone (the file is
    /// the thread's that opened it).
    pub(crate) fn of_this_thread() -> RunDelay {
        RunDelay {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            schedstat: std::fs::File::open("/proc/thread-self/schedstat").ok(),
        }
    }

    /// The delay so far, in nanoseconds; `None` where the OS does not say.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) fn nanos(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut line = [0_u8; 96];
        let read = self.schedstat.as_ref()?.read_at(&mut line, 0).ok()?;
        std::str::from_utf8(&line[..read])
            .ok()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }

    /// The delay so far: the OS does not say here.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub(crate) fn nanos(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn steal_time_is_read_and_never_goes_back() {
        let first = super::steal_nanos().expect("/proc/stat has a steal column");
        let second = super::steal_nanos().unwrap();
        assert!(second >= first, "{first} then {second}");
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_threads_run_delay_is_read_and_never_goes_back() {
        let delay = super::RunDelay::of_this_thread();
        let first = delay.nanos().expect("/proc/thread-self/schedstat");
        std::thread::yield_now();
        let second = delay.nanos().unwrap();
        assert!(second >= first, "{first} then {second}");
    }
}
