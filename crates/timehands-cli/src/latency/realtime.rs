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
}

/// Makes the calling thread `policy` (SCHED_FIFO or SCHED_RR) at `priority`,
/// raising a soft RLIMIT_RTPRIO below it as cyclictest does.
pub fn set_realtime(policy: Policy, priority: u8) -> anyhow::Result<()> {
    let realtime = match policy {
        Policy::Rr => timehands::sys::Policy::RoundRobin,
        _ => timehands::sys::Policy::Fifo,
    };
    timehands::sys::set_scheduling(realtime, i32::from(priority)).map_err(|e| {
        anyhow::anyhow!("-p {priority}: {e}; or leave out -p to measure under SCHED_OTHER")
    })
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> anyhow::Result<()> {
    timehands::sys::pin_to_cpu(cpu).with_context(|| format!("-a: cannot run on CPU {cpu}"))
}

/// The CPUs this thread may run on (all of them, as far as we can tell, if
/// the kernel will not say).
pub fn allowed_cpus() -> Vec<usize> {
    timehands::sys::allowed_cpus().unwrap_or_else(|_| {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    })
}

/// Sets the calling thread's timer slack to the minimum, 1 ns
/// (`--least-slack`).
///
/// A SCHED_OTHER thread's sleeps may end up to its slack (50 µs by default)
/// late by design, to batch wakeups; cyclictest measures that, and so does
/// `latency` unless asked for the least. (Linux gives real-time threads no
/// slack.)
pub fn set_min_timer_slack() {
    timehands::sys::set_minimal_timer_slack();
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
