//! The generic timer of aarch64 (CNTVCT_EL0): architected, synchronized and
//! of a frequency firmware states, so no clocksource gates it. The one
//! check is that it runs free of the wall clock: an emulator's timer that
//! reads the Unix time (qemu-user's) steps when Realtime does, and is kept
//! only where `TIMEHANDS_COUNTER=tsc` forces it. That check is a pure
//! function, tested on every architecture.

#[cfg(target_arch = "aarch64")]
use super::{Choice, KeptVerdict, KeptVerdicts};
#[cfg(target_arch = "aarch64")]
use crate::Counter;
#[cfg(target_arch = "aarch64")]
use crate::host::counter::HostCounter;
#[cfg(target_arch = "aarch64")]
use crate::host::text::text;
#[cfg(target_arch = "aarch64")]
use crate::os::KernelClock;

/// The generic timer: architected, synchronized and of known frequency;
/// unless it reads the wall clock (an emulator's, below), where it is kept
/// only if `forced` (else the kernel's clock, with the reason).
#[cfg(target_arch = "aarch64")]
pub(super) fn hardware(forced: bool, mut verdicts: KeptVerdicts) -> Choice {
    let counter = crate::hw::Cntvct::new();
    verdicts.push(KeptVerdict {
        check: "CNTFRQ_EL0",
        passed: true,
        detail: text!("{} Hz", counter.frequency()),
    });
    let free_running = free_running_verdict(&counter);
    let reason = (!free_running.passed).then_some(free_running.detail);
    verdicts.push(free_running);
    if let (Some(reason), false) = (reason, forced) {
        return super::kernel_choice(reason, verdicts);
    }
    Choice {
        counter: HostCounter::Cntvct(counter),
        frequency_source: "CNTFRQ_EL0".into(),
        verdicts,
        fallback: None,
        anchor: None,
        // Firmware states CNTFRQ_EL0; the steering measures it.
        uncertainty_ppb: None,
        // The generic timer is architected and synchronized: no clocksource
        // gates it, whatever the kernel keeps time with.
        own_evidence: None,
    }
}

/// Whether the generic timer runs free of the wall clock. A hardware timer
/// counts from the machine's (or the VM's) start; one that reads the Unix
/// time is an emulator's: qemu-user's follows the host's CLOCK_REALTIME, to
/// the microsecond, so that it steps back with a leap second or a
/// `settimeofday`, and runs at NTP's slew.
#[cfg(target_arch = "aarch64")]
fn free_running_verdict(counter: &crate::hw::Cntvct) -> KeptVerdict {
    let seconds = counter.read() / counter.frequency().max(1);
    let realtime = crate::os::kernel_nanos(KernelClock::Realtime)
        .ok()
        .map(|ns| ns / 1_000_000_000);
    let wall_clock = realtime.is_some_and(|realtime| reads_the_wall_clock(seconds, realtime));
    KeptVerdict {
        check: "CNTVCT_EL0 runs free",
        passed: !wall_clock,
        detail: if wall_clock {
            text!(
                "CNTVCT_EL0 reads the wall clock ({seconds} s, the Unix time): an emulator's \
                 timer (qemu-user's), which steps when Realtime does"
            )
        } else {
            text!("{seconds} s since it started, not the wall clock")
        },
    }
}

/// Whether a timer at `seconds` reads the Unix time, `realtime` (s): within
/// an hour of it, and it a date of this century (a board without a clock
/// that starts at 1970 is as old as its timer, and no emulator's). A timer
/// from power-on reaches the Unix time of 2000 after 30 years.
#[cfg(any(target_arch = "aarch64", test))]
fn reads_the_wall_clock(seconds: u64, realtime: u64) -> bool {
    /// 2000-01-01T00:00:00Z, in Unix time.
    const Y2000: u64 = 946_684_800;
    /// Closer than this to the Unix time is no coincidence.
    const NEAR_S: u64 = 3_600;
    realtime >= Y2000 && seconds.abs_diff(realtime) <= NEAR_S
}

#[cfg(target_arch = "aarch64")]
#[cfg(test)]
mod tests {
    use super::*;

    /// The generic timer is chosen unless it reads the wall clock (as under
    /// qemu-user, where the aarch64 tests run in CI): then the kernel's
    /// clock is, with the reason and the verdict; forced, the timer is
    /// kept all the same.
    #[test]
    fn the_generic_timer_is_kept_unless_it_reads_the_wall_clock() {
        let free = free_running_verdict(&crate::hw::Cntvct::new());
        let choice = hardware(false, KeptVerdicts::default());
        match choice.fallback {
            None => {
                assert!(free.passed, "{free:?}");
                assert!(matches!(choice.counter, HostCounter::Cntvct(_)));
            }
            Some(why) => {
                assert!(!free.passed, "{why}");
                assert!(why.contains("reads the wall clock"), "{why}");
                assert!(matches!(choice.counter, HostCounter::Kernel(_)));
                assert!(
                    choice
                        .verdicts
                        .iter()
                        .any(|v| v.check == free.check && !v.passed),
                    "{:?}",
                    choice.verdicts
                );
            }
        }
        let forced = hardware(true, KeptVerdicts::default());
        assert!(matches!(forced.counter, HostCounter::Cntvct(_)));
    }
}

/// The generic timer's check, on every architecture (the timer itself is
/// read only on aarch64).
#[cfg(test)]
mod wall_clock_tests {
    use super::reads_the_wall_clock;

    /// qemu-user's timer (the Unix time to the second, a little behind or
    /// ahead) reads the wall clock; a timer from power-on does not, nor one
    /// on a board whose Realtime starts at 1970 with it.
    #[test]
    fn a_timer_reads_the_wall_clock_only_near_a_date_of_this_century() {
        const NOW: u64 = 1_795_910_400;
        assert!(reads_the_wall_clock(NOW, NOW));
        assert!(reads_the_wall_clock(NOW - 3_600, NOW));
        assert!(reads_the_wall_clock(NOW + 1, NOW));
        assert!(!reads_the_wall_clock(NOW - 3_601, NOW));
        assert!(!reads_the_wall_clock(12_345, NOW), "hours since power-on");
        assert!(
            !reads_the_wall_clock(120, 118),
            "a board without a clock, at 1970"
        );
    }
}
