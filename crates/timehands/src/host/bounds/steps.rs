//! The bounds' steps: the readers keep the state (`state.rs`) themselves,
//! as the kernel's readers need nobody's thread. A read that finds the
//! state due ([`keep`]: the last step older than the wait it set, 100 ms
//! while the sources answer) and wins a flag advances the sources one
//! step (`refresh.rs`), without waiting for anything: it takes the
//! daemons' answers to the requests the step before sent (non-blocking
//! sockets), reads their mapped pages with loads and the kernel's NTP
//! state with `adjtimex`, publishes the best source's state, and sends the
//! next requests. A read that loses the flag, or finds a step under way on
//! its own thread (a signal handler over it), goes on with the state
//! published: nobody waits, nobody spins on another thread. A step that
//! finds the clock still starting (perhaps under it, in a handler)
//! publishes nothing, as the state carries the clock's own bound, and
//! comes back a millisecond later.
//!
//! Everything a step does is async-signal-safe: system calls on the stack
//! (the socket, the mapping), atomics, arithmetic; no allocation, no lock,
//! no thread, and nothing read or changed of signal masks or dispositions.
//! The environment the sources need is read with `getenv` into a buffer on
//! the stack (`environment.rs`).
//!
//! A `fork()`ed child notices its own pid at its first step and starts its
//! sources afresh, with a socket of its own (sharing its parent's, it would
//! take the parent's answers). A child forked while its parent's reader
//! stepped finds the flag held by that pid, with nobody to release it:
//! once the step is [`TAKE_OVER_AFTER`] overdue it takes the flag over, and
//! leaves the sources it may have caught half changed unclosed.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::answers::read_rate;
use super::refresh::Sources;
use super::state::PUBLISHED;

/// How long a step may hold the flag before a forked child, which finds it
/// held by its parent's pid, takes it over (a step takes microseconds).
const TAKE_OVER_AFTER: Duration = Duration::from_secs(1);

/// Our Realtime (ns) from which the next step is due: the last step's
/// start and the wait it set, at most [`TAKE_OVER_AFTER`].
static DUE_AT: AtomicU64 = AtomicU64::new(0);
/// The pid of the process whose read steps, 0 when none does.
static STEPPING: AtomicU32 = AtomicU32::new(0);

/// The sources, changed only by the read that holds [`STEPPING`].
struct Shared(UnsafeCell<Sources>);
// SAFETY: only the holder of STEPPING touches the cell.
unsafe impl Sync for Shared {}
static SOURCES: Shared = Shared(UnsafeCell::new(Sources::new(0, None)));

/// A read of the bounds at our Realtime `realtime`: steps the sources when
/// they are due (a load, a subtraction and a compare otherwise). A
/// Realtime more than the longest wait before the time due (stepped back)
/// is due at once; so is one at or after it.
#[inline]
pub(crate) fn keep(realtime: u64) {
    let ahead = DUE_AT.load(Ordering::Relaxed).wrapping_sub(realtime);
    // `ahead` in 1..=TAKE_OVER_AFTER: not yet; 0 wraps to the top.
    if ahead.wrapping_sub(1) >= TAKE_OVER_AFTER.as_nanos() as u64 {
        step(realtime);
    }
}

/// One step, if the flag is to be had: see the module docs.
#[cold]
#[inline(never)]
fn step(realtime: u64) {
    let pid = std::process::id();
    let from_parent = match STEPPING.compare_exchange(0, pid, Ordering::Acquire, Ordering::Relaxed)
    {
        Ok(_) => false,
        // A step under way in this process (on another thread, or on this
        // one under a signal handler): the state published serves.
        Err(held) if held == pid => return,
        // A parent's step, caught by the fork that made this process.
        Err(held) => {
            if STEPPING
                .compare_exchange(held, pid, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return;
            }
            true
        }
    };
    // Other reads look again only after a while: a step takes
    // microseconds, and a child finds a step its fork interrupted overdue
    // after that while.
    DUE_AT.store(due(realtime, TAKE_OVER_AFTER), Ordering::Relaxed);
    // SAFETY: STEPPING is ours: no other step runs in this process, and no
    // handler that interrupts this one steps.
    let sources = unsafe { &mut *SOURCES.0.get() };
    sources.belong_to(pid, from_parent);
    let (state, mut wait) = sources.advance();
    if let Some(mut state) = state {
        match our_accuracy() {
            Some(accuracy) => {
                (state.accuracy_ns, state.accuracy_q32) = accuracy;
                PUBLISHED.publish(&state);
            }
            // The clock is being started (by this thread, under the signal
            // handler this step runs in, or by another): no bound of ours
            // to add yet, and none to wait for. The sources are asked again
            // soon.
            None => wait = wait.min(START_WAIT),
        }
    }
    DUE_AT.store(due(realtime, wait), Ordering::Relaxed);
    STEPPING.store(0, Ordering::Release);
}

/// The Realtime `wait` after `realtime` (a wait of at most
/// [`TAKE_OVER_AFTER`], as [`keep`] needs).
fn due(realtime: u64, wait: Duration) -> u64 {
    realtime.wrapping_add(wait.min(TAKE_OVER_AFTER).as_nanos() as u64)
}

/// How soon the sources are asked again by a step that found the clock
/// not yet started.
const START_WAIT: Duration = Duration::from_millis(1);

/// Our Realtime's bound against the kernel's, ns, and how fast it grows,
/// ppb, once the clock has started (`None` while it starts: a step may be
/// a signal handler over the start, which would never end if the handler
/// waited for it, as a CI run's did): what [`getres`](crate::getres) states (which asks the kernel
/// whether it changed its rate, and follows a change), and the rate's
/// uncertainty it grows at. Readers grow it from the state's `as_of`
/// (earlier than now): never less than `getres` would say while the
/// kernel keeps its rate. A rate change between windups that no windup
/// saw yet leaves our Realtime behind the kernel's slew, on the side of
/// chronyd's correction, which the bounds hold already.
fn our_accuracy() -> Option<(u32, u32)> {
    let clock = crate::host::process::try_clock()?;
    let ns = crate::getres(crate::ClockId::Realtime).accuracy.as_nanos();
    let ppb = clock.bound.load().ppb;
    Some((
        u32::try_from(ns).unwrap_or(u32::MAX),
        // At most q32(MAX_RATE_PPB), some 2^22: a u32.
        read_rate(ppb) as u32,
    ))
}
