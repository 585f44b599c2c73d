//! The timing wheel with time driven by hand: every timer fires exactly once,
//! never before its deadline, and by `deadline + max(slack / 2, tick - 1)`
//! at the latest (so within `deadline + slack / 2 + tick`);
//! cancel before, during and after expiry; coalescing; a property test
//! against a plain list of timers.

use std::collections::BTreeMap;

use proptest::prelude::*;
use timehands_timer::wheel::{Wheel, WheelKey};

const SHIFT: u32 = 10;
const TICK: u64 = 1 << SHIFT;

/// A plain list of armed timers (id -> deadline, slack): the reference the
/// wheel is checked against.
#[derive(Default)]
struct Model {
    armed: BTreeMap<usize, (u64, u64)>,
}

impl Model {
    /// Polls `wheel` dry at `now`, two steps per call as an expiry thread
    /// bounding its rounds would, and checks what fired against the model:
    /// each fired timer was armed (so fires once) and due; no timer whose
    /// latest allowed time has passed is left.
    fn advance(&mut self, wheel: &mut Wheel<usize>, now: u64) {
        loop {
            let mut budget = 2;
            let Some(id) = wheel.poll_bounded(now, &mut budget) else {
                if budget == 0 {
                    // Perhaps stopped short of a due timer.
                    continue;
                }
                break;
            };
            let (deadline, _) = self
                .armed
                .remove(&id)
                .unwrap_or_else(|| panic!("timer {id} fired twice or after cancel"));
            assert!(
                deadline <= now,
                "timer {id} due {deadline} fired early at {now}"
            );
        }
        for (id, &(deadline, slack)) in &self.armed {
            assert!(
                latest(deadline, slack) > now,
                "timer {id} due {deadline} slack {slack} not fired at {now}"
            );
        }
        assert_eq!(wheel.len(), self.armed.len());
    }
}

/// The time by which a timer must have fired: the end of the first half of
/// its slack (the wheel coalesces within it), or the first tick boundary
/// after its deadline when that half holds none. Well within the timer
/// service's bound, `deadline + slack + tick`.
fn latest(deadline: u64, slack: u64) -> u64 {
    deadline.saturating_add((slack / 2).max(TICK - 1))
}

/// Deterministic pseudo-random numbers (an LCG) for the scripted tests.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 11
}

#[test]
fn every_timer_fires_once_within_its_window_on_every_level() {
    let mut wheel = Wheel::new(SHIFT);
    let mut model = Model::default();
    let mut seed = 7;
    let mut checkpoints = Vec::new();
    for id in 0..3000 {
        // Deadlines from a few ticks to 2^50 ns away, so every level holds
        // some; slacks from none to many ticks.
        let reach = 1u64 << (lcg(&mut seed) % 50 + 1);
        let deadline = 5_000 + lcg(&mut seed) % reach;
        let slack = [0, 1, TICK - 1, TICK, 10 * TICK, lcg(&mut seed) % reach][id % 6];
        wheel.insert(deadline, slack, id);
        model.armed.insert(id, (deadline, slack));
        let end = latest(deadline, slack);
        checkpoints.extend([deadline - 1, deadline, end - 1, end]);
    }
    checkpoints.sort_unstable();
    for now in checkpoints {
        model.advance(&mut wheel, now);
    }
    assert!(model.armed.is_empty() && wheel.is_empty());
}

#[test]
fn polling_at_each_next_deadline_fires_everything_in_its_window() {
    // What an expiry thread does: sleep until next_deadline, poll, repeat.
    let mut wheel = Wheel::new(SHIFT);
    let mut model = Model::default();
    let mut seed = 11;
    for id in 0..2000 {
        let deadline = 1 + lcg(&mut seed) % (1 << 30);
        let slack = lcg(&mut seed) % (1 << 20);
        wheel.insert(deadline, slack, id);
        model.armed.insert(id, (deadline, slack));
    }
    let mut now = 0;
    while let Some(next) = wheel.next_deadline() {
        assert!(next >= now, "next deadline {next} before now {now}");
        now = next;
        model.advance(&mut wheel, now);
    }
    assert!(model.armed.is_empty());
}

#[test]
fn cancel_before_during_and_after_expiry() {
    let mut wheel = Wheel::new(SHIFT);
    let before = wheel.insert(10 * TICK, 0, 0);
    let burst: Vec<WheelKey> = (1..=3).map(|id| wheel.insert(20 * TICK, 0, id)).collect();

    // Before: the timer never fires.
    assert_eq!(wheel.remove(before), Some(0));
    assert_eq!(wheel.poll(15 * TICK), None);

    // During: the burst is due; one fired, the next cancelled before it is
    // polled, the third still fires.
    assert_eq!(wheel.poll(20 * TICK), Some(1));
    assert_eq!(wheel.remove(burst[1]), Some(2));
    assert_eq!(wheel.poll(20 * TICK), Some(3));
    assert_eq!(wheel.poll(20 * TICK), None);

    // After: a fired timer cannot be cancelled or rescheduled.
    assert_eq!(wheel.remove(burst[0]), None);
    assert!(!wheel.reschedule(burst[2], 40 * TICK, 0));
    assert!(wheel.is_empty());
}

#[test]
fn a_stale_key_does_not_cancel_the_timer_that_reused_its_slot() {
    let mut wheel = Wheel::new(SHIFT);
    let first = wheel.insert(TICK, 0, "first");
    assert_eq!(wheel.poll(TICK), Some("first"));
    let second = wheel.insert(2 * TICK, 0, "second");
    assert_eq!(wheel.remove(first), None);
    assert_eq!(wheel.remove(second), Some("second"));
}

#[test]
fn reschedule_moves_a_timer_both_ways() {
    let mut wheel = Wheel::new(SHIFT);
    let later = wheel.insert(5 * TICK, 0, "later");
    let sooner = wheel.insert(1 << 30, 0, "sooner");
    assert!(wheel.reschedule(later, 1 << 25, 0));
    assert!(wheel.reschedule(sooner, 3 * TICK, 0));
    assert_eq!(wheel.poll(5 * TICK), Some("sooner"));
    assert_eq!(wheel.poll((1 << 25) - 1), None);
    assert_eq!(wheel.poll(1 << 25), Some("later"));
}

#[test]
fn timers_with_overlapping_windows_fire_together() {
    let mut wheel = Wheel::new(SHIFT);
    // Deadlines spread over eight ticks, each with 16 ticks of slack: one
    // tick lies in every window.
    let base = 1000 * TICK + 7;
    for id in 0..16 {
        wheel.insert(base + id * TICK / 2, 16 * TICK, id);
    }
    let mut now = base;
    let fired_at = loop {
        if let Some(id) = wheel.poll(now) {
            let mut fired = vec![id];
            fired.extend(std::iter::from_fn(|| wheel.poll(now)));
            assert_eq!(fired.len(), 16, "only {fired:?} fired at {now}");
            break now;
        }
        now += TICK;
    };
    let last_deadline = base + 15 * TICK / 2;
    assert!(fired_at >= last_deadline && fired_at <= base + 16 * TICK + TICK);
}

#[test]
fn deadlines_at_the_end_of_time_fire_and_do_not_wrap() {
    let mut wheel = Wheel::new(SHIFT);
    wheel.insert(u64::MAX - 5, u64::MAX, "end");
    wheel.insert(u64::MAX, 0, "last");
    assert_eq!(wheel.poll(u64::MAX - 6), None);
    let mut fired = vec![];
    fired.extend(std::iter::from_fn(|| wheel.poll(u64::MAX)));
    fired.sort_unstable();
    assert_eq!(fired, ["end", "last"]);
}

/// Drives `wheel` as the service's soft workers do: at every tick from 1 to
/// `ticks`, rounds of at most 256 steps until a round has steps to spare.
/// Each fired timer is checked to be in its window (`deadlines[id]` to
/// `latest`), then re-armed `period(id)` later if it is periodic. Returns the most moves (steps
/// that fired nothing) made at one tick before one of its due timers came
/// out, and how many timers fired.
fn most_moves_before_a_due_timer(
    wheel: &mut Wheel<usize>,
    deadlines: &mut [u64],
    slack: u64,
    ticks: u64,
    period: impl Fn(usize) -> Option<u64>,
) -> (usize, usize) {
    const BATCH: usize = 256;
    let (mut most, mut fired) = (0, 0);
    for tick in 1..=ticks {
        let now = tick * TICK;
        let (mut steps, mut fired_here) = (0, 0);
        loop {
            let mut budget = BATCH;
            while let Some(id) = wheel.poll_bounded(now, &mut budget) {
                let deadline = deadlines[id];
                assert!(deadline <= now && now <= latest(deadline, slack));
                fired_here += 1;
                most = most.max(steps + BATCH - budget - fired_here);
                if let Some(period) = period(id) {
                    deadlines[id] = deadline + period;
                    wheel.insert(deadlines[id], slack, id);
                }
            }
            steps += BATCH - budget;
            if budget > 0 {
                break;
            }
        }
        fired += fired_here;
    }
    assert!(wheel.next_deadline().is_none_or(|next| next > ticks * TICK));
    (most, fired)
}

#[test]
fn due_timers_wait_behind_no_moves_at_nine_thousand_timers_a_slot() {
    // The service's soft load, in ticks: 100 000 periodic timers with
    // periods of 512 to 1024 ticks and almost a tick of slack, some 140
    // expiries a tick, 9000 in each slot of level 1 (64 ticks). Moving a
    // slot down when it starts put every one of its moves in front of the
    // timers due at its first tick: some 9000 of them.
    let mut wheel = Wheel::new(SHIFT);
    let mut seed = 3;
    let periods: Vec<u64> = (0..100_000)
        .map(|_| (512 + lcg(&mut seed) % 513) * TICK + lcg(&mut seed) % TICK)
        .collect();
    let slack = TICK - 24;
    let mut deadlines: Vec<u64> = periods
        .iter()
        .enumerate()
        .map(|(id, &period)| {
            let deadline = 1 + lcg(&mut seed) % period;
            wheel.insert(deadline, slack, id);
            deadline
        })
        .collect();
    // Past a block of level 1 (4096 ticks), so slots of both levels above
    // 0 come due.
    let (most, fired) =
        most_moves_before_a_due_timer(&mut wheel, &mut deadlines, slack, 4200, |id| {
            Some(periods[id])
        });
    assert!(fired > 500_000, "only {fired} fired");
    assert_eq!(most, 0, "a due timer came out after {most} moves");
}

#[test]
fn due_timers_wait_behind_no_moves_when_a_slot_of_level_two_comes_due() {
    // 20 000 one-shot timers spread over the third block of level 1 (ticks
    // 8192 to 12287), filed on level 2 at the start: its whole slot comes
    // down to level 1 at once, or over the block before.
    let mut wheel = Wheel::new(SHIFT);
    let mut seed = 5;
    let mut deadlines: Vec<u64> = (0..20_000)
        .map(|id| {
            let deadline = 8192 * TICK + lcg(&mut seed) % (4096 * TICK);
            wheel.insert(deadline, 0, id);
            deadline
        })
        .collect();
    let (most, fired) =
        most_moves_before_a_due_timer(&mut wheel, &mut deadlines, 0, 12_288, |_| None);
    assert!(fired == 20_000 && wheel.is_empty());
    assert_eq!(most, 0, "a due timer came out after {most} moves");
}

#[derive(Clone, Debug)]
enum Op {
    Insert { ahead: u64, slack: u64 },
    Cancel(usize),
    Reschedule { which: usize, ahead: u64 },
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    // Distances as powers of two times a mantissa reach every level.
    let distance = (0u32..40, 0u64..1024).prop_map(|(exp, m)| m << exp);
    prop_oneof![
        4 => (distance.clone(), prop_oneof![Just(0u64), 0u64..4096, 0u64..(1 << 30)])
            .prop_map(|(ahead, slack)| Op::Insert { ahead, slack }),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => (any::<usize>(), distance.clone()).prop_map(|(which, ahead)| Op::Reschedule { which, ahead }),
        3 => distance.prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_wheel_agrees_with_a_list_of_timers(ops in proptest::collection::vec(op(), 1..200)) {
        let mut wheel = Wheel::new(SHIFT);
        let mut model = Model::default();
        let mut keys: Vec<WheelKey> = Vec::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Insert { ahead, slack } => {
                    let deadline = now + ahead;
                    let id = keys.len();
                    keys.push(wheel.insert(deadline, slack, id));
                    model.armed.insert(id, (deadline, slack));
                }
                Op::Cancel(i) if !keys.is_empty() => {
                    let id = i % keys.len();
                    prop_assert_eq!(wheel.remove(keys[id]), model.armed.remove(&id).map(|_| id));
                }
                Op::Reschedule { which, ahead } if !keys.is_empty() => {
                    let id = which % keys.len();
                    let deadline = now + ahead;
                    let armed = model.armed.get_mut(&id);
                    prop_assert_eq!(wheel.reschedule(keys[id], deadline, 0), armed.is_some());
                    if let Some(timer) = armed {
                        *timer = (deadline, 0);
                    }
                }
                Op::Advance(by) => {
                    now += by;
                    model.advance(&mut wheel, now);
                }
                Op::Cancel(_) | Op::Reschedule { .. } => {}
            }
        }
        // Run out the clock: everything left fires, once.
        let end = model.armed.values().map(|&(d, s)| d + s + TICK).max().unwrap_or(now);
        model.advance(&mut wheel, end.max(now));
        prop_assert!(wheel.is_empty());
    }
}
