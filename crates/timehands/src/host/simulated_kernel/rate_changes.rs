//! The kernel's clock changing rate under the host clock, as NTP daemons
//! change it (chrony's slews through the tick, `adjtimex --tick`, frequency
//! steps), and through a stop and a fork: how far the clock stands off
//! while the rate changes, how soon it is back, and that the bound it
//! states knows of a change from the moment it can.

use super::*;

/// What the clock did while the kernel changed its rate.
#[derive(Debug)]
struct Followed {
    /// The largest |CLOCK_MONOTONIC − ours| while the rate was changed, ns.
    during: u64,
    /// How long after the change ended the offset stayed above 1 µs, ns.
    settled_after: u64,
    /// |our frequency correction − the kernel's rate| 1 s after the end, ppb.
    rate_error_ppb: u64,
    /// The longest the offset stood beyond the bound as the windups left
    /// it (no `getres` asked the kernel), from a change (its start or its
    /// end) on, ns.
    unbounded: u64,
}

/// Runs a clock 2 s steady, then the kernel at `rate_ppb` for `held_ns`,
/// then steady again for 3 s, with reads every 100 µs that wind up when
/// due; the counter runs 20 ppm fast. With `says_rate`, the kernel's NTP
/// state says its rate, as Linux's does.
fn follow(rate_ppb: i64, held_ns: u64, says_rate: bool) -> Followed {
    const STEP: u64 = 100_000;
    let kernel = SimKernel::leaked();
    kernel.says_rate.store(says_rate, Ordering::Release);
    let clock = clock(kernel, 20);
    run(clock, kernel, 2_000_000_000, STEP);
    let (mut during, mut unbounded, mut beyond) = (0u64, 0u64, 0u64);
    // Steps (of `STEP`) in a row with the offset beyond the bound.
    let mut track_bound = |clock: &HostClock, kernel: &SimKernel| {
        let off = offset(clock, kernel).unsigned_abs() as u64;
        beyond = if off > clock.stated_bound() {
            beyond + 1
        } else {
            0
        };
        unbounded = unbounded.max(beyond * STEP);
        off
    };
    kernel.rate_ppb.store(rate_ppb, Ordering::Release);
    for _ in 0..held_ns / STEP {
        run(clock, kernel, STEP, STEP);
        during = during.max(track_bound(clock, kernel));
    }
    kernel.rate_ppb.store(0, Ordering::Release);
    let (mut settled_after, mut rate_error_ppb) = (0, 0);
    for step in 1..=3_000_000_000 / STEP {
        run(clock, kernel, STEP, STEP);
        if track_bound(clock, kernel) > 1_000 {
            settled_after = step * STEP;
        }
        if step * STEP == 1_000_000_000 {
            // The counter runs 20 ppm fast: so many more counts a second
            // of the kernel's, back at its nominal rate.
            let correction = clock.steering().correction_ppb();
            rate_error_ppb = (correction - 20_000).unsigned_abs();
        }
    }
    Followed {
        during,
        settled_after,
        rate_error_ppb,
        unbounded,
    }
}

/// A kernel that says its rate, and a clock on it (its counter 20 ppm fast)
/// run steady for 2 s with reads every 100 µs, up to just after a steering.
fn just_steered() -> (&'static SimKernel, &'static HostClock) {
    const STEP: u64 = 100_000;
    let kernel = SimKernel::leaked();
    kernel.says_rate.store(true, Ordering::Release);
    let clock = clock(kernel, 20);
    run(clock, kernel, 2_000_000_000, STEP);
    let steerings = clock.steering().steerings();
    while clock.steering().steerings() == steerings {
        run(clock, kernel, STEP, STEP);
    }
    (kernel, clock)
}

/// `getres` asks the kernel whether it changed its rate since the last
/// windup: the kernel's rate moves by ±10 % right after a windup that
/// steered, and at every read until the next windup is due (reads every
/// 100 µs, none winding up), the bound it states holds. Where the kernel
/// says no rate, the bound knows of a change from the windup that measures
/// it on ([`the_kernels_rate_changes_are_followed`]).
#[test]
#[cfg_attr(miri, ignore = "steers a host clock")]
fn getres_knows_of_a_change_the_kernel_says() {
    const STEP: u64 = 100_000;
    for rate_ppb in [100_000_000, -100_000_000] {
        let (kernel, clock) = just_steered();
        kernel.rate_ppb.store(rate_ppb, Ordering::Release);
        for step in 1..WINDUP_INTERVAL.as_nanos() as u64 / STEP {
            kernel.advance(STEP);
            let off = offset(clock, kernel).unsigned_abs() as u64;
            let bound = clock.accuracy_nanos();
            assert!(
                off <= bound,
                "{rate_ppb} ppb, {} µs on: {off} ns off, bound {bound} ns",
                step * STEP / 1_000
            );
        }
    }
}

/// How far the clock may stand from CLOCK_MONOTONIC while the kernel's
/// rate is `rate_ppb` off the rate the clock runs at: the rate times a
/// steering interval.
fn distance_allowed(rate_ppb: i64) -> u64 {
    (rate_ppb.unsigned_abs() as u128 * STEER_INTERVAL.as_nanos() / 1_000_000_000) as u64
}

/// The kernel's clock changes rate as NTP daemons change it: the tick ±10 %
/// (`adjtimex --tick`) held a quarter second and ten seconds, the frequency
/// ±500 ppm (ntpd, PTP), chrony's slews of 1 ms and 1 s (8.33 % through the
/// tick, for as long as the slew takes). During each, the clock stays
/// within the rate change times a steering interval (the next windup finds
/// the change, and the hands it publishes runs at the new rate from its
/// switch point), and beyond the bound the windups state only until one
/// finds the change (`getres` asks the kernel too: see
/// [`getres_knows_of_a_change_the_kernel_says`]); after each, it is
/// back within 1 µs, and its rate within 1 ppm, within 1 s: whether the
/// kernel says its rate (Linux's `adjtimex`) or the clock finds it by
/// measurement alone.
#[test]
#[cfg_attr(miri, ignore = "simulated seconds of steering: too slow")]
fn the_kernels_rate_changes_are_followed() {
    let slew = |offset_ns: u64| offset_ns * 1_000_000_000 / CHRONY_PPB as u64;
    let cases = [
        ("tick +10 %, 0.25 s", 100_000_000, 250_000_000),
        ("tick -10 %, 0.25 s", -100_000_000, 250_000_000),
        ("tick +10 %, 10 s", 100_000_000, 10_000_000_000),
        ("tick -10 %, 10 s", -100_000_000, 10_000_000_000),
        ("frequency +500 ppm, 10 s", 500_000, 10_000_000_000),
        ("frequency -500 ppm, 10 s", -500_000, 10_000_000_000),
        ("chrony slewing 1 ms", CHRONY_PPB, slew(1_000_000)),
        ("chrony slewing -1 ms", -CHRONY_PPB, slew(1_000_000)),
        ("chrony slewing 1 s", CHRONY_PPB, slew(1_000_000_000)),
    ];
    for ((what, rate_ppb, held_ns), says_rate) in cases
        .into_iter()
        .flat_map(|case| [(case, true), (case, false)])
    {
        let followed = follow(rate_ppb, held_ns, says_rate);
        let what = format!("{what}, the rate said: {says_rate}");
        println!("{what}: {followed:?}");
        let limit = distance_allowed(rate_ppb);
        assert!(
            followed.during <= limit,
            "{what}: {followed:?}, limit {limit} ns"
        );
        assert!(
            followed.settled_after < 1_000_000_000,
            "{what}: {followed:?}"
        );
        assert!(followed.rate_error_ppb < 1_000, "{what}: {followed:?}");
        // Until the windup that finds the change, the first after it (a
        // windup interval after the last steering is longer than a
        // change's baseline).
        assert!(
            followed.unbounded <= WINDUP_INTERVAL.as_nanos() as u64,
            "{what}: {followed:?}"
        );
    }
}

/// chrony slews while the process is stopped (no read, no windup, for 3 s
/// at +8.33 %): the first read after it stands no further ahead than the
/// hands' promise, never behind an earlier read; the windup it makes puts
/// the clock back on CLOCK_MONOTONIC (the counter ran 250 ms less than the
/// kernel), and once the slew is over the clock is back within 1 µs, and
/// its rate on the kernel's, within a second.
#[test]
#[cfg_attr(miri, ignore = "simulated seconds of steering: too slow")]
fn a_slew_during_a_stop_is_followed() {
    let kernel = SimKernel::leaked();
    kernel.says_rate.store(true, Ordering::Release);
    let clock = clock(kernel, 20);
    run(clock, kernel, 2_000_000_000, 100_000);
    let before = clock.timekeeper().uptime();
    kernel.rate_ppb.store(83_333_333, Ordering::Release);
    kernel.advance(3_000_000_000);
    let first = clock.timekeeper().uptime();
    assert!(first >= before);
    clock.windup();
    assert!(
        offset(clock, kernel).unsigned_abs()
            <= clock.accuracy_nanos() as u128 + 2 * WINDUP_INTERVAL.as_nanos(),
        "{} ns off after the stop",
        offset(clock, kernel)
    );
    run(clock, kernel, 1_000_000_000, 100_000);
    kernel.rate_ppb.store(0, Ordering::Release);
    run(clock, kernel, 1_000_000_000, 100_000);
    assert!(
        offset(clock, kernel).abs() < 1_000,
        "{} ns off a second after the slew",
        offset(clock, kernel)
    );
    let correction = clock.steering().correction_ppb();
    assert!((correction - 20_000).abs() < 1_000, "{correction} ppb");
}

/// chrony's rate, the tick's 8.33 %.
const CHRONY_PPB: i64 = 83_333_333;

/// chrony slews through a `fork()`: the kernel's rate changes after a
/// steering and 1 ms before the fork, so that the parent's clock and the
/// child's copy each find the change alone. The parent reads on every
/// 100 µs; the child's first read comes 300 ms after the fork (a child that
/// starts slowly); the slew ends in both 1 s after it began (the kernel is
/// one). In each, reads never step back; after the child's first windup its
/// clock is within its bound and the promise; the clock stays within the
/// rate change times a steering interval (in the child once [`CATCH_UP`](crate::host::steer::CATCH_UP) has closed its gap); and
/// once the slew is over it is back within 1 µs, its rate on the kernel's,
/// within a second. The forked child reports to the parent, which asserts.
#[test]
#[cfg(unix)]
#[cfg_attr(miri, ignore = "forks")]
fn a_slew_during_a_fork_is_followed() {
    if let Some(why) = crate::host::process_tests::no_fork() {
        println!("skipped: cannot fork here ({why})");
        return;
    }
    let half = "host::simulated_kernel::rate_changes::slew_during_a_fork";
    crate::host::process_tests::assert_half_passes(half, "", &[]);
}

/// The process half of [`a_slew_during_a_fork_is_followed`], run alone in a
/// process of its own (a fork from a test thread would copy other tests'
/// locks).
#[test]
#[cfg(unix)]
#[ignore = "the process half of a_slew_during_a_fork_is_followed, which runs it"]
fn slew_during_a_fork() {
    crate::host::process_tests::report(slew_through_a_fork());
}

/// Forks, checks the parent's clock, then the child's verdict.
#[cfg(unix)]
fn slew_through_a_fork() -> Result<(), String> {
    use crate::host::process_tests::{fork_and, verdict};
    const SLEW: u64 = 1_000_000_000;
    const STEP: u64 = 100_000;
    // Just after a steering: the next one, a steering interval on, comes
    // after the fork.
    let (kernel, clock) = just_steered();
    kernel.rate_ppb.store(CHRONY_PPB, Ordering::Release);
    run(clock, kernel, 1_000_000, STEP);
    let left = SLEW - 1_000_000;
    let pid = fork_and(|| followed_after_fork(clock, kernel, 300_000_000, left).map(drop));
    let parent = followed_after_fork(clock, kernel, 0, left);
    let child = verdict(pid);
    println!("the parent: {parent:?}");
    parent.map_err(|why| format!("the parent: {why}"))?;
    child.map_err(|why| format!("the child: {why}"))
}

/// From a fork on, with the first read `quiet_ns` after it and the kernel's
/// slew over `slew_ns` after it: reads every 100 µs, checked (see
/// [`a_slew_during_a_fork_is_followed`]), through the rest of the slew and
/// 2 s after it. The largest distance during the slew, in ns, or what went
/// wrong.
#[cfg(unix)]
fn followed_after_fork(
    clock: &'static HostClock,
    kernel: &SimKernel,
    quiet_ns: u64,
    slew_ns: u64,
) -> Result<u64, String> {
    const STEP: u64 = 100_000;
    let limit = distance_allowed(CHRONY_PPB);
    let mut last = clock.timekeeper().uptime();
    kernel.advance(quiet_ns);
    let mut first = true;
    let mut during = 0;
    for step in 1..=(slew_ns - quiet_ns + 2_000_000_000) / STEP {
        let since_fork = quiet_ns + step * STEP;
        if since_fork >= slew_ns {
            kernel.rate_ppb.store(0, Ordering::Release);
        }
        kernel.advance(STEP);
        let (now, due) = clock.timekeeper().uptime_and_due();
        if now < last {
            return Err(format!("{since_fork} ns after the fork: {last} then {now}"));
        }
        last = now;
        if due {
            clock.windup();
        }
        let off = offset(clock, kernel).unsigned_abs() as u64;
        let promise = 2 * WINDUP_INTERVAL.as_nanos() as u64;
        if std::mem::take(&mut first) && off > clock.accuracy_nanos() + promise {
            return Err(format!(
                "{off} ns off at the first read, {quiet_ns} ns after the fork; bound {} ns",
                clock.accuracy_nanos()
            ));
        }
        let caught_up = step * STEP > 2 * crate::host::steer::CATCH_UP.as_nanos() as u64;
        if since_fork < slew_ns && (quiet_ns == 0 || caught_up) {
            during = during.max(off);
        }
        if since_fork > slew_ns + 1_000_000_000 && off > 1_000 {
            return Err(format!(
                "{off} ns off {} ns after the slew",
                since_fork - slew_ns
            ));
        }
    }
    if during > limit {
        return Err(format!("{during} ns off during the slew, limit {limit} ns"));
    }
    let correction = clock.steering().correction_ppb();
    if (correction - 20_000).abs() >= 1_000 {
        return Err(format!(
            "a correction of {correction} ppb, the counter's 20 000"
        ));
    }
    Ok(during)
}
