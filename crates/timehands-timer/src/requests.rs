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
//! The walk: the chain a take detaches is newest first, and requests are
//! applied oldest first (so each caller's in the order it pushed them), so
//! the chain is turned around before any of it is applied: a step a node,
//! and a cache miss a node, as the nodes come from the callers' allocators.
//! While callers push millions a second, a take that comes late finds
//! hundreds of thousands of nodes, and turning them all at once held the
//! hard thread for tens of milliseconds (70 % of its samples in a 73 ms
//! stall), which made its next round later still. So a taken chain is a
//! [`Walk`], kept under the side's lock between calls, and each call turns
//! at most a bounded number of its nodes around (see `side`). The walk
//! relinks the nodes themselves, newest first into oldest first, so nothing
//! grows as it goes (the list it replaces was reallocated, and copied, as
//! it grew). Nothing of a chain comes out before its oldest node is reached
//! (the oldest requests are the last walked), and the stack is taken again
//! only once the walk has given out its last request: the requests taken
//! are those pushed before the exchange, those left on the stack were all
//! pushed after it, so chain after chain, each oldest first, is oldest
//! first throughout.
//!
//! The alarm: a caller whose timer is due before the hard thread's alarm
//! (`alarm_at`) rings the alarm. The hard thread, after it has set the alarm and before it sleeps,
//! looks at the stack again ([`Requests::take_after_alarm`]). Each side writes, then
//! has a sequentially consistent fence, then reads what the other writes
//! (Dekker's pattern), so either the caller sees the new `alarm_at` (and
//! rings if it must) or the hard thread sees the request. A walk not yet
//! applied to its end makes the look unnecessary: the hard thread then
//! comes back soon in any case, and looks then. The model checker's tests
//! below run every interleaving of that.
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

/// A request in the list it is on: the stack, a walk, or the spent stack.
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

/// A chain [`Requests::take`] detached from the stack, turned from newest
/// first into oldest first a bounded number of nodes at a time, and given
/// out oldest first once it is turned whole (see the module docs).
///
/// It owns its nodes: dropped, it drops their requests. After a fork the
/// side's state, walk and all, is overwritten unread (see `fork`), so its
/// nodes are neither read nor freed there.
pub(crate) struct Walk<T> {
    /// The part of the chain not walked yet, newest first: its head is the
    /// next node to turn, and its oldest node, the chain's, is the last.
    unwalked: *mut Node<T>,
    /// The nodes walked, oldest first (each turned to point at the one
    /// walked before it, the next newer), and, once `unwalked` is null,
    /// what is left of the whole chain to give out.
    turned: *mut Node<T>,
    /// How many nodes `turned` holds.
    turned_len: usize,
}

// SAFETY: the walk owns its nodes (no other thread reaches them once the
// exchange has taken them off the stack), and their requests move with it.
unsafe impl<T: Send> Send for Walk<T> {}

impl<T> Walk<T> {
    /// A walk that holds nothing.
    pub(crate) fn new() -> Walk<T> {
        Walk {
            unwalked: ptr::null_mut(),
            turned: ptr::null_mut(),
            turned_len: 0,
        }
    }

    /// Whether the walk holds no request, walked or not: only then does
    /// [`Requests::take`] take the stack again.
    pub(crate) fn is_empty(&self) -> bool {
        self.unwalked.is_null() && self.turned.is_null()
    }

    /// Whether every node of the chain is walked: only then do requests
    /// come out.
    #[cfg(test)]
    pub(crate) fn is_whole(&self) -> bool {
        self.unwalked.is_null()
    }

    /// How many requests are walked and not given out yet.
    #[cfg(test)]
    pub(crate) fn walked(&self) -> usize {
        self.turned_len
    }

    /// Turns at most `bound` more nodes around; how many it turned.
    pub(crate) fn walk(&mut self, bound: usize) -> usize {
        let mut steps = 0;
        while steps < bound && !self.unwalked.is_null() {
            let node = self.unwalked;
            // SAFETY: the nodes on `unwalked` are this walk's alone (the
            // exchange in `take` detached them from the stack, and nothing
            // else links to them), each boxed by `push`, and no reference
            // to one is alive: the node is read and written through its
            // own pointer only.
            unsafe {
                self.unwalked = (*node).next;
                (*node).next = self.turned;
            }
            self.turned = node;
            self.turned_len += 1;
            steps += 1;
        }
        steps
    }

    /// Gives out the oldest request left, once the walk is whole; `None`
    /// before (the oldest are the last walked) or once all are out.
    pub(crate) fn pop_oldest(&mut self) -> Option<Taken<T>> {
        if !self.unwalked.is_null() || self.turned.is_null() {
            return None;
        }
        // SAFETY: `turned` is the head of a list of this walk's own nodes,
        // each boxed by `push`, and no other node links to its head: the
        // box owns the node from here.
        let node = unsafe { Box::from_raw(self.turned) };
        self.turned = node.next;
        self.turned_len -= 1;
        Some(Taken(node))
    }
}

impl<T> Drop for Walk<T> {
    fn drop(&mut self) {
        self.walk(usize::MAX);
        while self.pop_oldest().is_some() {}
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
    /// never fewer than are on the stack or in a walk).
    pending: AtomicU64,
}

// SAFETY: the nodes' requests move from the pushing thread to the taking
// one, which needs `T: Send`; the raw pointers are the stack's own.
unsafe impl<T: Send> Send for Requests<T> {}
// SAFETY: as above; shared use goes through the atomics.
unsafe impl<T: Send> Sync for Requests<T> {}

impl<T> Requests<T> {
    /// An empty, open stack, its alarm set to nothing.
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

    /// The hard thread: if `walk` holds nothing, takes the whole stack into
    /// it with one exchange, to be walked (see the module docs); if it
    /// holds requests still, leaves the stack alone, as those are older.
    pub(crate) fn take(&self, walk: &mut Walk<T>) {
        if !walk.is_empty() {
            return;
        }
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
        // The exchange took the chain off the stack: its nodes, each boxed
        // by `push`, are this thread's alone, for the walk to own.
        walk.unwalked = head;
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
    /// the requests whose callers may not have seen the alarm into `walk`,
    /// if it holds nothing (see the module docs).
    pub(crate) fn take_after_alarm(&self, walk: &mut Walk<T>) {
        // The alarm set before the look at the stack.
        fence(Ordering::SeqCst);
        self.take(walk);
    }

    /// The hard thread has set its alarm to `at` (`u64::MAX` for none).
    pub(crate) fn set_alarm_at(&self, at: u64) {
        self.alarm_at.store(at, Ordering::Relaxed);
    }

    /// The alarm callers are told of: what the last
    /// [`set_alarm_at`](Requests::set_alarm_at) said.
    pub(crate) fn alarm_at(&self) -> u64 {
        self.alarm_at.load(Ordering::Relaxed)
    }

    /// Closes the stack (pushes are refused from now on) and moves what it
    /// held, and every request `walk` holds, onto `into`: requests that
    /// will never be applied (nor counted as pending).
    pub(crate) fn close(&self, walk: &mut Walk<T>, into: &mut Vec<Taken<T>>) {
        let before = into.len();
        walk.walk(usize::MAX);
        into.extend(std::iter::from_fn(|| walk.pop_oldest()));
        let head = self.head.swap(closed(), Ordering::Acquire);
        if head != closed() {
            // SAFETY: the swap took the list off the stack: its nodes are
            // this thread's alone, each boxed by `push`.
            unsafe { drain(head, into) }
        }
        let closed = (into.len() - before) as u64;
        self.pending.fetch_sub(closed, Ordering::Relaxed);
    }

    /// After a fork: an empty, open stack; the parent's requests are
    /// forgotten, never read nor dropped (see `fork`; a walk is forgotten
    /// with the side's state).
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
        self.close(&mut Walk::new(), &mut left);
        self.drop_spent();
    }
}

/// Gives out what `walk` has for the taking (nothing unless it is whole),
/// discarding each request as an applied one is: the unit tests' and the
/// model checker's.
#[cfg(test)]
fn give_out<T: Copy>(walk: &mut Walk<T>, requests: &Requests<T>) -> Vec<T> {
    std::iter::from_fn(|| walk.pop_oldest())
        .map(|taken| {
            let value = *taken;
            requests.discard(taken);
            value
        })
        .collect()
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
