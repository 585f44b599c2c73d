//! `Requests`: how threads that arm, cancel and reschedule hard timers reach
//! the hard queue without waiting for a lock the hard thread takes.
//!
//! The hard thread runs at SCHED_FIFO; callers run at normal priority. A
//! caller that waited for the hard lock could hold the hard thread up (see
//! `hard`), so callers hand requests over through a Treiber stack: a push
//! is one compare-and-swap of the head, complete as soon as it succeeds,
//! and whoever holds the hard lock (the hard thread, or a caller applying
//! requests) takes the whole stack with one exchange. Nothing a caller does
//! halfway can make the hard thread wait: a caller preempted before its
//! exchange has pushed nothing yet. (A queue whose consumer may find a slot
//! claimed but not yet written, as in segmented MPMC queues, would have the
//! real-time consumer wait for a preempted producer.) Whoever frees a node
//! took it off the stack first, so no node is freed while a producer reads
//! it: producers never read the nodes they link to.
//!
//! The alarm: a caller whose timer is due before the hard thread's alarm
//! (`alarm_at`) rings the alarm. The hard thread, after it has set the alarm and before it sleeps,
//! takes the stack again ([`Requests::take_after_alarm`]). Each side writes, then
//! has a sequentially consistent fence, then reads what the other writes
//! (Dekker's pattern), so either the caller sees the new `alarm_at` (and
//! rings if it must) or the hard thread sees the request. The model
//! checker's test below runs every interleaving of that.
//!
//! The hard thread frees no request: freeing memory another thread
//! allocated takes a lock of that thread's allocator arena (glibc's malloc,
//! past its small per-thread cache), which the caller may hold, preempted,
//! and requests are the one thing callers allocate at their own rate. So an
//! applied request goes, node and all, onto a second stack of spent
//! requests, which the next caller to push takes whole and drops on its own
//! thread. (The hard thread does drop what a timer service must: the
//! callbacks of the timers that fired, and a timer's state once its last
//! handle is gone.)
//!
//! When the service stops, the stack is closed: a push then hands the
//! request back, for the caller to drop, instead of leaving it where
//! nobody would take it.
//!
//! The stack counts the requests not applied yet (one more atomic add a
//! push, and a subtraction each applied, on a word of its own), so that a
//! side whose callers leave the applying to its expiry threads can tell a
//! backlog those threads do not keep up with (see `side`).

use std::ops::Deref;
use std::ptr;

use crate::sync::{AtomicPtr, AtomicU64, Ordering, fence};

struct Node<T> {
    request: T,
    next: *mut Node<T>,
}

/// The closed stack's head: no node's address (nodes are boxed, and this
/// is the address of a static no box can have).
fn closed<T>() -> *mut Node<T> {
    static CLOSED: u8 = 0;
    ptr::from_ref(&CLOSED).cast_mut().cast()
}

/// A request taken off the stack, still in its node: the hard thread gives
/// it back with [`Requests::discard`] rather than drop it.
pub(crate) struct Taken<T>(Box<Node<T>>);

// SAFETY: a taken node is owned whole by whoever has it; its `next` is not
// followed until it is pushed again.
unsafe impl<T: Send> Send for Taken<T> {}

impl<T> Deref for Taken<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0.request
    }
}

/// A stack of requests `T` that callers push onto without a lock and the
/// hard thread takes whole; see the module docs.
pub(crate) struct Requests<T> {
    head: AtomicPtr<Node<T>>,
    /// Requests the hard thread has applied, for callers to drop.
    spent: AtomicPtr<Node<T>>,
    /// The deadline the hard thread's alarm is set to (`u64::MAX` for none).
    alarm_at: AtomicU64,
    /// Requests pushed and not applied yet (counted before their push, so
    /// never fewer than are on the stack or taken).
    pending: AtomicU64,
}

// SAFETY: the nodes' requests move from the pushing thread to the taking
// one, which needs `T: Send`; the raw pointers are the stack's own.
unsafe impl<T: Send> Send for Requests<T> {}
// SAFETY: as above; shared use goes through the atomics.
unsafe impl<T: Send> Sync for Requests<T> {}

impl<T> Requests<T> {
    pub(crate) fn new() -> Requests<T> {
        Requests {
            head: AtomicPtr::new(ptr::null_mut()),
            spent: AtomicPtr::new(ptr::null_mut()),
            alarm_at: AtomicU64::new(u64::MAX),
            pending: AtomicU64::new(0),
        }
    }

    /// How many requests wait to be applied, about (a push counts itself
    /// just before it lands).
    pub(crate) fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Pushes `request`, for a timer due at `due` (`None` for a cancel):
    /// `Ok(true)` if the caller must ring the alarm, `Err` with the request
    /// if the stack is closed.
    pub(crate) fn push(&self, request: T, due: Option<u64>) -> Result<bool, T> {
        self.drop_spent();
        let node = Box::new(Node {
            request,
            next: ptr::null_mut(),
        });
        self.pending.fetch_add(1, Ordering::Relaxed);
        if let Err(node) = link(&self.head, node) {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            return Err(node.request);
        }
        // The push before the look at the alarm (see the module docs).
        fence(Ordering::SeqCst);
        Ok(due.is_some_and(|due| due < self.alarm_at.load(Ordering::Relaxed)))
    }

    /// The hard thread: takes every request onto `into`, newest first (so
    /// that `into.pop()` gives the oldest).
    pub(crate) fn take(&self, into: &mut Vec<Taken<T>>) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            if head.is_null() || head == closed() {
                return;
            }
            match self.head.compare_exchange_weak(
                head,
                ptr::null_mut(),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => head = actual,
            }
        }
        // SAFETY: the exchange took the list off the stack: its nodes are
        // this thread's alone, each boxed by `push`.
        unsafe { drain(head, into) }
    }

    /// The hard thread: gives back a request it has applied, for a caller
    /// to drop (see the module docs).
    pub(crate) fn discard(&self, Taken(node): Taken<T>) {
        self.pending.fetch_sub(1, Ordering::Relaxed);
        // Never closed: the node goes in.
        let _ = link(&self.spent, node);
    }

    /// Drops the spent requests, if any, on the calling thread.
    fn drop_spent(&self) {
        if self.spent.load(Ordering::Relaxed).is_null() {
            return;
        }
        let mut head = self.spent.swap(ptr::null_mut(), Ordering::Acquire);
        while !head.is_null() {
            // SAFETY: the swap took the list: its nodes, each boxed by
            // `push`, are this thread's alone.
            let node = unsafe { Box::from_raw(head) };
            head = node.next;
        }
    }

    /// The hard thread's last look before it sleeps, after
    /// [`set_alarm_at`](Requests::set_alarm_at): [`take`](Requests::take)s
    /// the requests whose callers may not have seen the alarm (see the
    /// module docs).
    pub(crate) fn take_after_alarm(&self, into: &mut Vec<Taken<T>>) {
        // The alarm set before the look at the stack.
        fence(Ordering::SeqCst);
        self.take(into);
    }

    /// The hard thread has set its alarm to `at` (`u64::MAX` for none).
    pub(crate) fn set_alarm_at(&self, at: u64) {
        self.alarm_at.store(at, Ordering::Relaxed);
    }

    /// Closes the stack (pushes are refused from now on) and takes what it
    /// held onto `into`, newest first: requests that will never be applied
    /// (nor counted as pending).
    pub(crate) fn close(&self, into: &mut Vec<Taken<T>>) {
        let head = self.head.swap(closed(), Ordering::Acquire);
        if head != closed() {
            let before = into.len();
            // SAFETY: as in `take`.
            unsafe { drain(head, into) }
            let closed = (into.len() - before) as u64;
            self.pending.fetch_sub(closed, Ordering::Relaxed);
        }
    }

    /// After a fork: an empty, open stack; the parent's requests are
    /// forgotten, never read nor dropped (see `fork`).
    ///
    /// # Safety
    ///
    /// No other thread may use the stack during the call.
    pub(crate) unsafe fn reset_after_fork(&self) {
        self.head.store(ptr::null_mut(), Ordering::Relaxed);
        self.spent.store(ptr::null_mut(), Ordering::Relaxed);
        self.alarm_at.store(u64::MAX, Ordering::Relaxed);
        self.pending.store(0, Ordering::Relaxed);
    }
}

/// Pushes `node` onto the stack at `head`: one compare-and-swap, and the
/// node is in; the node back if the stack is closed.
fn link<T>(head: &AtomicPtr<Node<T>>, node: Box<Node<T>>) -> Result<(), Box<Node<T>>> {
    let node = Box::into_raw(node);
    let mut current = head.load(Ordering::Relaxed);
    loop {
        if current == closed() {
            // SAFETY: `node` came from `Box::into_raw` above and was never
            // shared.
            return Err(unsafe { Box::from_raw(node) });
        }
        // SAFETY: `node` is not shared until the exchange succeeds.
        unsafe { (*node).next = current };
        match head.compare_exchange_weak(current, node, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(actual) => current = actual,
        }
    }
}

/// Moves the requests of the list at `head` onto `into`, newest (the head)
/// first, freeing the nodes.
///
/// # Safety
///
/// The list must be the caller's alone, each node boxed by `push`.
unsafe fn drain<T>(mut head: *mut Node<T>, into: &mut Vec<Taken<T>>) {
    while !head.is_null() {
        // SAFETY: passed on from the caller.
        let node = unsafe { Box::from_raw(head) };
        head = node.next;
        into.push(Taken(node));
    }
}

impl<T> Drop for Requests<T> {
    fn drop(&mut self) {
        let mut left = Vec::new();
        self.close(&mut left);
        self.drop_spent();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn requests_come_out_newest_first_and_a_closed_stack_hands_them_back() {
        let requests = Requests::new();
        for n in 0..5 {
            assert_eq!(requests.push(n, None), Ok(false));
        }
        let mut taken = Vec::new();
        requests.take(&mut taken);
        assert_eq!(values(&taken), [4, 3, 2, 1, 0]);
        assert_eq!(requests.pending(), 5, "taken, not applied");
        requests.take_after_alarm(&mut taken);
        assert_eq!(taken.len(), 5);
        requests.push(5, None).unwrap();
        assert_eq!(requests.pending(), 6);
        requests.close(&mut taken);
        assert_eq!(values(&taken), [4, 3, 2, 1, 0, 5]);
        assert_eq!(requests.pending(), 5, "a closed stack's are never applied");
        assert_eq!(requests.push(6, None), Err(6));
        assert_eq!(requests.pending(), 5, "a refused push is not counted");
        requests.take(&mut taken);
        assert_eq!(taken.len(), 6);
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
        let mut taken = Vec::new();
        requests.take(&mut taken);
        requests.discard(taken.pop().unwrap());
        assert_eq!(requests.pending(), 0, "applied");
        assert_eq!(Arc::strong_count(&request), 2, "held until a push");
        requests.push(Arc::new(()), None).unwrap();
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

    #[test]
    fn pushes_from_threads_are_taken_once_each_in_each_threads_order() {
        use std::sync::Arc;
        const THREADS: u64 = 4;
        // Miri runs some 1000 times slower.
        const EACH: u64 = if cfg!(miri) { 200 } else { 20_000 };
        let requests = Arc::new(Requests::new());
        let pushers: Vec<_> = (0..THREADS)
            .map(|t| {
                let requests = Arc::clone(&requests);
                std::thread::spawn(move || {
                    for n in 0..EACH {
                        requests.push((t, n), None).unwrap();
                    }
                })
            })
            .collect();
        let mut batches = Vec::new();
        let mut take = || {
            let mut batch = Vec::new();
            requests.take(&mut batch);
            batches.push(values(&batch));
        };
        while pushers.iter().any(|p| !p.is_finished()) {
            take();
        }
        for pusher in pushers {
            pusher.join().unwrap();
        }
        take();
        let mut next = [0; THREADS as usize];
        // Each take is newest first: oldest first, batch after batch, is
        // each batch reversed.
        for (t, n) in batches
            .into_iter()
            .flat_map(|batch| batch.into_iter().rev())
        {
            assert_eq!(n, next[t as usize], "thread {t}'s requests out of order");
            next[t as usize] += 1;
        }
        assert_eq!(next, [EACH; THREADS as usize]);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    use super::*;

    /// The hard thread's alarm is set for a timer at 5, which it has just
    /// fired, leaving its queue empty; meanwhile one caller arms a timer
    /// due at 3600 and another one due at 10 (after the alarm they may
    /// still see: they need not ring). The hard thread, as `Hard::round`
    /// does, takes and applies the requests, sets its alarm, takes again
    /// and, if that found requests, sets the alarm again, to come back soon
    /// (at 20 here) and apply them, and takes again (setting the alarm drops
    /// a ring not taken yet). Whatever the interleaving, each timer is
    /// applied, or taken with the alarm set to come back soon, or due no
    /// earlier than the alarm (a deadline under a mutex, as the kernel's
    /// timerfd serializes its settings). Without the fences, or with no take
    /// after the second setting, the hard thread sleeps past a request.
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
            let values = |taken: &[Taken<u64>]| taken.iter().map(|t| **t).collect::<Vec<_>>();
            let mut taken = Vec::new();
            requests.take(&mut taken);
            let applied = values(&taken);
            taken.clear();
            let mut at = applied.iter().copied().min().unwrap_or(u64::MAX);
            loop {
                requests.set_alarm_at(at);
                *alarm.lock().unwrap() = at;
                requests.take_after_alarm(&mut taken);
                if taken.is_empty() || SOON >= at {
                    break;
                }
                at = SOON;
            }
            // A caller's ring, if any, comes before the sleep or wakes it.
            for caller in callers {
                caller.join().unwrap();
            }
            let rings_by = *alarm.lock().unwrap();
            let taken = values(&taken);
            for due in [3600, 10] {
                assert!(
                    applied.contains(&due)
                        || (taken.contains(&due) && rings_by <= SOON)
                        || rings_by <= due,
                    "asleep until {rings_by} with {applied:?} applied, {taken:?} taken, {due} pushed"
                );
            }
        });
    }

    /// Two callers push while the hard thread takes: every request comes
    /// out once.
    #[test]
    fn every_push_is_taken_once() {
        loom::model(|| {
            let requests = Arc::new(Requests::new());
            let callers: Vec<_> = (0..2_u64)
                .map(|n| {
                    let requests = Arc::clone(&requests);
                    thread::spawn(move || requests.push(n, None).unwrap())
                })
                .collect();
            let mut taken = Vec::new();
            requests.take(&mut taken);
            for caller in callers {
                caller.join().unwrap();
            }
            requests.take(&mut taken);
            let mut seen: Vec<u64> = taken.iter().map(|t| **t).collect();
            seen.sort_unstable();
            assert_eq!(seen, [0, 1]);
        });
    }

    /// Two soft workers each set the alarm, under the side's lock (as a
    /// round does before a wait), and take the stack after it, while a
    /// caller arms a timer due at 10, ringing the alarm if that is before
    /// the alarm it sees. A worker's setting drops a ring not taken yet, so
    /// whatever the interleaving, a worker takes the request or the alarm
    /// rings by its deadline.
    #[test]
    fn a_request_is_taken_or_rung_for_whichever_worker_sets_the_alarm_last() {
        loom::model(|| {
            let requests = Arc::new(Requests::new());
            requests.set_alarm_at(5);
            let alarm = Arc::new(Mutex::new(5));
            let side_lock = Arc::new(Mutex::new(()));
            let caller = {
                let (requests, alarm) = (Arc::clone(&requests), Arc::clone(&alarm));
                thread::spawn(move || {
                    if requests.push(10, Some(10)).unwrap() {
                        *alarm.lock().unwrap() = 0;
                    }
                })
            };
            let worker =
                move |requests: &Requests<u64>, alarm: &Mutex<u64>, side: &Mutex<()>, at| {
                    let _side = side.lock().unwrap();
                    requests.set_alarm_at(at);
                    *alarm.lock().unwrap() = at;
                    let mut taken = Vec::new();
                    requests.take_after_alarm(&mut taken);
                    taken.iter().map(|t| **t).collect::<Vec<u64>>()
                };
            let other = {
                let (requests, alarm, side) = (
                    Arc::clone(&requests),
                    Arc::clone(&alarm),
                    Arc::clone(&side_lock),
                );
                thread::spawn(move || worker(&requests, &alarm, &side, 3600))
            };
            let mine = worker(&requests, &alarm, &side_lock, 1000);
            caller.join().unwrap();
            let theirs = other.join().unwrap();
            let rings_by = *alarm.lock().unwrap();
            assert!(
                mine.contains(&10) || theirs.contains(&10) || rings_by <= 10,
                "asleep until {rings_by} with {mine:?} and {theirs:?} taken"
            );
        });
    }
}
