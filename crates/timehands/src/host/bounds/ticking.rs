//! Sources that keep a clock of their own on the CPU's counter (the TSC,
//! CNTVCT_EL0): ClockBound 3's page (`clockbound3.rs`) and the VMClock
//! device (`vmclock.rs`) each give a counter value, the time at it, the
//! counter's period and a bound that grows at a stated rate. Their bound
//! is on their own clock, not on the kernel's Realtime (which someone else
//! may slew at 8 % meanwhile): a read computes it at a counter value, as
//! their clients do, and widens it to hold our Realtime; the value is the
//! TSC's our Realtime was read at where the clock runs on the TSC, and
//! [`counter`]'s own read otherwise.

/// Nanoseconds in a second.
#[cfg(target_os = "linux")]
const SECOND_NS: u128 = 1_000_000_000;

/// The CPU's counter now (`rdtsc`, or `isb; mrs cntvct_el0`): what the
/// sources' `counter_value`s count.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn counter() -> u64 {
    crate::hw::rdtsc()
}

#[cfg(target_arch = "aarch64")]
#[inline]
pub(crate) fn counter() -> u64 {
    let count: u64;
    // SAFETY: CNTVCT_EL0 is readable from user space on Linux; `isb` only
    // orders the read after the instructions before it.
    unsafe {
        core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) count, options(nostack, preserves_flags));
    }
    count
}

/// Elsewhere no source keeps a clock on a counter this crate reads.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline]
pub(crate) fn counter() -> u64 {
    0
}

/// A period of `frac / 2^(64 + shift)` seconds a tick (the sources' form)
/// as ns a tick in `mult / 2^(32 + shift)`; `None` when it does not fit
/// (a shift past 95, a period of a second or more).
#[cfg(target_os = "linux")]
pub(crate) fn mult(frac: u64, shift: u8) -> Option<u64> {
    if u32::from(shift) + 32 >= 128 {
        return None;
    }
    u64::try_from((u128::from(frac) * SECOND_NS) >> 32).ok()
}

/// `part / 2^(64 + shift)` of a second a second, as ppb, rounded up.
#[cfg(target_os = "linux")]
pub(crate) fn ppb(part: u64, shift: u8) -> Option<u64> {
    let scale = 64 + u32::from(shift);
    if scale >= 128 {
        return None;
    }
    let ppb = (u128::from(part) * SECOND_NS).div_ceil(1 << scale);
    u64::try_from(ppb).ok()
}

/// A source's clock on the counter: at counter value `at` its time was
/// `time_ns` (ns since the epoch, UTC) within `half_ns`; the time runs
/// `mult / 2^(32 + shift)` ns a tick, and the bound grows at `rate_q32`
/// ([`q32`](super::q32)) of the time elapsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CounterClock {
    pub at: u64,
    pub time_ns: u64,
    pub mult: u64,
    pub shift: u8,
    pub half_ns: u64,
    pub rate_q32: u64,
}

impl CounterClock {
    /// How far below and above `realtime` (ns, ours) UTC can be at counter
    /// value `now`: the source's interval, widened to hold `realtime`
    /// (where the kernel's clock is off the source's by more than its
    /// bound, the interval still holds the truth, and our Realtime).
    #[inline]
    pub(crate) fn around(&self, realtime: u64, now: u64) -> (u64, u64) {
        let elapsed = self.elapsed(now);
        // The period rounded down loses under a ns a tick's 2^-32: one ns
        // more holds it over any span a state lives.
        let half = self
            .half_ns
            .saturating_add(super::grown(elapsed, self.rate_q32))
            .saturating_add(1);
        let time = self.time_ns.saturating_add(elapsed);
        (
            realtime.saturating_sub(time.saturating_sub(half)),
            time.saturating_add(half).saturating_sub(realtime),
        )
    }
}

impl CounterClock {
    /// The source's ns since `at`, at counter value `now`.
    #[inline]
    fn elapsed(&self, now: u64) -> u64 {
        let ticks = now.saturating_sub(self.at);
        // A shift past 127 (a page's word is anybody's number) is none.
        let elapsed = (u128::from(ticks) * u128::from(self.mult))
            .checked_shr(32 + u32::from(self.shift))
            .unwrap_or(0);
        u64::try_from(elapsed).unwrap_or(u64::MAX)
    }

    /// The source's time (ns, UTC) at counter value `now`.
    #[cfg(target_os = "linux")]
    pub(crate) fn time_at(&self, now: u64) -> u64 {
        self.time_ns.saturating_add(self.elapsed(now))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::host::bounds::q32;

    /// A 3 GHz counter in the sources' form (ClockBound 3's PeriodFrac).
    fn three_ghz() -> (u64, u8) {
        let period = 1.0 / 3e9;
        let shift = 31u8;
        ((period * 2f64.powi(64 + 31)) as u64, shift)
    }

    #[test]
    fn a_counter_clock_runs_at_its_period_and_its_bound_grows() {
        let (frac, shift) = three_ghz();
        let clock = CounterClock {
            at: 1_000,
            time_ns: 5_000_000_000,
            mult: mult(frac, shift).expect("fits"),
            shift,
            half_ns: 10_000,
            rate_q32: q32(1_000),
        };
        // At its own counter value: the bound, and the ns of rounding.
        assert_eq!(clock.around(5_000_000_000, 1_000), (10_001, 10_001));
        // One second on (3e9 ticks): 1 µs more at 1 ppm; our Realtime
        // 4 µs behind the source's time.
        let (below, above) = clock.around(5_999_996_000, 3_000_001_000);
        let (later, half) = (6_000_000_000i64, 11_001i64);
        for (got, want) in [
            (below as i64, 5_999_996_000 - (later - half)),
            (above as i64, later + half - 5_999_996_000),
        ] {
            assert!((got - want).abs() <= 2, "{got} against {want}");
        }
        // A Realtime outside the source's interval (ahead of it) is held
        // by it.
        let (below, above) = clock.around(5_100_000_000, 1_000);
        assert_eq!((below, above), (100_010_001, 0));
        assert_eq!(ppb(1 << 34, 0), Some(1), "2^-30 rounded up");
        assert_eq!(mult(frac, 200), None);
    }
}
