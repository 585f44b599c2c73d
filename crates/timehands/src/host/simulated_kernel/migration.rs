//! A guest's TSC through a live migration: the hypervisor stops the vCPUs,
//! moves them, and resumes them on a host whose TSC may run at another rate
//! (where it cannot scale the guest's TSC) or from another value. The
//! kernel's clock (kvm-clock) is right throughout; the counter is not.

use std::sync::Mutex;

use super::*;

/// A TSC whose rate (ppb off the 1 GHz it states) and value can change at
/// a moment the test picks, counting the simulated boot time.
struct MigratingTsc {
    kernel: &'static SimKernel,
    /// The count and the kernel's running ns at the last change, and the
    /// rate since, ppb off.
    since: Mutex<(u64, u64, i64)>,
}

impl MigratingTsc {
    fn new(kernel: &'static SimKernel) -> MigratingTsc {
        MigratingTsc {
            kernel,
            since: Mutex::new((kernel.running(), kernel.running(), 0)),
        }
    }

    /// From now on the counter runs `ppb` off, after a jump of `jump` counts.
    fn migrate(&self, ppb: i64, jump: i64) {
        let count = self.read().wrapping_add_signed(jump);
        *self.since.lock().expect("the state") = (count, self.kernel.running(), ppb);
    }
}

impl Counter for MigratingTsc {
    fn read(&self) -> u64 {
        let (count, at, ppb) = *self.since.lock().expect("the state");
        let ns = (self.kernel.running() - at) as i128;
        count.wrapping_add((ns + ns * ppb as i128 / 1_000_000_000) as u64)
    }
    fn frequency(&self) -> u64 {
        1_000_000_000
    }
    fn name(&self) -> &str {
        "simulated migrating TSC"
    }
}

/// What the clock did through a migration.
#[derive(Debug)]
struct Migrated {
    /// Whether the clock failed over to the kernel's clock.
    failed_over: bool,
    /// The largest |CLOCK_MONOTONIC − ours| after the migration, ns.
    largest: u64,
    /// The largest amount a read stood beyond the bound `getres` states, ns.
    beyond_bound: u64,
    /// When the read furthest beyond the bound came, ns after the migration.
    beyond_at: u64,
    /// When the clock failed over, ns after the migration.
    failed_at: Option<u64>,
    /// How long after the migration the offset was last above 1 µs, ns.
    settled_after: u64,
    /// Reads that stepped back.
    backward: u64,
}

/// A clock on a migrating TSC run 2 s steady with reads every 100 µs,
/// then stopped for `stop_ns` (no read, the vCPU paused), migrated to a
/// rate `ppb` off and `jump` counts on, and read 3 s more.
fn migrate(ppb: i64, jump: i64, stop_ns: u64) -> Migrated {
    const STEP: u64 = 100_000;
    let kernel = SimKernel::leaked();
    let tsc = Arc::new(MigratingTsc::new(kernel));
    let clock = HostClock::on_test_counter(tsc.clone(), kernel, 0);
    run(clock, kernel, 2_000_000_000, STEP);
    let mut last = clock.timekeeper().uptime();
    kernel.advance(stop_ns);
    tsc.migrate(ppb, jump);
    let mut seen = Migrated {
        failed_over: false,
        beyond_at: 0,
        failed_at: None,
        largest: 0,
        beyond_bound: 0,
        settled_after: 0,
        backward: 0,
    };
    for step in 1..=3_000_000_000 / STEP {
        // A read that finds the clock due winds up, and reads after it.
        let (mut now, due) = clock.timekeeper().uptime_and_due();
        if due {
            clock.windup();
            now = clock.timekeeper().uptime();
        }
        if now < last {
            seen.backward += 1;
        }
        last = now;
        let off = offset(clock, kernel).unsigned_abs() as u64;
        seen.largest = seen.largest.max(off);
        let beyond = off.saturating_sub(clock.accuracy_nanos());
        if beyond > seen.beyond_bound {
            seen.beyond_bound = beyond;
            seen.beyond_at = step * STEP;
        }
        if seen.failed_at.is_none() && clock.facts().fallback.is_some() {
            seen.failed_at = Some(step * STEP);
        }
        if off > 1_000 {
            seen.settled_after = step * STEP;
        }
        kernel.advance(STEP);
    }
    seen.failed_over = clock.facts().fallback.is_some();
    seen
}

/// Runs `migrate` for each case, printing what it saw.
fn each(cases: &[(&str, i64, i64, u64)]) -> Vec<(String, Migrated)> {
    cases
        .iter()
        .map(|&(what, ppb, jump, stop)| {
            let seen = migrate(ppb, jump, stop);
            println!("{what}: {seen:?}");
            (what.to_string(), seen)
        })
        .collect()
}

/// How long after a change the steering that finds it may come: the
/// first windup after a steering interval from the last steering.
const FOUND_WITHIN: Duration =
    Duration::from_nanos(STEER_INTERVAL.as_nanos() as u64 + WINDUP_INTERVAL.as_nanos() as u64);

/// Reads beyond the bound come only before the steering that measures the
/// change (no counter reading shows a rate change: only the kernel's clock
/// does, at a steering), and by no more than the change over that time;
/// none step back; the clock is back within 1 µs within 1 s.
fn assert_common(what: &str, seen: &Migrated, ppb: i64) {
    let limit = (ppb.unsigned_abs() as u128 * FOUND_WITHIN.as_nanos() / 1_000_000_000) as u64;
    assert_eq!(seen.backward, 0, "{what}: {seen:?}");
    assert!(seen.settled_after < 1_000_000_000, "{what}: {seen:?}");
    assert!(
        seen.beyond_bound <= limit,
        "{what}: {seen:?}, limit {limit} ns"
    );
    assert!(
        seen.beyond_at <= FOUND_WITHIN.as_nanos() as u64,
        "{what}: {seen:?}"
    );
}

/// A migration to a host whose TSC runs 0.05 % or 0.1 % faster or slower
/// (within the watchdog's 1000 ppm) is followed on the counter: found at
/// the next steering, the bound true from there on, back within 1 µs
/// within 1 s, never a step back.
#[test]
#[cfg_attr(miri, ignore = "simulated seconds of steering: too slow")]
fn a_small_rate_change_is_followed() {
    let cases = [
        ("+0.05 %", 500_000, 0, 0),
        ("-0.05 %", -500_000, 0, 0),
        ("+0.1 %", 1_000_000, 0, 0),
        ("-0.1 %", -1_000_000, 0, 0),
    ];
    for ((what, seen), case) in each(&cases).iter().zip(cases) {
        assert!(!seen.failed_over, "{what}: {seen:?}");
        assert_common(what, seen, case.1);
    }
}

/// A migration to a host whose TSC runs 1 % or 10 % faster or slower is
/// failed over to the kernel's clock at the steering that finds it, not
/// followed: a rate change beyond the watchdog's 1000 ppm is what it
/// retires a counter for (the guest cannot tell a migration from a TSC
/// gone wrong, nor know that its vCPUs' TSCs still agree), and the
/// kernel's paravirtual clock is the one the hypervisor corrects. From
/// the failover on every read is within the bound (the reads standing at
/// the retired counter's last time are counted in it), none steps back,
/// and the clock is back within 1 µs within 1 s. A vCPU stopped for 3 s
/// across the migration changes none of it.
#[test]
#[cfg_attr(miri, ignore = "simulated seconds of steering: too slow")]
fn a_large_rate_change_fails_over() {
    let cases = [
        ("+1 %", 10_000_000, 0, 0),
        ("-1 %", -10_000_000, 0, 0),
        ("+10 %", 100_000_000, 0, 0),
        ("-10 %", -100_000_000, 0, 0),
        ("stopped 3 s, +10 %", 100_000_000, 0, 3_000_000_000),
        ("stopped 3 s, -10 %", -100_000_000, 0, 3_000_000_000),
    ];
    for ((what, seen), case) in each(&cases).iter().zip(cases) {
        let failed_at = seen.failed_at.expect("a failover");
        assert!(seen.beyond_at < failed_at, "{what}: {seen:?}");
        assert!(
            failed_at <= FOUND_WITHIN.as_nanos() as u64,
            "{what}: {seen:?}"
        );
        assert_common(what, seen, case.1);
    }
}

/// A TSC that jumps a second on or back (a migration to a host whose TSC
/// the hypervisor did not offset) fails over at the next steering: reads
/// stand meanwhile (at most the hands' promise ahead, never back), the
/// bound is true from the failover on, and the clock is back within 1 µs
/// within 1 s.
#[test]
#[cfg_attr(miri, ignore = "simulated seconds of steering: too slow")]
fn a_jump_fails_over() {
    let promise = 2 * WINDUP_INTERVAL.as_nanos() as u64;
    for (what, seen) in each(&[
        ("jump +1 s", 0, 1_000_000_000, 0),
        ("jump -1 s", 0, -1_000_000_000, 0),
    ]) {
        let failed_at = seen.failed_at.expect("a failover");
        assert!(seen.beyond_at < failed_at, "{what}: {seen:?}");
        assert!(seen.beyond_bound <= promise, "{what}: {seen:?}");
        assert!(
            failed_at <= FOUND_WITHIN.as_nanos() as u64,
            "{what}: {seen:?}"
        );
        assert_eq!(seen.backward, 0, "{what}: {seen:?}");
        assert!(seen.settled_after < 1_000_000_000, "{what}: {seen:?}");
    }
}

/// A vCPU the hypervisor stops for 3 s or 30 s, its TSC counting on (as
/// KVM's does): the first read after it winds up and is on
/// CLOCK_MONOTONIC, every read is within the bound, none steps back, and
/// the counter is kept.
#[test]
#[cfg_attr(miri, ignore = "simulated seconds of steering: too slow")]
fn a_vcpu_stopped_for_seconds_keeps_time() {
    for (what, seen) in each(&[
        ("stopped 3 s", 0, 0, 3_000_000_000),
        ("stopped 30 s", 0, 0, 30_000_000_000),
    ]) {
        assert!(!seen.failed_over, "{what}: {seen:?}");
        assert_eq!(seen.beyond_bound, 0, "{what}: {seen:?}");
        assert_eq!(seen.backward, 0, "{what}: {seen:?}");
        assert!(seen.largest < 1_000, "{what}: {seen:?}");
    }
}
