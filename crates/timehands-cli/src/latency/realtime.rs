//! What a latency measurement asks of the system: a real-time priority, a CPU,
//! the smallest timer slack, locked memory, and shallow idle states.
//!
//! Each request that cannot be granted is reported, never dropped silently: a
//! priority is refused with the reason (cyclictest exits then too), a CPU that
//! is not ours is refused before anything starts.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};

use anyhow::{Context, bail};

/// Makes the calling thread SCHED_FIFO at `priority`.
///
/// As cyclictest does, an EPERM with a soft RLIMIT_RTPRIO below `priority` and
/// a hard one at or above it raises the soft limit and tries again.
pub fn set_fifo(priority: u8) -> anyhow::Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let set = || unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    if set() {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) };
    let wanted = libc::rlim_t::from(priority);
    if err.raw_os_error() == Some(libc::EPERM)
        && limit.rlim_cur < wanted
        && wanted <= limit.rlim_max
    {
        let raised = libc::rlimit {
            rlim_cur: wanted,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit, within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &raised) } == 0 && set() {
            return Ok(());
        }
    }
    if err.raw_os_error() != Some(libc::EPERM) {
        bail!("-p {priority}: SCHED_FIFO priority {priority}: {err}");
    }
    bail!(
        "-p {priority}: SCHED_FIFO priority {priority} is not allowed here ({err}; \
         RLIMIT_RTPRIO {}): run as root, raise `ulimit -r`, or leave out -p to measure under SCHED_OTHER",
        limit_text(limit)
    )
}

fn limit_text(limit: libc::rlimit) -> String {
    let one = |v: libc::rlim_t| match v {
        libc::RLIM_INFINITY => "unlimited".to_string(),
        v => v.to_string(),
    };
    format!("soft {}, hard {}", one(limit.rlim_cur), one(limit.rlim_max))
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> anyhow::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET checks `cpu` against the set's size.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    let ret = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if ret != 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("-a: cannot run on CPU {cpu}"));
    }
    Ok(())
}

/// The CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let ret = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if ret != 0 {
        return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the set's size.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Sets the calling thread's timer slack to the minimum, 1 ns, and returns
/// the slack the kernel reports afterwards.
///
/// A SCHED_OTHER thread's sleeps may otherwise end up to 50 µs late by design,
/// to batch wakeups; that would be measured as latency. (Linux ignores the
/// slack of real-time threads.)
pub fn set_min_timer_slack() -> u64 {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns the slack.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
    u64::try_from(slack).unwrap_or(0)
}

/// Locks the process's current and future memory, so that no page fault
/// lands in a measurement.
pub fn lock_memory() -> anyhow::Result<()> {
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(io::Error::last_os_error())
            .context("-m: mlockall failed (raise `ulimit -l` or run as root)");
    }
    Ok(())
}

/// A PM QoS request that keeps the CPUs out of deep idle states while it is
/// held, as cyclictest makes by default (writing 0 to /dev/cpu_dma_latency):
/// waking a CPU from a deep C-state takes tens to hundreds of µs.
pub struct IdleLimit {
    _request: File,
}

/// Where the PM QoS request is made.
const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

impl IdleLimit {
    /// Asks for a 0 µs wakeup latency; the reason when the request cannot be
    /// made (no such device, not root).
    pub fn request() -> Result<IdleLimit, String> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(CPU_DMA_LATENCY)
            .map_err(|e| format!("{CPU_DMA_LATENCY}: {e}"))?;
        file.write_all(&0i32.to_ne_bytes())
            .map_err(|e| format!("{CPU_DMA_LATENCY}: {e}"))?;
        Ok(IdleLimit { _request: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calling_thread_may_run_on_some_cpu() {
        assert!(!allowed_cpus().is_empty());
    }

    #[test]
    fn the_timer_slack_reads_back_as_the_minimum() {
        let slack = std::thread::spawn(set_min_timer_slack)
            .join()
            .expect("runs");
        assert_eq!(slack, 1);
    }

    #[test]
    fn a_priority_beyond_sched_fifo_is_refused_with_the_flag_named() {
        // 100 is beyond SCHED_FIFO's range for root and others alike.
        let err = std::thread::spawn(|| set_fifo(100)).join().expect("runs");
        let text = format!("{:#}", err.expect_err("out of range"));
        assert!(text.starts_with("-p 100:"), "{text}");
    }
}
