//! What a latency measurement asks of the system: a real-time priority, a CPU,
//! the smallest timer slack when asked, locked memory, shallow idle states,
//! and the kernel's trace buffer for `-b --tracemark`.
//!
//! Each request that cannot be granted is reported, never dropped silently: a
//! priority is refused with the reason (cyclictest exits then too), a CPU that
//! is not ours is refused before anything starts.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, bail};

/// A scheduling policy, as cyclictest's `--policy` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    /// SCHED_OTHER.
    Other,
    /// SCHED_OTHER (its other name).
    Normal,
    /// SCHED_BATCH.
    Batch,
    /// SCHED_IDLE.
    Idle,
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_RR.
    Rr,
}

impl Policy {
    /// A real-time policy: one that takes a priority.
    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }

    /// The name cyclictest prints.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Other | Policy::Normal => "other",
            Policy::Batch => "batch",
            Policy::Idle => "idle",
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
        }
    }

    fn id(self) -> libc::c_int {
        match self {
            Policy::Other | Policy::Normal => libc::SCHED_OTHER,
            Policy::Batch => libc::SCHED_BATCH,
            Policy::Idle => libc::SCHED_IDLE,
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::Rr => libc::SCHED_RR,
        }
    }
}

/// Makes the calling thread `policy` (SCHED_FIFO or SCHED_RR) at `priority`.
///
/// As cyclictest does, an EPERM with a soft RLIMIT_RTPRIO below `priority` and
/// a hard one at or above it raises the soft limit and tries again.
pub fn set_realtime(policy: Policy, priority: u8) -> anyhow::Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    let (name, id) = (policy.name().to_uppercase(), policy.id());
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let set = || unsafe { libc::sched_setscheduler(0, id, &param) } == 0;
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
        bail!("-p {priority}: SCHED_{name} priority {priority}: {err}");
    }
    bail!(
        "-p {priority}: SCHED_{name} priority {priority} is not allowed here ({err}; \
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
    pin_to_set(&[cpu]).with_context(|| format!("-a: cannot run on CPU {cpu}"))
}

/// Keeps the calling thread (and the threads it starts) on `cpus`.
pub fn pin_to_set(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET checks `cpu` against the set's size.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    let ret = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
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

/// Sets the calling thread's timer slack to the minimum, 1 ns
/// (`--least-slack`).
///
/// A SCHED_OTHER thread's sleeps may end up to its slack (50 µs by default)
/// late by design, to batch wakeups; cyclictest measures that, and so does
/// `latency` unless asked for the least. (Linux gives real-time threads no
/// slack.)
pub fn set_min_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// The calling thread's timer slack, ns, as the kernel reports it.
pub fn timer_slack() -> u64 {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns the slack.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
    u64::try_from(slack).unwrap_or(0)
}

/// The kernel's trace buffer: `trace_marker` to write an event into it, and
/// `tracing_on` to stop tracing, as cyclictest's `-b --tracemark` does.
pub struct TraceMarker {
    marker: File,
    tracing_on: File,
}

/// Where tracefs is mounted, the first that has a trace_marker.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

impl TraceMarker {
    /// Opens the trace marker and the tracing switch, or says why not.
    pub fn open() -> anyhow::Result<TraceMarker> {
        let Some(dir) = TRACEFS
            .iter()
            .map(Path::new)
            .find(|dir| dir.join("trace_marker").exists())
        else {
            bail!(
                "--tracemark: tracefs is not mounted here (no trace_marker in {}): \
                 mount -t tracefs nodev /sys/kernel/tracing",
                TRACEFS.join(" or ")
            );
        };
        let open = |name: &str| {
            let path = dir.join(name);
            OpenOptions::new()
                .write(true)
                .open(&path)
                .with_context(|| format!("--tracemark: cannot write {}", path.display()))
        };
        Ok(TraceMarker {
            marker: open("trace_marker")?,
            tracing_on: open("tracing_on")?,
        })
    }

    /// Writes `event` into the trace and stops tracing. A write that fails
    /// leaves the trace as it is: the run's output still names the break.
    pub fn mark_and_stop(&self, event: &str) {
        let _ = (&self.marker).write_all(event.as_bytes());
        let _ = (&self.tracing_on).write_all(b"0");
    }
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
    /// Asks for a wakeup latency of `us` µs (cyclictest's `--latency`, 0 by
    /// default); the reason when the request cannot be made (no such device,
    /// not root).
    pub fn request(us: i32) -> Result<IdleLimit, String> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(CPU_DMA_LATENCY)
            .map_err(|e| format!("{CPU_DMA_LATENCY}: {e}"))?;
        file.write_all(&us.to_ne_bytes())
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
    fn the_timer_slack_reads_back_as_the_minimum_once_set() {
        let slack = std::thread::spawn(|| {
            set_min_timer_slack();
            timer_slack()
        })
        .join()
        .expect("runs");
        assert_eq!(slack, 1);
    }

    #[test]
    fn a_priority_beyond_sched_fifo_is_refused_with_the_flag_named() {
        // 100 is beyond SCHED_FIFO's range for root and others alike.
        let err = std::thread::spawn(|| set_realtime(Policy::Fifo, 100))
            .join()
            .expect("runs");
        let text = format!("{:#}", err.expect_err("out of range"));
        assert!(text.starts_with("-p 100:"), "{text}");
    }
}
