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
    /// pile.
    pub(super) spell: Spell,
    /// The control: the same counts over a spell as long, later in the
    /// window, in which the arming thread spins as long as arming took,
    /// then waits as it waited for the workers; `None` if the window had
    /// no room left for it.
    pub(super) control: Option<Spell>,
}

/// The soft timers' counts over a spell of the window, as JSON names them.
#[derive(Clone, Copy, Default, Serialize)]
pub(super) struct Spell {
    /// From the spell's start until its counts were taken: once the
    /// timers due by its end were all past their bound and taken.
    pub(super) span_ms: f64,
    /// Soft expiries in that span, those beyond their bound and why, and
    /// how long the soft workers waited for a CPU.
    pub(super) soft_expiries: u64,
    pub(super) soft_beyond_bound: u64,
    pub(super) soft_beyond_bound_behind_callbacks: u64,
    pub(super) soft_beyond_bound_stalled: u64,
    pub(super) soft_workers_waited_for_cpu_ms: f64,
}

impl Pile {
    /// Its target: none of the soft timers due while it went in beyond
    /// their bound, and all of it in the workers' wheel before the
    /// window's end.
    pub(super) fn met(&self) -> bool {
        self.spell.soft_beyond_bound == 0 && self.applied_ms.is_some()
    }
}

/// Arms a pile of as many one-shot soft timers as the storm has, due after
/// the window (`end`), back to back from this thread, as a server arms a
/// timeout per connection after a reconnect storm: how long that takes,
/// how long until the workers have them all, and how the soft timers due
/// meanwhile fared. A due soft timer waits for no more than a batch of
/// requests, so it keeps its bound as long as the workers have the CPU its
/// callbacks need. Whether they had is what the control measures: the
/// same spell later, with this thread taking the CPU as arming did but
/// arming nothing.
pub(super) fn pile(service: &TimerService, storm: &Storm, end: Instant) -> Pile {
    let before = service.statistics().soft;
    let later = end + Duration::from_secs(1);
    let began = timehands::now();
    for _ in 0..storm.soft {
        service.soft_at(later, storm.slack, |_| {});
    }
    let armed = timehands::now();
    let applied = through_the_wheel(service, storm, end);
    let spell = counts_over(storm, service, &before, began, applied.unwrap_or(end), end);
    let control = applied.and_then(|applied| {
        let (long, arming) = (applied - began, armed - began);
        // A timer another worker took before the counts were, and has yet
        // to start, is the pile's: it starts within that worker's batch.
        let from = storm.past_bound(timehands::now());
        (storm.past_bound(from + long) <= end).then(|| {
            sleep_until(from);
            let before = service.statistics().soft;
            let began = timehands::now();
            spin(arming);
            counts_over(storm, service, &before, began, began + long, end)
        })
    });
    Pile {
        timers: storm.soft,
        arming_ms: ms(armed - began),
        applied_ms: applied.map(|applied| ms(applied - began)),
        spell,
        control,
    }
}

/// When a soft timer armed now, due at once, fired (`None` if not before
/// `end`): requests are applied oldest first, and due timers taken before
/// requests, so then every request pushed before it is in the wheel and
/// every timer due before it applied has been taken.
///
/// It waits by design, and must not count among the timers held up: a
/// deadline `reach` in the past and a slack of twice that file it in the
/// past (due as soon as it is in the wheel), and put its bound, which
/// runs from when it was armed, past the window's end.
fn through_the_wheel(service: &TimerService, storm: &Storm, end: Instant) -> Option<Instant> {
    let now = timehands::now();
    let reach = end.duration_since(now) + storm.soft_tick();
    let deadline = now.checked_sub(reach).unwrap_or_default();
    let (tx, rx) = mpsc::channel();
    service.soft_at(deadline, reach * 2, move |_| {
        let _ = tx.send(timehands::now());
    });
    rx.recv_timeout(end.duration_since(timehands::now())).ok()
}

/// The soft counts of `service` since `before`, over a spell from `began`
/// to `ended`, taken once every timer due by `ended` is past its bound and
/// taken by a worker (or at the window's `end`, if sooner): a count is
/// made when its callback starts.
fn counts_over(
    storm: &Storm,
    service: &TimerService,
    before: &SideStatistics,
    began: Instant,
    ended: Instant,
    end: Instant,
) -> Spell {
    sleep_until(storm.past_bound(ended).min(end));
    through_the_wheel(service, storm, end);
    let counted = timehands::now().min(end);
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
