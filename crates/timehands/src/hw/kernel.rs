//! The OS's clock as a counter, and which clocksource Linux runs on.

use crate::Counter;
use crate::os::KernelClock;

/// Where Linux lists its clocksources (no other OS has the directory).
const CLOCKSOURCE_DIR: &str = "/sys/devices/system/clocksource/clocksource0";
/// The file that names the clocksource in use.
const CURRENT_CLOCKSOURCE: &str =
    "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// One of the OS's clocks ([`KernelClock`]) as a 64-bit counter at 1 GHz:
/// the clock's nanoseconds.
///
/// For hosts whose hardware counter cannot be trusted or read, and as the
/// reference to measure one against. Each read is a call: through the vDSO
/// on Linux (a system call when the kernel's clocksource cannot be read
/// from user space), the C library's `clock_gettime` on other unix,
/// QueryPerformanceCounter on Windows.
///
/// Linux's vDSO fences its counter read against what comes before it. On
/// aarch64 it also keeps later reads after it; on x86_64 it does not (an
/// `lfence` precedes its `rdtsc`, none follows), so there
/// [`order_after_read`](Counter::order_after_read) adds the `lfence`. The
/// other OSes' calls are taken to fence as Linux's does (unverified: no
/// runtime for them here).
///
/// ```no_run
/// use timehands::Timekeeper;
/// use timehands::diagnostics::hw::KernelCounter;
///
/// let tk = Timekeeper::new(KernelCounter::monotonic_raw())?;
/// println!("{}", tk.uptime());
/// # Ok::<(), timehands::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelCounter {
    clock: KernelClock,
}

impl KernelCounter {
    /// [`KernelClock::Monotonic`] (CLOCK_MONOTONIC on Linux): time since
    /// boot, not counting suspend (but on Windows), slewed by NTP.
    pub fn monotonic() -> KernelCounter {
        KernelCounter {
            clock: KernelClock::Monotonic,
        }
    }

    /// [`KernelClock::MonotonicRaw`] (CLOCK_MONOTONIC_RAW on Linux): as
    /// `monotonic`, but at the clocksource's own rate, never slewed, where
    /// the OS has such a clock: the one to use under a timekeeper that is
    /// disciplined itself.
    pub fn monotonic_raw() -> KernelCounter {
        KernelCounter {
            clock: KernelClock::MonotonicRaw,
        }
    }
}

impl Counter for KernelCounter {
    /// The clock's nanoseconds, which wrap only after 584 years. Out of line
    /// (it is a call anyway), so that a caller choosing between it and a
    /// hardware counter does not pay for its stack frame on the other path.
    #[inline(never)]
    fn read(&self) -> u64 {
        // The OSes' clocks fail only for an id the OS does not have (each is
        // there on every version this builds for). Were one to, the read
        // would be 0, which the engine takes as a read behind its base and
        // clamps.
        let nanos = crate::os::kernel_nanos(self.clock);
        debug_assert!(nanos.is_ok(), "{} failed: {nanos:?}", self.clock.name());
        nanos.unwrap_or(0)
    }

    fn frequency(&self) -> u64 {
        1_000_000_000
    }

    /// An `lfence` on x86_64, where the vDSO leaves later loads free to run
    /// before its `rdtsc`; nothing elsewhere.
    #[inline]
    fn order_after_read(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `lfence` is SSE2, which every x86_64 CPU has.
            unsafe { core::arch::x86_64::_mm_lfence() };
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        }
    }

    fn name(&self) -> &str {
        self.clock.name()
    }
}

/// The clocksource the kernel keeps time with (`current_clocksource`), such as
/// `"tsc"`, `"kvm-clock"`, `"hpet"` or `"arch_sys_counter"`; `None` when sysfs
/// does not show it (in some containers, say, and on every OS but Linux).
pub fn kernel_clocksource() -> Option<String> {
    kernel_clocksource_in(&mut [0; CLOCKSOURCE_NAME]).map(str::to_string)
}

/// The longest clocksource name read (Linux's are under 32 bytes).
pub(crate) const CLOCKSOURCE_NAME: usize = 64;

/// [`kernel_clocksource`] read into `buf`, allocating nothing: the clock's
/// counter choice asks in whichever read makes it (a signal handler's
/// maybe). std opens a path this short from a buffer on the stack.
pub(crate) fn kernel_clocksource_in(buf: &mut [u8; CLOCKSOURCE_NAME]) -> Option<&str> {
    use std::io::Read;
    let mut file = std::fs::File::open(CURRENT_CLOCKSOURCE).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let source = std::str::from_utf8(&buf[..len]).ok()?.trim();
    (!source.is_empty()).then_some(source)
}

/// The clocksources the kernel could switch to (`available_clocksource`); empty
/// when sysfs does not show them.
pub fn available_clocksources() -> Vec<String> {
    std::fs::read_to_string(format!("{CLOCKSOURCE_DIR}/available_clocksource"))
        .map(|list| list.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}
