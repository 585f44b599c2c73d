//! The kernel's clock as a counter, and which clocksource the kernel runs on.

use core::mem::MaybeUninit;

use crate::Counter;

/// Where Linux lists its clocksources.
const CLOCKSOURCE_DIR: &str = "/sys/devices/system/clocksource/clocksource0";

/// A Linux clock (`clock_gettime`) as a 64-bit counter at 1 GHz: the clock's
/// nanoseconds.
///
/// For hosts whose hardware counter cannot be trusted or read, and as the
/// reference to measure one against. Each read is a vDSO call, or a system call
/// when the kernel's clocksource cannot be read from user space.
///
/// The vDSO fences its counter read against what comes before it. On aarch64
/// it also keeps later reads after it; on x86_64 it does not (an `lfence`
/// precedes its `rdtsc`, none follows), so there
/// [`order_after_read`](Counter::order_after_read) adds the `lfence`.
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
    clock: libc::clockid_t,
    name: &'static str,
}

impl KernelCounter {
    /// `CLOCK_MONOTONIC`: time since boot, not counting suspend, slewed by NTP.
    pub fn monotonic() -> KernelCounter {
        KernelCounter {
            clock: libc::CLOCK_MONOTONIC,
            name: "CLOCK_MONOTONIC",
        }
    }

    /// `CLOCK_MONOTONIC_RAW`: as `CLOCK_MONOTONIC`, but at the clocksource's own
    /// rate, never slewed: the one to use under a timekeeper that is
    /// disciplined itself.
    pub fn monotonic_raw() -> KernelCounter {
        KernelCounter {
            clock: libc::CLOCK_MONOTONIC_RAW,
            name: "CLOCK_MONOTONIC_RAW",
        }
    }
}

impl Counter for KernelCounter {
    /// The clock's nanoseconds, which wrap only after 584 years. Out of line
    /// (it is a call anyway), so that a caller choosing between it and a
    /// hardware counter does not pay for its stack frame on the other path.
    #[inline(never)]
    fn read(&self) -> u64 {
        let mut now = MaybeUninit::<libc::timespec>::zeroed();
        // SAFETY: `now` is valid for writes for the call; all zeros is a valid
        // timespec (integers and padding), so it is initialized even if the call
        // wrote nothing.
        let (result, now) = unsafe {
            let result = libc::clock_gettime(self.clock, now.as_mut_ptr());
            (result, now.assume_init())
        };
        // clock_gettime fails only with EINVAL (a clock id the kernel does not
        // know: both are there since Linux 2.6.28) or EFAULT (a bad pointer:
        // `now` is ours), so it cannot fail here. Were it to, the read would be
        // 0, which the engine takes as a read behind its base and clamps.
        debug_assert_eq!(result, 0, "clock_gettime({}) failed", self.name);
        (now.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(now.tv_nsec as u64)
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
        self.name
    }
}

/// The clocksource the kernel keeps time with (`current_clocksource`), such as
/// `"tsc"`, `"kvm-clock"`, `"hpet"` or `"arch_sys_counter"`; `None` when sysfs
/// does not show it (in some containers, say).
pub fn kernel_clocksource() -> Option<String> {
    std::fs::read_to_string(format!("{CLOCKSOURCE_DIR}/current_clocksource"))
        .ok()
        .map(|source| source.trim().to_string())
}

/// The clocksources the kernel could switch to (`available_clocksource`); empty
/// when sysfs does not show them.
pub fn available_clocksources() -> Vec<String> {
    std::fs::read_to_string(format!("{CLOCKSOURCE_DIR}/available_clocksource"))
        .map(|list| list.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}
