//! CNTVCT_EL0, the virtual count of the aarch64 generic timer.
//!
//! `mrs` of the counter may be performed speculatively, before earlier loads
//! complete, so an ordered read is `isb; mrs` (the `isb` makes it wait for the
//! instructions before it), and a second `isb` after it keeps later loads from
//! going first. The `asm!` blocks of the ordered reads do not say `nomem`, so
//! the compiler does not move memory accesses across them either.

use core::arch::asm;

use crate::Counter;

/// The aarch64 generic timer's virtual count (CNTVCT_EL0) as a [`Counter`].
///
/// Linux lets user space read the count and its frequency (it sets
/// CNTKCTL_EL1.EL0VCTEN for the vDSO). The count is at least 56 bits wide;
/// read as 64 bits, it would wrap only after more than twenty years at the
/// 100 MHz of common systems (and ARMv8.6 makes it 64 bits at 1 GHz).
///
/// ```no_run
/// use timehands::Timekeeper;
/// use timehands::diagnostics::hw::Cntvct;
///
/// let tk = Timekeeper::new(Cntvct::new())?;
/// println!("{}", tk.uptime());
/// # Ok::<(), timehands::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cntvct {
    frequency: u64,
}

impl Cntvct {
    /// The counter at the frequency firmware wrote into CNTFRQ_EL0. Firmware that
    /// left it 0 makes [`Timekeeper::new`](crate::Timekeeper::new) refuse the
    /// counter with [`Error::Frequency`](crate::Error::Frequency).
    pub fn new() -> Cntvct {
        let frequency: u64;
        // SAFETY: reading CNTFRQ_EL0 is allowed at EL0 and has no side effects.
        unsafe {
            asm!("mrs {}, cntfrq_el0", out(reg) frequency, options(nomem, nostack, preserves_flags));
        }
        Cntvct {
            // The frequency is the register's low 32 bits; the rest is reserved.
            frequency: frequency & 0xffff_ffff,
        }
    }
}

impl Default for Cntvct {
    fn default() -> Cntvct {
        Cntvct::new()
    }
}

impl Counter for Cntvct {
    /// A bare `mrs`, with no barrier: for timing an interval on one thread,
    /// never for a value compared with another thread's.
    #[inline]
    fn read_unordered(&self) -> u64 {
        let count: u64;
        // SAFETY: Linux allows EL0 reads of CNTVCT_EL0, which have no side
        // effects; unordered, this read may be `nomem`.
        unsafe {
            asm!("mrs {}, cntvct_el0", out(reg) count, options(nomem, nostack, preserves_flags));
        }
        count
    }

    #[inline]
    fn read(&self) -> u64 {
        let count: u64;
        // SAFETY: `isb` and an EL0 read of CNTVCT_EL0 (which Linux allows) have
        // no effect but the read; the block is not `nomem`, so it also keeps the
        // compiler from moving memory accesses across it.
        unsafe {
            asm!("isb", "mrs {}, cntvct_el0", out(reg) count, options(nostack, preserves_flags));
        }
        count
    }

    fn frequency(&self) -> u64 {
        self.frequency
    }

    fn name(&self) -> &str {
        "CNTVCT_EL0"
    }

    #[inline]
    fn order_after_read(&self) {
        // SAFETY: `isb` only synchronizes the instruction stream; not `nomem`,
        // so the compiler keeps later memory accesses after it.
        unsafe {
            asm!("isb", options(nostack, preserves_flags));
        }
    }
}
