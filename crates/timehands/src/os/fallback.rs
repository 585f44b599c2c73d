//! Anything without a family of its own (wasm32-wasip1): std alone.
//! Monotonic is std's `Instant`, counted from the first read; Realtime is
//! std's `SystemTime`. No threads may be there (the clock asks for none),
//! no `fork`, no NTP state, no scheduling.

use std::io;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

use super::KernelClock;
pub(crate) use super::absent::{
    allowed_cpus, current_cpu, kernel_rate, kernel_resolution, ntp, on_fork, pin_to_cpus,
    process_cpus, set_kernel_rate, set_minimal_timer_slack, set_scheduling, tai_minus_utc,
};

/// `clock` in nanoseconds since its origin: Monotonic (and the others but
/// Realtime) since the process first asked.
pub(crate) fn kernel_nanos(clock: KernelClock) -> io::Result<u64> {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let since = match clock {
        KernelClock::Realtime | KernelClock::RealtimeCoarse => SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(|e| io::Error::other(format!("the system time is before 1970: {e}")))?,
        _ => ORIGIN.get_or_init(Instant::now).elapsed(),
    };
    Ok(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
}

/// What `clock` is here.
pub(crate) fn clock_name(clock: KernelClock) -> &'static str {
    match clock {
        KernelClock::Realtime | KernelClock::RealtimeCoarse => "std::time::SystemTime",
        _ => "std::time::Instant",
    }
}
