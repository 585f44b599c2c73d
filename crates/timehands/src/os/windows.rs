//! Windows: QueryPerformanceCounter (std's `Instant`, which counts the time
//! suspended) and GetSystemTimePreciseAsFileTime for the clocks; the CPU
//! affinity of the calling thread's processor group (64 CPUs, 32 on 32-bit
//! Windows). Windows has no `fork`, no POSIX real-time policy (its priority
//! classes are another model), no timer slack, and keeps no NTP error bound
//! a program can read.

use std::io;
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::FILETIME;
use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};
use windows_sys::Win32::System::SystemInformation::{
    GROUP_AFFINITY, GetSystemTimePreciseAsFileTime,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetCurrentProcessorNumber, GetCurrentThread, GetProcessAffinityMask,
    GetThreadGroupAffinity, SetThreadAffinityMask,
};

use super::KernelClock;
pub(crate) use super::absent::{
    kernel_rate, kernel_resolution, ntp, on_fork, set_kernel_rate, set_minimal_timer_slack,
    set_scheduling, tai_minus_utc,
};
use super::cpu_mask::{cpu_mask, cpus_in, pin_refused};

/// 100 ns intervals from 1601-01-01 (FILETIME's origin) to the Unix epoch.
const UNIX_EPOCH_FILETIME: u64 = 116_444_736_000_000_000;

/// QueryPerformanceCounter's frequency, fixed at boot (10 MHz on Windows 10
/// and later). Windows XP and later always have the counter, so the call
/// cannot fail; were it to say 0 Hz, the clock would stand at 0 rather than
/// divide by it.
fn qpc_frequency() -> u64 {
    static FREQUENCY: OnceLock<u64> = OnceLock::new();
    *FREQUENCY.get_or_init(|| {
        let mut hz = 0i64;
        // SAFETY: `hz` is a valid i64 to write.
        unsafe { QueryPerformanceFrequency(&mut hz) };
        u64::try_from(hz).unwrap_or(0).max(1)
    })
}

/// `clock` in nanoseconds since its origin: QueryPerformanceCounter's
/// counts since boot (suspend included) in nanoseconds, or FILETIME's
/// 100 ns since 1601 moved to the Unix epoch.
pub(crate) fn kernel_nanos(clock: KernelClock) -> io::Result<u64> {
    match clock {
        KernelClock::Realtime | KernelClock::RealtimeCoarse => {
            let mut ft = FILETIME {
                dwLowDateTime: 0,
                dwHighDateTime: 0,
            };
            // SAFETY: `ft` is a valid FILETIME to write; the call cannot fail.
            unsafe { GetSystemTimePreciseAsFileTime(&mut ft) };
            let ticks = (u64::from(ft.dwHighDateTime) << 32) | u64::from(ft.dwLowDateTime);
            Ok(ticks
                .saturating_sub(UNIX_EPOCH_FILETIME)
                .saturating_mul(100))
        }
        _ => {
            let mut counts = 0i64;
            // SAFETY: `counts` is a valid i64 to write; the call cannot fail
            // on Windows XP and later.
            unsafe { QueryPerformanceCounter(&mut counts) };
            // Whole seconds and the counts left, so that nothing overflows
            // a u64 and no 128-bit division runs (as std does).
            let (counts, hz) = (u64::try_from(counts).unwrap_or(0), qpc_frequency());
            Ok((counts / hz)
                .saturating_mul(1_000_000_000)
                .saturating_add(counts % hz * 1_000_000_000 / hz))
        }
    }
}

/// Windows' name for `clock`.
pub(crate) fn clock_name(clock: KernelClock) -> &'static str {
    match clock {
        KernelClock::Realtime | KernelClock::RealtimeCoarse => "GetSystemTimePreciseAsFileTime",
        _ => "QueryPerformanceCounter",
    }
}

/// CPUs a processor group's mask holds: 64 (32 on 32-bit Windows).
const GROUP_CPUS: usize = usize::BITS as usize;

/// The CPUs the process may run on, in its processor group. A process with
/// threads in several groups (on machines with more than 64 CPUs) has no
/// one mask: an error says so.
pub(crate) fn process_cpus() -> io::Result<Vec<usize>> {
    let (mut process, mut system) = (0usize, 0usize);
    // SAFETY: both are valid usizes to write; the pseudo-handle of the
    // current process needs no closing.
    if unsafe { GetProcessAffinityMask(GetCurrentProcess(), &mut process, &mut system) } == 0 {
        return Err(super::last_error("GetProcessAffinityMask"));
    }
    if process == 0 {
        return Err(io::Error::other(
            "the process runs in several processor groups: its CPUs have no one mask",
        ));
    }
    Ok(cpus_in(&[process as u64]))
}

/// The CPUs the calling thread may run on, in its processor group.
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    let mut affinity = GROUP_AFFINITY {
        Mask: 0,
        Group: 0,
        Reserved: [0; 3],
    };
    // SAFETY: `affinity` is a valid GROUP_AFFINITY to write; the
    // pseudo-handle of the current thread needs no closing.
    if unsafe { GetThreadGroupAffinity(GetCurrentThread(), &mut affinity) } == 0 {
        return Err(super::last_error("GetThreadGroupAffinity"));
    }
    Ok(cpus_in(&[affinity.Mask as u64]))
}

/// Keeps the calling thread on `cpus`, in its processor group. (The threads
/// it starts take the process's affinity, not this.)
pub(crate) fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
    let words = cpu_mask(cpus)?;
    if cpus.iter().any(|&cpu| cpu >= GROUP_CPUS) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cannot run on CPUs {cpus:?}: a Windows thread runs on CPUs below {GROUP_CPUS}, in its processor group"
            ),
        ));
    }
    // SAFETY: the pseudo-handle of the current thread needs no closing;
    // Windows refuses (returns 0) a mask outside the process's.
    if unsafe { SetThreadAffinityMask(GetCurrentThread(), words[0] as usize) } == 0 {
        return Err(pin_refused(cpus));
    }
    Ok(())
}

/// The CPU the calling thread runs on, in its processor group.
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: takes nothing, returns a number.
    Some(unsafe { GetCurrentProcessorNumber() } as usize)
}
