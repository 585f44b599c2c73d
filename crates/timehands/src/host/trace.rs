//! What a tracer needs to merge its traces with others: a description of the
//! clock its timestamps come from, in the fields of a CTF 1.8 `clock` block.
//!
//! The timestamps are [`Instant::as_nanos`](crate::Instant::as_nanos): a
//! frequency of 1 GHz, CLOCK_MONOTONIC's origin. The offset to Unix time is
//! measured from the tightest of ten brackets `ours, CLOCK_REALTIME, ours`, and
//! the precision is that bracket's half-width plus the clock's current error
//! bound against CLOCK_MONOTONIC.
//!
//! ```
//! let clock = timehands::clock_description();
//! let ctf = clock.to_ctf();
//! assert!(ctf.starts_with("clock {"));
//! assert!(ctf.contains("freq = 1000000000;"));
//! ```

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use crate::host::brackets::offset_on_running_clock;
use crate::host::clock;
use crate::host::kernel_clocks::{KernelClock, KernelClocks, SystemClocks};
use crate::{ClockId, Counter, getres};

/// A trace clock, as CTF 1.8 describes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockDescription {
    /// The clock's name in the trace.
    pub name: String,
    /// A UUID for this process's clock: traces with the same UUID share a clock.
    pub uuid: String,
    /// What the clock is.
    pub description: String,
    /// Timestamp units per second.
    pub frequency: u64,
    /// The uncertainty of a timestamp as Unix time, in timestamp units.
    pub precision: u64,
    /// Unix time at timestamp 0: whole seconds ...
    pub offset_s: i64,
    /// ... plus this many timestamp units.
    pub offset: u64,
    /// Whether the clock is a global reference across machines (it is not:
    /// CLOCK_MONOTONIC starts at each machine's boot).
    pub absolute: bool,
}

impl ClockDescription {
    /// The CTF 1.8 metadata block.
    pub fn to_ctf(&self) -> String {
        let mut ctf = String::from("clock {\n");
        let mut field = |name: &str, value: &dyn std::fmt::Display| {
            let _ = writeln!(ctf, "\t{name} = {value};");
        };
        field("name", &self.name);
        field("uuid", &format!("\"{}\"", self.uuid));
        field("description", &format!("\"{}\"", self.description));
        field("freq", &self.frequency);
        field("precision", &self.precision);
        field("offset_s", &self.offset_s);
        field("offset", &self.offset);
        field("absolute", &if self.absolute { "TRUE" } else { "FALSE" });
        ctf.push_str("};\n");
        ctf
    }
}

/// The UUID of this process's clock: the kernel's random UUID, read once.
fn uuid() -> String {
    static UUID: OnceLock<String> = OnceLock::new();
    UUID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/uuid")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| {
                // No procfs: a version-4-shaped UUID from the time and the pid,
                // unique enough to tell this process's traces apart.
                let t = SystemClocks.nanos(KernelClock::Realtime);
                let pid = std::process::id() as u64;
                format!(
                    "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                    t as u32,
                    (t >> 32) as u16,
                    (t >> 48) & 0xfff,
                    pid & 0xfff,
                    (pid << 16) ^ (t >> 20)
                )
            })
    })
    .clone()
}

/// The description of the clock that [`now`](crate::now) reads.
pub fn clock_description() -> ClockDescription {
    let clock = clock();
    clock.wait_for_choice();
    // Wound up, so that the measurement reads a clock that runs (reads
    // stand past the promise until a windup), and again if it falls due.
    clock.windup();
    let timekeeper = clock.timekeeper();
    let (offset, width) = offset_on_running_clock(
        timekeeper,
        || {
            clock.windup();
        },
        &SystemClocks,
        KernelClock::Realtime,
        10,
    )
    .unwrap_or_else(|stood| stood);
    let accuracy = getres(ClockId::Monotonic).accuracy;
    let precision = Duration::from_nanos(width / 2 + 1) + accuracy;
    ClockDescription {
        name: "timehands_monotonic".to_string(),
        uuid: uuid(),
        description: format!(
            "timehands: {} in ns, read from the {}",
            KernelClock::Monotonic.name(),
            timekeeper.counter().name()
        ),
        frequency: 1_000_000_000,
        precision: precision.as_nanos() as u64,
        offset_s: offset.div_euclid(1_000_000_000) as i64,
        offset: offset.rem_euclid(1_000_000_000) as u64,
        absolute: false,
    }
}
