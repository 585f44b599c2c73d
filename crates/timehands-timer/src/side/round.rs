//! The steps of an expiry round that the hard thread and the soft workers
//! share (`hard` and `soft` put them together into their rounds): queue
//! again what the last round lent out, take the due expiries under the
//! lock, set the alarm, and run the callbacks without it (the soft workers
//! first put them in the order of their bounds).
//!
//! A round takes at most a batch of steps, so that no round holds the
//! lock long, and a periodic timer is queued again at its next expiry by
//! the next round, once its callback is back: an expiry due meanwhile
//! comes out late, not twice at once.

use std::sync::Arc;

use timehands::Instant;

use super::{Queue, Queued, Side, State, TimerControl, cancel_all};
use crate::control::Take;
use crate::expiry::{Callback, Expiry};
use crate::periodic::forward;
use crate::record::{Due, Worker};
use crate::sync::Ordering;

/// A timer taken out of the queue in a round, its callback the round's.
pub(crate) struct Fired {
    control: Arc<TimerControl>,
    callback: Callback,
    due: Due,
    /// A periodic timer's next expiry, and the version it runs at.
    next: Option<(u64, u64)>,
}

/// A periodic timer whose callback ran, to queue again at `next`.
struct Ran {
    control: Arc<TimerControl>,
    version: u64,
    next: u64,
}

/// An expiry thread's buffers, kept from one round to the next.
pub(crate) struct Rounds {
    pub(crate) fired: Vec<Fired>,
    ran: Vec<Ran>,
    unrecorded: Vec<u64>,
    /// Where the thread stands, kept by the soft workers (see
    /// `record::Worker`).
    pub(crate) worker: Worker,
}

impl Rounds {
    /// Empty buffers, for a new expiry thread.
    pub(crate) fn new() -> Rounds {
        Rounds {
            fired: Vec::new(),
            ran: Vec::new(),
            unrecorded: Vec::new(),
            worker: Worker::default(),
        }
    }

    /// Whether the last round left periodic timers for the next to queue.
    pub(crate) fn lent(&self) -> bool {
        !self.ran.is_empty()
    }

    /// The soft side's order for the expiries taken (see `soft`): those
    /// still within their bounds at `now`, earliest bound first, then those
    /// beyond them already, earliest bound first. Equal bounds keep the
    /// order taken (the wheel's, for timers filed under one tick the order
    /// armed). The hard side has no bounds, and keeps its heap's order.
    pub(crate) fn order_by_bound(&mut self, now: u64) {
        self.fired
            .sort_by_key(|fired| fired.due.bound.map(|bound| (bound < now, bound)));
    }
}

impl<Q: Queue> Side<Q> {
    /// A round's start, under the lock: `false` if the side is stopping
    /// (the round then ends with [`Side::end_stopped`], after the lock);
    /// else the last round's periodic timers, and the busy expiries, are
    /// queued again.
    pub(crate) fn begin_round(&self, state: &mut State<Q>, rounds: &mut Rounds) -> bool {
        self.sleeps_for.store(u64::MAX, Ordering::Relaxed);
        if state.stopping {
            return false;
        }
        for Ran {
            control,
            version,
            next,
        } in rounds.ran.drain(..)
        {
            // Rescheduled meanwhile: its request queues it; cancelled: it
            // is done.
            if control.version() == Some(version) {
                state.queue(&control, next, next, version);
            }
        }
        while let Some(Queued {
            control,
            version,
            deadline,
            late_from,
        }) = state.busy.pop()
        {
            if control.version() == Some(version) {
                state.queue(&control, deadline, late_from, version);
            }
        }
        true
    }

    /// Takes due expiries out of the queue, in at most a batch of steps; a
    /// periodic timer's next expiry is computed now and queued when its
    /// callback is back.
    pub(crate) fn take_due(&self, state: &mut State<Q>, fired: &mut Vec<Fired>) {
        let now = self.clock.now().as_nanos();
        let grace = state.queue.grace();
        let mut budget = self.batch;
        while let Some(expiry) = state.queue.pop_due(now, &mut budget) {
            let Queued {
                control,
                version,
                deadline,
                late_from,
            } = expiry;
            control.set_queued(None);
            // At the end of time (u64::MAX ns, reached only on simulated
            // time) a periodic timer's next expiry saturates at `now`: the
            // series has no expiry after it, so it ends there, as a
            // one-shot timer.
            let series = control
                .period()
                .map(|period| forward(deadline, now, period))
                .filter(|&(next, _)| next > now);
            match control.take(version, series.is_some()) {
                Take::Fire(callback) => {
                    let bound = grace.map(|grace| {
                        late_from
                            .saturating_add(control.slack())
                            .saturating_add(grace)
                    });
                    fired.push(Fired {
                        control,
                        callback,
                        due: Due {
                            expiry: Expiry {
                                deadline: Instant::from_nanos(deadline),
                                overruns: series.map_or(0, |(_, overruns)| overruns),
                            },
                            late_from,
                            bound,
                        },
                        next: series.map(|(next, _)| (next, version)),
                    });
                }
                Take::Busy => state.busy.push(Queued {
                    control,
                    version,
                    deadline,
                    late_from,
                }),
                Take::Stale => {}
            }
        }
    }

    /// Sets the alarm to `at` (`u64::MAX` for none), telling callers first
    /// to ring it for a timer due before `rings_before` (`at`, or 0 while
    /// their requests could not be applied sooner: see `soft`), then takes
    /// the requests pushed by callers that may have seen the alarm as it
    /// was (see `requests`), unless requests taken before are not all
    /// applied yet; whether any requests are taken. The caller then comes
    /// back soon, to walk and apply them (none is walked here) and to look
    /// at the stack again.
    pub(crate) fn set_alarm(&self, state: &mut State<Q>, at: u64, rings_before: u64) -> bool {
        self.requests.set_alarm_at(rings_before);
        self.alarm.set((at != u64::MAX).then_some(at));
        state.alarm_at = at;
        if self.realtime {
            let for_a_timer = state.queue.next_work() == Some(at);
            self.sleeps_for
                .store(if for_a_timer { at } else { u64::MAX }, Ordering::Relaxed);
        }
        self.requests.take_after_alarm(&mut state.walk);
        !state.walk.is_empty()
    }

    /// Runs the callbacks a round took, without the lock, and records them;
    /// a periodic timer's callback goes back to its control, and the timer
    /// to the next round to queue.
    pub(crate) fn run_fired(&self, rounds: &mut Rounds) {
        let Rounds {
            fired,
            ran,
            unrecorded,
            worker,
        } = rounds;
        for Fired {
            control,
            mut callback,
            due,
            next,
        } in fired.drain(..)
        {
            let start = (self.clock.now().as_nanos(), &*worker);
            let returned = self.record.run(&mut callback, due, start, unrecorded);
            let Some((next, version)) = next else {
                continue;
            };
            if !returned {
                // Left armed, a timer whose callback panicked would be
                // re-armed every period with nothing to run, for ever.
                control.disarm();
            } else if control.give_back(callback).is_none() {
                ran.push(Ran {
                    control,
                    version,
                    next,
                });
            }
        }
    }

    /// After a round that found the side stopping: the periodic timers it
    /// would have queued are cancelled, their callbacks dropped here,
    /// without the lock (their controls are all that still reaches them
    /// besides the handles).
    pub(crate) fn end_stopped(&self, rounds: &mut Rounds) {
        let ran = rounds.ran.drain(..).map(|ran| ran.control).collect();
        drop(cancel_all(ran));
    }
}
