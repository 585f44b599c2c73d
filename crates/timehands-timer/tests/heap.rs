//! The deadline heap with time driven by hand: exact order, cancel and
//! reschedule by key, and a property test against a sorted list.

use proptest::prelude::*;
use timehands_timer::heap::{DeadlineHeap, HeapKey};

#[test]
fn equal_deadlines_fire_in_the_order_they_were_armed() {
    let mut heap = DeadlineHeap::new();
    for id in 0..10 {
        heap.push(100, id);
    }
    let order: Vec<i32> = std::iter::from_fn(|| heap.pop_expired(100).map(|(_, v)| v)).collect();
    assert_eq!(order, (0..10).collect::<Vec<_>>());
}

#[test]
fn cancel_before_during_and_after_expiry() {
    let mut heap = DeadlineHeap::new();
    let before = heap.push(10, "before");
    let a = heap.push(20, "a");
    let b = heap.push(20, "b");
    assert_eq!(heap.remove(before), Some("before"));
    assert_eq!(heap.pop_expired(15), None);
    assert_eq!(heap.pop_expired(20), Some((20, "a")));
    assert_eq!(heap.remove(b), Some("b"), "due but not yet taken");
    assert_eq!(heap.remove(a), None, "already fired");
    assert!(!heap.reschedule(a, 30));
    assert!(heap.is_empty());
}

#[derive(Clone, Debug)]
enum Op {
    Push(u64),
    Remove(usize),
    Reschedule(usize, u64),
    Pop(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..1000).prop_map(Op::Push),
        1 => any::<usize>().prop_map(Op::Remove),
        1 => (any::<usize>(), 0u64..1000).prop_map(|(i, d)| Op::Reschedule(i, d)),
        2 => (0u64..1000).prop_map(Op::Pop),
    ]
}

proptest! {
    #[test]
    fn the_heap_agrees_with_a_sorted_list(ops in proptest::collection::vec(op(), 1..300)) {
        let mut heap = DeadlineHeap::new();
        // The model: (deadline, arm order, id) of the armed timers.
        let mut model: Vec<(u64, usize, usize)> = Vec::new();
        let mut keys: Vec<HeapKey> = Vec::new();
        let mut armed_order = 0;
        for op in ops {
            match op {
                Op::Push(deadline) => {
                    let id = keys.len();
                    keys.push(heap.push(deadline, id));
                    model.push((deadline, armed_order, id));
                    armed_order += 1;
                }
                Op::Remove(i) if !keys.is_empty() => {
                    let id = i % keys.len();
                    let at = model.iter().position(|t| t.2 == id);
                    prop_assert_eq!(heap.remove(keys[id]), at.map(|p| model.remove(p).2));
                }
                Op::Reschedule(i, deadline) if !keys.is_empty() => {
                    let id = i % keys.len();
                    let at = model.iter().position(|t| t.2 == id);
                    prop_assert_eq!(heap.reschedule(keys[id], deadline), at.is_some());
                    if let Some(p) = at {
                        // Rescheduling keeps the timer's place among equals.
                        model[p].0 = deadline;
                    }
                }
                Op::Pop(now) => {
                    model.sort_unstable();
                    let expected = model.first().filter(|t| t.0 <= now).copied();
                    prop_assert_eq!(heap.pop_expired(now), expected.map(|t| (t.0, t.2)));
                    if expected.is_some() {
                        model.remove(0);
                    }
                }
                Op::Remove(_) | Op::Reschedule(..) => {}
            }
            prop_assert_eq!(heap.len(), model.len());
            prop_assert_eq!(heap.peek(), model.iter().map(|t| t.0).min());
        }
    }
}
