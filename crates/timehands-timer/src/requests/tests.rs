//! The request stack's and the walk's unit tests.

use super::*;

#[test]
fn requests_come_out_oldest_first_once_walked_and_a_closed_stack_hands_them_back() {
    let requests = Requests::new();
    for n in 0..5 {
        assert_eq!(requests.push(n, None), Ok(false));
    }
    let mut walk = Walk::new();
    requests.take(&mut walk);
    assert_eq!(walk.walk(2), 2);
    assert_eq!(walk.walked(), 2);
    assert!(!walk.is_whole());
    assert!(walk.pop_oldest().is_none(), "the oldest are walked last");
    requests.push(5, None).unwrap();
    requests.take_after_alarm(&mut walk);
    assert_eq!(walk.walk(10), 3, "the newer push is left on the stack");
    assert_eq!(requests.pending(), 6, "walked, not applied");
    assert_eq!(give_out(&mut walk, &requests), [0, 1, 2, 3, 4]);
    assert!(walk.is_empty());
    assert_eq!(requests.pending(), 1);
    requests.take(&mut walk);
    assert_eq!(walk.walk(1), 1);
    requests.push(6, None).unwrap();
    let mut closed = Vec::new();
    requests.close(&mut walk, &mut closed);
    assert_eq!(values(&closed), [5, 6]);
    assert!(walk.is_empty());
    assert_eq!(requests.pending(), 0, "a closed stack's are never applied");
    assert_eq!(requests.push(7, None), Err(7));
    assert_eq!(requests.pending(), 0, "a refused push is not counted");
    requests.take(&mut walk);
    assert!(walk.is_empty());
}

fn values<T: Copy>(taken: &[Taken<T>]) -> Vec<T> {
    taken.iter().map(|t| **t).collect()
}

#[test]
fn spent_requests_are_dropped_by_the_next_push_not_by_the_hard_thread() {
    use std::sync::Arc;
    let requests = Requests::new();
    let request = Arc::new(());
    requests.push(Arc::clone(&request), None).unwrap();
    let mut walk = Walk::new();
    requests.take(&mut walk);
    walk.walk(1);
    requests.discard(walk.pop_oldest().unwrap());
    assert_eq!(requests.pending(), 0, "applied");
    assert_eq!(Arc::strong_count(&request), 2, "held until a push");
    requests.push(Arc::new(()), None).unwrap();
    assert_eq!(Arc::strong_count(&request), 1);
}

/// A walk dropped part-way drops its requests, walked or not, and so
/// does a stack dropped with requests on it.
#[test]
fn a_walk_and_a_stack_dropped_drop_their_requests() {
    use std::sync::Arc;
    let request = Arc::new(());
    let requests = Requests::new();
    for _ in 0..4 {
        requests.push(Arc::clone(&request), None).unwrap();
    }
    let mut walk = Walk::new();
    requests.take(&mut walk);
    walk.walk(2);
    requests.push(Arc::clone(&request), None).unwrap();
    drop(walk);
    assert_eq!(Arc::strong_count(&request), 2, "the one on the stack");
    drop(requests);
    assert_eq!(Arc::strong_count(&request), 1);
}

#[test]
fn a_request_due_before_the_alarm_rings_it() {
    let requests = Requests::new();
    requests.set_alarm_at(1000);
    assert_eq!(requests.push(0, Some(1000)), Ok(false));
    assert_eq!(requests.push(0, Some(999)), Ok(true));
    assert_eq!(requests.push(0, None), Ok(false));
}

/// Pushes `each` requests `(thread, n)` from each of `threads` threads,
/// `n` counting up; the pushing threads, to join.
fn push_from_threads(
    requests: &std::sync::Arc<Requests<(u64, u64)>>,
    threads: u64,
    each: u64,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|t| {
            let requests = std::sync::Arc::clone(requests);
            std::thread::spawn(move || {
                for n in 0..each {
                    requests.push((t, n), None).unwrap();
                }
            })
        })
        .collect()
}

/// Asserts that `given_out` holds each thread's `each` requests once,
/// in the order the thread pushed them.
fn assert_once_each_in_each_threads_order(given_out: &[(u64, u64)], threads: u64, each: u64) {
    let mut next = vec![0; threads as usize];
    for &(t, n) in given_out {
        assert_eq!(n, next[t as usize], "thread {t}'s requests out of order");
        next[t as usize] += 1;
    }
    assert_eq!(next, vec![each; threads as usize]);
}

/// Threads push while the taker takes, walks a few hundred nodes a call
/// and gives out what is walked whole, as the sides do: every request
/// comes out once, each thread's in its order.
#[test]
fn pushes_from_threads_are_taken_once_each_in_each_threads_order() {
    const THREADS: u64 = 4;
    // Miri runs some 1000 times slower.
    const EACH: u64 = if cfg!(miri) { 200 } else { 20_000 };
    const BOUND: usize = if cfg!(miri) { 30 } else { 300 };
    let requests = std::sync::Arc::new(Requests::new());
    let pushers = push_from_threads(&requests, THREADS, EACH);
    let mut walk = Walk::new();
    let mut given_out = Vec::new();
    let mut take = || {
        requests.take(&mut walk);
        assert!(walk.walk(BOUND) <= BOUND);
        given_out.extend(give_out(&mut walk, &requests));
    };
    while pushers.iter().any(|p| !p.is_finished()) {
        take();
    }
    for pusher in pushers {
        pusher.join().unwrap();
    }
    while requests.pending() > 0 {
        take();
    }
    assert_once_each_in_each_threads_order(&given_out, THREADS, EACH);
}

/// 100 000 requests pushed before a take: each call walks at most its
/// bound's worth of nodes and gives out none until the chain is walked
/// whole (taking the stack whole and turning it at once, as before,
/// walked all 100 000 in one call); then every request comes out once,
/// oldest first, each thread's in its order.
#[test]
fn a_take_is_walked_a_bounded_batch_a_call_and_comes_out_oldest_first() {
    const THREADS: u64 = 4;
    const EACH: u64 = if cfg!(miri) { 250 } else { 25_000 };
    const BOUND: usize = if cfg!(miri) { 64 } else { 1024 };
    let total = (THREADS * EACH) as usize;
    let requests = std::sync::Arc::new(Requests::new());
    for pusher in push_from_threads(&requests, THREADS, EACH) {
        pusher.join().unwrap();
    }
    let mut walk = Walk::new();
    let mut calls = 0;
    let mut given_out = Vec::new();
    while given_out.is_empty() {
        requests.take(&mut walk);
        let walked = walk.walked();
        assert_eq!(walk.walk(BOUND), BOUND.min(total - walked));
        calls += 1;
        if !walk.is_whole() {
            assert!(walk.pop_oldest().is_none(), "given out before the oldest");
        }
        given_out.extend(give_out(&mut walk, &requests));
    }
    assert_eq!(calls, total.div_ceil(BOUND));
    assert!(walk.is_empty());
    assert_eq!(requests.pending(), 0);
    assert_once_each_in_each_threads_order(&given_out, THREADS, EACH);
}
