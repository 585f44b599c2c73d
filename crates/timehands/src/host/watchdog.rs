//! The watchdog: does the counter still keep time?
//!
//! At each steering the counter is paired with CLOCK_MONOTONIC_RAW plus the
//! time spent in suspend (see `steer.rs`): a reference no NTP slew moves, and
//! that a counter running through suspend keeps up with. Between two samples
//! the counter must have advanced at the rate it kept against that reference
//! since the first sample. A counter that went backwards, stopped, or ran at a
//! rate off by more than [`RATE_BOUND_PPM`] plus what the brackets can tell (a
//! VM migrated to a host whose TSC runs at another rate or from another value,
//! a TSC reset by a suspend the hypervisor hid) no longer keeps time: the host
//! clock retires it for the kernel's counter (`HostClock::fail_over`), without
//! a backward step.

use crate::host::brackets::{Measured, Pair};
use crate::os::KernelClock;

/// How far the counter's rate over one steering interval may stray from the
/// rate it has kept against CLOCK_MONOTONIC_RAW: a healthy counter and the raw
/// clock drift apart by a few ppm (the same crystal, or two), far below this.
pub(crate) const RATE_BOUND_PPM: f64 = 1000.0;

/// What the watchdog found wrong between two pairs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Misbehaviour {
    /// The counter is lower than at the earlier pair.
    Backwards {
        /// By how many counts.
        counts: u64,
    },
    /// The counter did not move while the kernel's clock did.
    Stopped {
        /// For how many nanoseconds of the kernel's clock.
        kernel_ns: u64,
    },
    /// The counter ran this many ppm away from its frequency in use, as the
    /// kernel's clock measures it.
    Rate {
        /// Parts per million, positive for fast.
        ppm: f64,
    },
}

impl core::fmt::Display for Misbehaviour {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Misbehaviour::Backwards { counts } => {
                write!(f, "the counter went backwards by {counts} counts")
            }
            Misbehaviour::Stopped { kernel_ns } => write!(
                f,
                "the counter stopped while {} advanced {kernel_ns} ns",
                KernelClock::MonotonicRaw.name()
            ),
            Misbehaviour::Rate { ppm } => write!(
                f,
                "the counter ran {ppm:+.0} ppm off the rate it kept against {} (bound ±{RATE_BOUND_PPM} ppm)",
                KernelClock::MonotonicRaw.name()
            ),
        }
    }
}

/// What went wrong with a counter of `mask` between the samples `earlier` and
/// `later`, if anything: backwards or stopped, and, once a `rate` against the
/// reference is known, a rate off by more than the bound. A reference that did
/// not advance tells nothing, and neither does a rate whose brackets are too
/// wide to tell.
pub(crate) fn check(
    earlier: &Pair,
    later: &Pair,
    rate: Option<Measured>,
    mask: u64,
) -> Option<Misbehaviour> {
    let kernel_ns = later.kernel.checked_sub(earlier.kernel)?;
    if kernel_ns == 0 {
        return None;
    }
    let counts = later.count.wrapping_sub(earlier.count) & mask;
    // A difference in the top half of the range is a step back, as in the
    // engine's clamp (which takes the top eighth: here a sample is never more
    // than a few steering intervals old, so half is a safe divide).
    if counts > mask / 2 {
        return Some(Misbehaviour::Backwards {
            counts: earlier.count.wrapping_sub(later.count) & mask,
        });
    }
    if counts == 0 && earlier.width == 0 && later.width == 0 {
        return Some(Misbehaviour::Stopped { kernel_ns });
    }
    let rate = rate?;
    let expected = kernel_ns as f64 * rate.hz as f64 / 1e9;
    let ppm = (counts as f64 / expected - 1.0) * 1e6;
    // Each sample's count is within half its bracket of the reference's
    // reading, and the rate itself is known to its uncertainty.
    let slack_ppm = (earlier.width + later.width) as f64 / 2.0 / expected * 1e6
        + rate.uncertainty_ppb as f64 / 1e3;
    if ppm.abs() <= RATE_BOUND_PPM + slack_ppm {
        return None;
    }
    Some(if counts == 0 {
        Misbehaviour::Stopped { kernel_ns }
    } else {
        Misbehaviour::Rate { ppm }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 3_000_000_000;
    const MASK: u64 = u64::MAX;

    /// A rate known exactly.
    fn exact(hz: u64) -> Option<Measured> {
        Some(Measured {
            hz,
            uncertainty_ppb: 0,
        })
    }

    /// A pair at `ns` of the kernel's clock whose count is `count`, bracketed
    /// by `width` counts.
    fn pair(count: u64, ns: u64, width: u64) -> Pair {
        Pair::new(count, ns, width)
    }

    #[test]
    fn a_counter_at_its_frequency_passes() {
        let a = pair(1_000, 1_000_000, 60);
        let b = pair(1_000 + 30_000_000, 11_000_000, 60);
        assert_eq!(check(&a, &b, exact(HZ), MASK), None);
    }

    #[test]
    fn drift_within_the_bound_passes() {
        // 500 ppm slow over 10 ms.
        let a = pair(0, 0, 0);
        let b = pair(30_000_000 - 15_000, 10_000_000, 0);
        assert_eq!(check(&a, &b, exact(HZ), MASK), None);
    }

    #[test]
    fn a_jump_forward_is_a_rate_error() {
        // 10 ms of kernel time, 1 s of counts: a migration to a TSC ahead.
        let a = pair(0, 0, 60);
        let b = pair(HZ, 10_000_000, 60);
        match check(&a, &b, exact(HZ), MASK) {
            Some(Misbehaviour::Rate { ppm }) => assert!((ppm - 99e6).abs() < 1.0, "{ppm}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_stopped_counter_is_caught() {
        let a = pair(5_000, 0, 0);
        let b = pair(5_000, 10_000_000, 0);
        assert_eq!(
            check(&a, &b, exact(HZ), MASK),
            Some(Misbehaviour::Stopped {
                kernel_ns: 10_000_000
            })
        );
        // Bracketed (the midpoints coincide, the brackets cannot tell the
        // counter moved): still no rate at all.
        let a = pair(5_000, 0, 60);
        let b = pair(5_000, 10_000_000, 60);
        assert!(matches!(
            check(&a, &b, exact(HZ), MASK),
            Some(Misbehaviour::Stopped { .. })
        ));
    }

    #[test]
    fn a_counter_going_backwards_is_caught_on_narrow_counters_too() {
        let a = pair(1_000_000, 0, 0);
        let b = pair(400_000, 10_000_000, 0);
        assert_eq!(
            check(&a, &b, exact(HZ), MASK),
            Some(Misbehaviour::Backwards { counts: 600_000 })
        );
        // A 32-bit counter that wrapped forward is not a step back.
        let a = pair(0xffff_ff00, 0, 0);
        let b = pair(0x100, 1_000, 0);
        assert_eq!(check(&a, &b, exact(512_000_000), 0xffff_ffff), None);
    }

    #[test]
    fn wide_brackets_tell_nothing() {
        // 2000 ppm off, but each bracket is 100 µs wide over a 10 ms baseline.
        let a = pair(0, 0, 300_000);
        let b = pair(30_060_000, 10_000_000, 300_000);
        assert_eq!(check(&a, &b, exact(HZ), MASK), None);
        let a = pair(0, 0, 60);
        let b = pair(30_060_000, 10_000_000, 60);
        assert!(matches!(
            check(&a, &b, exact(HZ), MASK),
            Some(Misbehaviour::Rate { .. })
        ));
    }

    #[test]
    fn until_a_rate_is_known_only_order_is_checked() {
        let a = pair(0, 0, 60);
        // A jump: caught once the rate is known, not before.
        let b = pair(HZ, 10_000_000, 60);
        assert_eq!(check(&a, &b, None, MASK), None);
        // Backwards and stopped need no rate.
        assert!(matches!(
            check(&pair(100, 0, 0), &pair(50, 10, 0), None, MASK),
            Some(Misbehaviour::Backwards { counts: 50 })
        ));
        assert!(matches!(
            check(&pair(100, 0, 0), &pair(100, 10, 0), None, MASK),
            Some(Misbehaviour::Stopped { kernel_ns: 10 })
        ));
    }

    #[test]
    fn the_rates_uncertainty_widens_the_bound() {
        // 2000 ppm fast over 10 ms, against a rate known to 1500 ppm.
        let a = pair(0, 0, 0);
        let b = pair(30_060_000, 10_000_000, 0);
        let rough = Some(Measured {
            hz: HZ,
            uncertainty_ppb: 1_500_000,
        });
        assert_eq!(check(&a, &b, rough, MASK), None);
        assert!(check(&a, &b, exact(HZ), MASK).is_some());
    }

    #[test]
    fn a_kernel_clock_that_did_not_move_tells_nothing() {
        let a = pair(0, 5, 0);
        assert_eq!(check(&a, &pair(1_000, 5, 0), exact(HZ), MASK), None);
        assert_eq!(check(&a, &pair(1_000, 4, 0), exact(HZ), MASK), None);
    }
}
