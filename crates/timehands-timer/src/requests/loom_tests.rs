//! The model checker's tests of the request stack, the walk and the alarm.

use loom::sync::{Arc, Mutex};
use loom::thread;

use super::*;

/// Walks at most one node of `walk`'s chain, as a side walks a batch
/// (a chain of two or more takes calls), and gives out and discards
/// what is then whole; the values given out.
fn walk_one_and_give_out(walk: &mut Walk<u64>, requests: &Requests<u64>) -> Vec<u64> {
    walk.walk(1);
    give_out(walk, requests)
}

/// The hard thread's alarm is set for a timer at 5, which it has just
/// fired, leaving its queue empty; meanwhile one caller arms a timer
/// due at 3600 and another one due at 10 (after the alarm they may
/// still see: they need not ring). The hard thread, as `Hard::round`
/// does, takes the stack, walks a batch of it (here one node, so that a
/// chain of two is not whole) and applies what is walked whole, sets
/// its alarm, takes again (unless its walk still holds requests) and,
/// if its walk holds requests, sets the alarm again, to come back soon
/// (at 20 here) and walk and apply them, and takes again (setting the
/// alarm drops a ring not taken yet). Whatever the interleaving, it
/// never sleeps past the soon alarm with requests taken, and each timer
/// is applied, or due no earlier than the alarm (a deadline under a
/// mutex, as the kernel's timerfd serializes its settings), or left
/// (taken, or on the stack behind the requests taken) with the alarm
/// set to come back soon. Without the fences, or with no take after
/// the second setting, the hard thread sleeps past a request.
#[test]
fn the_hard_thread_never_sleeps_past_a_request_it_has_not_seen() {
    const SOON: u64 = 20;
    loom::model(|| {
        let requests = Arc::new(Requests::new());
        requests.set_alarm_at(5);
        let alarm = Arc::new(Mutex::new(5));
        let callers: Vec<_> = [3600_u64, 10]
            .into_iter()
            .map(|due| {
                let (requests, alarm) = (Arc::clone(&requests), Arc::clone(&alarm));
                thread::spawn(move || {
                    if requests.push(due, Some(due)).unwrap() {
                        *alarm.lock().unwrap() = 0;
                    }
                })
            })
            .collect();
        let mut walk = Walk::new();
        requests.take(&mut walk);
        let applied = walk_one_and_give_out(&mut walk, &requests);
        let mut at = applied.iter().copied().min().unwrap_or(u64::MAX);
        loop {
            requests.set_alarm_at(at);
            *alarm.lock().unwrap() = at;
            requests.take_after_alarm(&mut walk);
            if walk.is_empty() || SOON >= at {
                break;
            }
            at = SOON;
        }
        let held = !walk.is_empty();
        // A caller's ring, if any, comes before the sleep or wakes it.
        for caller in callers {
            caller.join().unwrap();
        }
        let rings_by = *alarm.lock().unwrap();
        assert!(
            !held || rings_by <= SOON,
            "asleep until {rings_by} with requests taken"
        );
        for due in [3600, 10] {
            assert!(
                applied.contains(&due) || rings_by <= due || (held && rings_by <= SOON),
                "asleep until {rings_by} with {applied:?} applied, requests taken: {held}, {due} pushed"
            );
        }
    });
}

/// One caller pushes two requests, in order, another one request, while
/// the hard thread takes twice, each time walking one node and giving
/// out what is whole (a take split over calls, with pushes between
/// them); then, the callers done, it walks on until nothing is pending.
/// Every push comes out once, the first caller's in its order, and the
/// count of pending requests comes back to zero. (Given out as soon as
/// walked, a chain would come out newest first; taken again before the
/// walk is given out whole, requests would come out before older ones.)
#[test]
fn a_walk_split_over_calls_gives_out_every_push_once_in_each_threads_order() {
    loom::model(|| {
        let requests = Arc::new(Requests::new());
        let callers = [vec![0_u64, 1], vec![2]].map(|pushes| {
            let requests = Arc::clone(&requests);
            thread::spawn(move || {
                for n in pushes {
                    requests.push(n, None).unwrap();
                }
            })
        });
        let mut walk = Walk::new();
        let mut given_out = Vec::new();
        for _ in 0..2 {
            requests.take(&mut walk);
            given_out.extend(walk_one_and_give_out(&mut walk, &requests));
        }
        for caller in callers {
            caller.join().unwrap();
        }
        while requests.pending() > 0 {
            requests.take(&mut walk);
            given_out.extend(walk_one_and_give_out(&mut walk, &requests));
        }
        let position = |n| given_out.iter().position(|&m| m == n);
        assert!(position(0) < position(1), "{given_out:?}");
        let mut seen = given_out.clone();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2]);
        assert!(walk.is_empty());
    });
}

/// Two soft workers each set the alarm, under the side's lock (as a
/// round does before a wait), and take the stack after it into the
/// side's walk, while a caller arms a timer due at 10, ringing the
/// alarm if that is before the alarm it sees. A worker's setting drops
/// a ring not taken yet, so whatever the interleaving, a worker takes
/// the request or the alarm rings by its deadline.
#[test]
fn a_request_is_taken_or_rung_for_whichever_worker_sets_the_alarm_last() {
    loom::model(|| {
        let requests = Arc::new(Requests::new());
        requests.set_alarm_at(5);
        let alarm = Arc::new(Mutex::new(5));
        let side = Arc::new(Mutex::new(Walk::new()));
        let caller = {
            let (requests, alarm) = (Arc::clone(&requests), Arc::clone(&alarm));
            thread::spawn(move || {
                if requests.push(10, Some(10)).unwrap() {
                    *alarm.lock().unwrap() = 0;
                }
            })
        };
        let worker =
            move |requests: &Requests<u64>, alarm: &Mutex<u64>, side: &Mutex<Walk<u64>>, at| {
                let mut walk = side.lock().unwrap();
                requests.set_alarm_at(at);
                *alarm.lock().unwrap() = at;
                requests.take_after_alarm(&mut walk);
            };
        let other = {
            let (requests, alarm, side) =
                (Arc::clone(&requests), Arc::clone(&alarm), Arc::clone(&side));
            thread::spawn(move || worker(&requests, &alarm, &side, 3600))
        };
        worker(&requests, &alarm, &side, 1000);
        caller.join().unwrap();
        other.join().unwrap();
        let rings_by = *alarm.lock().unwrap();
        let mut walk = side.lock().unwrap();
        walk.walk(usize::MAX);
        let taken = walk.pop_oldest().map(|taken| *taken);
        assert!(
            taken == Some(10) || rings_by <= 10,
            "asleep until {rings_by} with {taken:?} taken"
        );
    });
}
