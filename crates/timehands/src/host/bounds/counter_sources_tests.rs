//! Steps against the sources that keep a clock on the CPU's counter, from
//! pages the tests write as their formats say: ClockBound 3's `shm1`, and a
//! VMClock device's page through a played migration (its marker changed,
//! the counter's rate 1 % off and the time 200 µs off after it). The
//! truth here is the kernel's CLOCK_REALTIME, which the pages' clocks are
//! written to follow.

use std::ffi::CStr;
use std::os::unix::fs::FileExt;

use super::*;
use crate::host::bounds::clockbound3::tests::page as clockbound3_page;
use crate::host::bounds::ticking::counter;
use crate::host::bounds::vmclock::tests::page as vmclock_page;
use crate::host::bounds::{BoundsSource, RealtimeBounds, from_state};

/// A path of the test's own, as a C string that lives as long as the test.
fn path(name: &str) -> (std::path::PathBuf, &'static CStr) {
    let path = std::env::temp_dir().join(format!("timehands-{name}-{}", std::process::id()));
    let c = std::ffi::CString::new(path.to_str().expect("UTF-8")).expect("no NUL");
    (path, Box::leak(c.into_boxed_c_str()))
}

/// The counter's rate, Hz, and a counter value with the kernel's
/// CLOCK_REALTIME at it: each the narrowest of a few reads between two
/// reads of the kernel's clocks, so that a preemption does not count.
fn counter_and_realtime() -> (f64, u64, u64) {
    let pair = || {
        (0..5)
            .map(|_| {
                let before = kernel_now(KernelClock::Realtime);
                let count = counter();
                let after = kernel_now(KernelClock::Realtime);
                (after - before, count, before / 2 + after / 2)
            })
            .min()
            .expect("five reads")
    };
    let (_, c0, t0) = pair();
    std::thread::sleep(Duration::from_millis(20));
    let (_, c1, t1) = pair();
    ((c1 - c0) as f64 / (t1 - t0) as f64 * 1e9, c1, t1)
}

/// Sources that ask nothing but the pages at `clockbound3` and `vmclock`.
fn sources(clockbound3: &'static CStr, vmclock: &'static CStr) -> Sources {
    Sources {
        clockbound: Page::new(c"/nonexistent/shm0"),
        clockbound3: Page::new(clockbound3),
        vmclock,
        ..Sources::new(std::process::id(), None)
    }
}

/// The bounds a read at this moment gets from `state`, and the truth (the
/// kernel's CLOCK_REALTIME) read around it.
fn read_now(state: &State) -> (Result<RealtimeBounds, crate::Error>, u64, u64) {
    let before = kernel_now(KernelClock::Realtime);
    let bounds = from_state(realtime_now(), 0, None, state);
    (bounds, before, kernel_now(KernelClock::Realtime))
}

/// Whether `bounds` may hold the truth of a moment between `before` and
/// `after` (the read's: the interval meets that span; a preemption widens
/// the span, never the interval).
fn holds(bounds: &RealtimeBounds, before: u64, after: u64) -> bool {
    bounds.earliest.as_nanos() <= u128::from(after)
        && u128::from(before) <= bounds.latest.as_nanos()
}

/// ClockBound 3's page, its clock on the counter: the bound is the
/// daemon's own, computed at the read from the counter, and true; a
/// disrupted page gives none; a void one is passed over.
#[test]
#[cfg_attr(miri, ignore = "maps a file, reads the counter")]
fn clockbound_3_s_page_gives_its_clock_s_bound() {
    let (file, c_path) = path("shm1");
    let (hz, at, time) = counter_and_realtime();
    std::fs::write(&file, clockbound3_page(at, time, hz, 100_000, 1)).expect("a page");
    let mut sources = sources(c_path, c"/nonexistent/vmclock0");
    let (state, wait) = sources.advance();
    let state = state.expect("ClockBound 3's state");
    assert_eq!(
        (state.source, state.status, wait),
        (
            BoundsSource::ClockBound3,
            Some(BoundsStatus::Synchronized),
            REFRESH_INTERVAL
        )
    );
    for _ in 0..3 {
        let (bounds, before, after) = read_now(&state);
        let bounds = bounds.expect("a bound");
        assert!(holds(&bounds, before, after), "{bounds:?} {before} {after}");
        // The daemon's 100 µs, its growth over the test, our Realtime's own
        // bound against the kernel's, and as far as the read's counter read
        // and its Realtime read may stand apart: within the read's span
        // (tens of µs under an emulator).
        let ours = crate::getres(crate::ClockId::Realtime).accuracy.as_nanos();
        let span = u128::from(after - before);
        let half = bounds.half_width().as_nanos();
        assert!(
            (100_000..101_000 + ours + span).contains(&half),
            "{half} (ours {ours}, the read's span {span})"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::fs::write(&file, clockbound3_page(at, time, hz, 100_000, 3)).expect("disrupted");
    sources.clockbound3.unmap();
    let (state, _) = sources.advance();
    let state = state.expect("a state");
    assert_eq!(
        (state.source, state.status),
        (BoundsSource::ClockBound3, None)
    );
    // Void since a second ago (its `void_after`, bytes 40 to 55).
    let mut void = clockbound3_page(at, time, hz, 100_000, 1);
    let void_after = time / 1_000_000_000 - 1;
    void[40..48].copy_from_slice(&(void_after as i64).to_ne_bytes());
    std::fs::write(&file, void).expect("void");
    sources.clockbound3.unmap();
    let (state, _) = sources.advance();
    assert_ne!(state.map(|s| s.source), Some(BoundsSource::ClockBound3));
    std::fs::remove_file(&file).expect("removed");
}

/// The child half of the played migration (a process of its own: the
/// device, once mapped, stays the process's).
pub(crate) fn a_migration_played() -> Result<(), String> {
    let (file, c_path) = path("vmclock0");
    let (hz, at, time) = counter_and_realtime();
    std::fs::write(&file, vmclock_page(1, at, time, hz, 50_000)).map_err(|e| e.to_string())?;
    let chronyd = super::super::fake_chronyd::FakeChronyd::start();
    let mut sources = sources(c"/nonexistent/shm1", c_path);
    // The device's clock, chronyd not asked.
    let (state, _) = sources.advance();
    let (state, _) = match state {
        None => sources.advance(),
        Some(state) => (Some(state), REFRESH_INTERVAL),
    };
    let before = state.ok_or("no state from the device")?;
    if (before.source, before.marker) != (BoundsSource::VmClock, Some(1)) {
        return Err(format!("not the device's clock: {before:?}"));
    }
    let (bounds, t0, t1) = read_now(&before);
    let bounds = bounds.map_err(|e| format!("no bound before the migration: {e}"))?;
    if !holds(&bounds, t0, t1) {
        return Err(format!("false before the migration: {bounds:?} {t0} {t1}"));
    }
    // chronyd answers too: its state, marked.
    sources.address = Some(chronyd.address);
    sources.advance();
    chronyd.wait_answered(1);
    let (chronyd_state, _) = super::tests::published(&mut sources);
    if (chronyd_state.source, chronyd_state.marker) != (BoundsSource::Chronyd, Some(1)) {
        return Err(format!("chronyd's state unmarked: {chronyd_state:?}"));
    }
    // The migration: the page rewritten in place (its mapping stays) as the
    // hypervisor does, the sequence odd while it writes; the new host's
    // counter 1 % faster, its time 200 µs ahead of the old clock's.
    let (_, at, time) = counter_and_realtime();
    let new_hz = hz * 1.01;
    let mut new_page = vmclock_page(2, at, time + 200_000, new_hz, 50_000);
    let device = std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .map_err(|e| e.to_string())?;
    device
        .write_at(&1u32.to_le_bytes(), 12)
        .map_err(|e| e.to_string())?;
    device
        .write_at(&new_page[16..], 16)
        .map_err(|e| e.to_string())?;
    // Every read after the marker changed: no bound, from either state,
    // though the old clock alone would be false by then.
    for state in [&before, &chronyd_state] {
        if let (Ok(bounds), _, _) = read_now(state) {
            return Err(format!("a bound after the marker changed: {bounds:?}"));
        }
    }
    let now = counter();
    let truth = time + 200_000 + ((now - at) as f64 / new_hz * 1e9) as u64;
    let (below, above) = before.counter.ok_or("no clock")?.around(truth, now);
    if below > 0 && above > 0 {
        return Err(format!(
            "the old clock holds the new truth ({below}, {above}): the test plays nothing"
        ));
    }
    new_page[12..16].copy_from_slice(&2u32.to_le_bytes());
    device
        .write_at(&new_page[12..16], 12)
        .map_err(|e| e.to_string())?;
    // chronyd's answers are of its update before the migration: none
    // from them, until its next update (the test's chronyd makes none).
    sources.advance();
    chronyd.wait_answered(2);
    let (after_chronyd, _) = super::tests::published(&mut sources);
    if (after_chronyd.status, after_chronyd.marker) != (None, Some(2)) {
        return Err(format!(
            "chronyd's bound from before the migration: {after_chronyd:?}"
        ));
    }
    // Without chronyd, the device's new clock answers again: true.
    drop(chronyd);
    sources.address = None;
    sources.chronyd = None;
    let (state, _) = sources.advance();
    let after = state.ok_or("no state after the migration")?;
    let truth = |now: u64| time + 200_000 + ((now - at) as f64 / new_hz * 1e9) as u64;
    let first = truth(counter());
    let (bounds, _, _) = read_now(&after);
    let last = truth(counter());
    let bounds = bounds.map_err(|e| format!("no bound from the new clock: {e}"))?;
    if after.source != BoundsSource::VmClock || !holds(&bounds, first, last) {
        return Err(format!(
            "the new clock's bound {bounds:?} misses {first} to {last}"
        ));
    }
    std::fs::remove_file(&file).map_err(|e| e.to_string())?;
    println!("no bound at the reads after the marker changed; the new clock's true");
    Ok(())
}
