//! The pile of `timehands timers`: as many soft timers again, armed at
//! once in the middle of the loaded window, how the soft timers due while
//! it goes in fare, and the control, a spell as long in which the arming
//! thread only spins.

use std::sync::mpsc;
use std::time::Duration;

use serde::Serialize;
use timehands::Instant;
use timehands_timer::{SideStatistics, TimerService, sleep_until};

use super::{Storm, ms, since, spin};

/// A pile of soft timers armed at once in the middle of the window, as
/// JSON names it.
#[derive(Clone, Copy, Default, Serialize)]
pub(super) struct Pile {
    pub(super) timers: usize,
    /// How long the arming thread took to arm them.
    pub(super) arming_ms: f64,
    /// From the first arm until the workers had them all (a timer armed
    /// after the pile, due at once, fired); `None` if that was not before
    /// the window's end.
    pub(super) applied_ms: Option<f64>,
    /// The soft timers due from the first arm until the workers had the
    /// pile, counted until the last of them is past its bound.
    pub(super) spell: Spell,
    /// The control: the same counts over a spell as long as the pile's
    /// (from the first arm to the pile in the wheel) in which the arming
    /// thread only spins, taking a CPU as arming did, later in the window;
    /// `None` if the window ended first.
    pub(super) busy: Option<Spell>,
}

/// The soft timers' counts over a spell of the window, as JSON names them.
#[derive(Clone, Copy, Default, Serialize)]
pub(super) struct Spell {
    /// From the spell's start until a timer due at its end is past its
    /// bound.
    pub(super) span_ms: f64,
    /// Soft expiries in that span, those beyond their bound and why, and
    /// how long the soft workers waited for a CPU.
    pub(super) soft_expiries: u64,
    pub(super) soft_beyond_bound: u64,
    pub(super) soft_beyond_bound_behind_callbacks: u64,
    pub(super) soft_beyond_bound_stalled: u64,
    pub(super) soft_workers_waited_for_cpu_ms: f64,
}

/// Arms a pile of as many one-shot soft timers as the storm has, due after
/// the window (`end`), back to back from this thread, as a server arms a
/// timeout per connection after a reconnect storm: how long that takes,
/// how long until the workers have them all, and how the soft timers due
/// meanwhile fared. A due soft timer waits for no more than a batch of
/// requests, so it keeps its bound as long as the workers have the CPU its
/// callbacks need. Whether they had is what the control measures: a spell
/// as long, later in the window, in which this thread spins instead.
pub(super) fn pile(service: &TimerService, storm: &Storm, end: Instant) -> Pile {
    let before = service.statistics().soft;
    let later = end + Duration::from_secs(1);
    let began = timehands::now();
    for _ in 0..storm.soft {
        service.soft_at(later, storm.slack, |_| {});
    }
    let armed = timehands::now();
    // Requests are applied oldest first: one armed after the pile and due
    // at once fires once the pile is in. It waits for the pile by design,
    // so it must not count as a timer the pile held up: a deadline `reach`
    // in the past and a slack of twice that file it in the past (due as
    // soon as it is in the wheel), and put its bound, which runs from when
    // it was armed, past the window's end.
    let reach = end.duration_since(armed) + storm.soft_tick();
    let deadline = Instant::from_nanos(armed.as_nanos().saturating_sub(reach.as_nanos() as u64));
    let (tx, rx) = mpsc::channel();
    service.soft_at(deadline, reach * 2, move |_| {
        let _ = tx.send(timehands::now());
    });
    // Not past the window's end, which the pile must not stretch.
    let applied = rx.recv_timeout(end.duration_since(timehands::now())).ok();
    let spell = counts_over(
        storm,
        service,
        &before,
        began,
        applied.unwrap_or(end).min(end),
        end,
    );
    let busy = applied.and_then(|applied| {
        let long = applied - began;
        let from = timehands::now() + storm.slack + storm.soft_tick() * 4;
        // The control, when the window has room for it.
        (from + long + storm.slack + storm.soft_tick() * 2 <= end).then(|| {
            sleep_until(from);
            let before = service.statistics().soft;
            spin(long);
            counts_over(storm, service, &before, from, from + long, end)
        })
    });
    Pile {
        timers: storm.soft,
        arming_ms: ms(armed - began),
        applied_ms: applied.map(|applied| ms(applied - began)),
        spell,
        busy,
    }
}

/// The soft counts of `service` since `before`, over a spell from
/// `began` to `ended`, taken once a timer due at `ended` would be past
/// its bound (or at the window's `end`, if sooner).
fn counts_over(
    storm: &Storm,
    service: &TimerService,
    before: &SideStatistics,
    began: Instant,
    ended: Instant,
    end: Instant,
) -> Spell {
    let counted = (ended + storm.slack + storm.soft_tick() * 2).min(end);
    sleep_until(counted);
    let soft = since(before, &service.statistics().soft);
    Spell {
        span_ms: ms(counted.duration_since(began)),
        soft_expiries: soft.fired,
        soft_beyond_bound: soft.beyond_bound,
        soft_beyond_bound_behind_callbacks: soft.beyond_bound_behind_callbacks,
        soft_beyond_bound_stalled: soft.beyond_bound_stalled,
        soft_workers_waited_for_cpu_ms: ms(soft.waited_for_cpu),
    }
}
