//! The hardware the firmware uses on QEMU's mps2-an386: the two CMSDK APB
//! timers and the interrupt line of the second.
//!
//! A CMSDK APB timer (ARM DDI0479C) is a 32-bit down counter clocked by the
//! 25 MHz SYSCLK. `VALUE` counts down to 0, holds there for one clock, then
//! reloads from `RELOAD` (a period is `RELOAD + 1` clocks) and, with `IRQEN`
//! set, raises its interrupt until `INTSTATUS` is written. Writing `RELOAD`
//! also sets `VALUE`, which restarts the period. QEMU models exactly this
//! (hw/timer/cmsdk-apb-timer.c, a ptimer that counts on the virtual clock)
//! and maps timer 0 at 0x4000_0000 on IRQ 8 and timer 1 at 0x4000_1000 on
//! IRQ 9 (hw/arm/mps2.c).
//!
//! Timer 0 runs free with `RELOAD = 0xffff_ffff`: its complement counts up
//! through all 2^32 values and wraps every 171.8 s. It is the engine's
//! [`Counter`]. Timer 1 is the tick: its interrupt winds the engine up.

use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{AtomicU32, Ordering, compiler_fence};

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::NVIC;
use timehands::Counter;

/// The timers' clock, SYSCLK.
pub const TIMER_HZ: u64 = 25_000_000;
/// The free-running counter's width.
pub const COUNTER_MASK: u64 = u32::MAX as u64;
/// The tick's interrupt, as the NVIC numbers it (the `irqn` the default
/// handler is given).
pub const TICK_IRQ: i16 = 9;

/// A register block of one timer.
struct ApbTimer {
    base: usize,
}

const CTRL: usize = 0x0;
const VALUE: usize = 0x4;
const RELOAD: usize = 0x8;
const INTSTATUS: usize = 0xc;

const CTRL_ENABLE: u32 = 1 << 0;
const CTRL_IRQ_ENABLE: u32 = 1 << 3;

const TIMER0: ApbTimer = ApbTimer { base: 0x4000_0000 };
const TIMER1: ApbTimer = ApbTimer { base: 0x4000_1000 };

impl ApbTimer {
    fn read(&self, register: usize) -> u32 {
        // SAFETY: `base` is one of the two timer blocks the board maps and
        // `register` one of their word-aligned registers; reading them has no
        // side effect and aliases no Rust object.
        unsafe { read_volatile((self.base + register) as *const u32) }
    }

    fn write(&self, register: usize, value: u32) {
        // SAFETY: as in `read`; only this module writes the timers.
        unsafe { write_volatile((self.base + register) as *mut u32, value) }
    }
}

/// Timer 0, free-running, as the engine's counter.
///
/// It also keeps the last value it returned, so that a check can compute the
/// exact time of a read it has just made: with interrupts unable to come in
/// between (in the tick handler), that value is the count the engine used.
pub struct FreeRunningCounter {
    last_read: AtomicU32,
}

impl FreeRunningCounter {
    /// A counter not yet started.
    pub const fn new() -> FreeRunningCounter {
        FreeRunningCounter {
            last_read: AtomicU32::new(0),
        }
    }

    /// Starts timer 0 from the top of its range, without its interrupt.
    pub fn start(&self) {
        TIMER0.write(CTRL, 0);
        TIMER0.write(RELOAD, u32::MAX);
        TIMER0.write(CTRL, CTRL_ENABLE);
    }

    /// The value the last [`Counter::read`] returned.
    pub fn last_read(&self) -> u32 {
        self.last_read.load(Ordering::Relaxed)
    }
}

impl Counter for FreeRunningCounter {
    /// The complement of `VALUE`: a down counter read upside down.
    ///
    /// One core, in order, and the timer is device memory: only the compiler
    /// could move the read across the accesses around it, and the fence
    /// keeps it from doing so.
    fn read(&self) -> u64 {
        compiler_fence(Ordering::SeqCst);
        let count = !TIMER0.read(VALUE);
        self.last_read.store(count, Ordering::Relaxed);
        count as u64
    }

    fn frequency(&self) -> u64 {
        TIMER_HZ
    }

    fn mask(&self) -> u64 {
        COUNTER_MASK
    }

    fn name(&self) -> &str {
        "CMSDK APB timer 0"
    }

    fn order_after_read(&self) {
        compiler_fence(Ordering::SeqCst);
    }
}

/// The tick's line in the NVIC.
#[derive(Clone, Copy)]
struct TickIrq;

// SAFETY: TICK_IRQ is timer 1's line on this board, within the NVIC's 32.
unsafe impl InterruptNumber for TickIrq {
    fn number(self) -> u16 {
        TICK_IRQ as u16
    }
}

/// Starts (or restarts) the tick with a period of `counts` clocks, at least 2.
pub fn set_tick_period(counts: u32) {
    TIMER1.write(RELOAD, counts - 1);
    TIMER1.write(CTRL, CTRL_ENABLE | CTRL_IRQ_ENABLE);
}

/// Lets the tick's interrupt in.
pub fn unmask_tick() {
    // SAFETY: the tick handler shares nothing with code that masks
    // interrupts to guard it (it takes its own critical sections).
    unsafe { NVIC::unmask(TickIrq) };
}

/// Clears the tick's interrupt, in its handler.
pub fn acknowledge_tick() {
    TIMER1.write(INTSTATUS, 1);
}
