//! The timehands: a ring of snapshots that readers use without locks.
//!
//! # The model
//!
//! Time is a function of the counter, built of straight segments. A *hands*
//! describes the function from its `base` (the counter value the writer sampled)
//! onward: up to its `switch` point time runs at `scale_before`, after it at
//! `scale_after` for `slew_len` counts and then at `settled`, and `at_switch` is
//! the time at the switch point. The middle segment is an `adjtime` slew,
//! planned whole (`discipline.rs`): it runs at its rate until its amount is
//! used up and then stops, however late the next windup comes, so a slew
//! neither stalls between windups nor runs past its amount. A reader takes
//! the current hands, reads the counter
//! and evaluates; [`Line::uptime_at`](line::Line::uptime_at) is the one conversion routine that
//! readers and the writer share.
//!
//! Each hands also carries its line up to a windup due in whole nanoseconds,
//! as one or two straight segments (`nanos.rs`): a read of nanoseconds
//! through them is one multiply-add after the counter read, and equals the
//! floor of [`Line::uptime_at`](line::Line::uptime_at) in nanoseconds exactly, so it inherits every
//! guarantee below. The first segment, the ticket and the boottime offset
//! share the slot's first cache line.
//!
//! A windup samples the counter and publishes a new hands that continues the old
//! function exactly (so no windup ever steps time, however late it comes: the
//! delta times the scale is a full 128-bit product). A rate change does not take
//! effect at the sample, as in the BSD kernels, but at a switch point a little
//! in the future.
//!
//! # Why switch points, and the promise
//!
//! In user space the writer can be preempted between any two instructions. If it
//! samples the counter, stalls, and then publishes a lower scale, readers that
//! meanwhile evaluated the old hands far past the sample returned more than
//! readers of the new hands return afterwards: time goes backwards. So:
//!
//! - every hands *promises* that no later hands changes the rate before
//!   `switch + interval` counts from its base. A reader whose counter is below the
//!   promise needs nothing else: every hands that can ever be published agrees
//!   with this one there. That is the common case: one state load, the hands,
//!   one counter read, one multiplication, and no store.
//! - a reader past the promise looks at the state again after reading the
//!   counter. If the writer has marked a candidate *pending* whose switch point
//!   the reader's counter has passed, the reader cancels it (one CAS) before it
//!   returns: no reader ever computes a time that a published hands contradicts.
//! - the writer marks its candidate pending, then reads the counter once more.
//!   If it is already past the switch point, or if its publishing CAS finds the
//!   candidate cancelled, it starts again from a new sample.
//!
//! Readers never wait: a pending candidate never blocks them, and a writer stalled
//! anywhere leaves them reading the old hands, which stays valid. The proof that
//! the two counter reads (the writer's check, the reader's late read) cannot both
//! miss each other is the pair of `SeqCst` fences, see `past_promise` and
//! `publish`.
//!
//! # Following a reference
//!
//! A counter may count time that the clock it follows does not: an
//! invariant TSC runs on through a suspend, where CLOCK_MONOTONIC stops. A
//! timekeeper built to [follow a reference](Builder::follows_reference)
//! never extrapolates past the promise: a read there stands at the
//! promise's time (every hands agrees with the current one up to it, so no
//! reader asks anything, and none cancels), until a windup, which
//! [compares the line with the reference](Timekeeper::windup_following) and
//! resumes on it, where the counter ran through a gap the reference did not
//! see or a stop let the rate's error add up. No read is then more than the
//! promise (two intervals) ahead of the reference, and none steps back: the
//! new hands starts no earlier than the promise's time.
//!
//! # Retiring
//!
//! A timekeeper whose counter has gone wrong is [retired](Timekeeper::retire)
//! for a successor on another counter, without a backward step. The retirement
//! is a candidate like a rate change: its switch point, the *retire point*, is
//! at the promise or a lead ahead, whichever is later, and readers past it
//! cancel it while it is pending. Once it is published no hands follows, and
//! every read is clamped to the retire point: time on the retired timekeeper
//! freezes there, and the successor starts from that time.
//!
//! # The ring
//!
//! Candidates are written into the slot after the current one, so that a reader
//! still reading an older hands keeps a consistent copy for `hands - 1` more
//! windups; each slot carries the ticket of the hands it holds (0 while it is
//! written) and a reader that finds the ticket changed under it starts again.
//! With one slot (platforms without a free-running counter, as RTEMS allows) the
//! writer must rewrite the current hands in place, and readers retry for the few
//! instructions that takes: there the windup must not be preempted, as a tick
//! interrupt is not.
//!
//! # The files
//!
//! - `bintime.rs`: the time format, seconds and a 64-bit binary fraction;
//! - `counter.rs`: what a counter must give;
//! - `line.rs`: the timeline a hands describes, and its nanosecond segments
//!   (`nanos.rs`);
//! - `slot.rs`: a hands in atomics, with the ticket that makes a copy
//!   consistent; `state.rs`: the word that names the current one;
//! - `timekeeper.rs`: the readers; `writer.rs`: windups, rate changes,
//!   steps and retirement; `builder.rs`: the settings;
//! - `discipline.rs`: frequency adjustment and slews; `lock.rs`: the writer
//!   lock; `sync.rs`: the atomics (std's, loom's, or split words);
//! - `capture.rs`: the time at a captured count (a pulse's edge);
//!   `pps.rs`: the PPS discipline, on the estimator in `kalman.rs`;
//!   `ntp.rs`: `ntp_adjtime`'s PLL/FLL and the leap second.

pub(crate) mod bintime;
mod builder;
mod capture;
pub(crate) mod counter;
pub(crate) mod discipline;
mod kalman;
mod line;
mod lock;
pub(crate) mod nanos;
mod noise;
mod ntp;
mod pps;
mod pulse;
mod slot;
mod start;
pub(crate) mod state;
mod stats;
pub(crate) mod sync;
mod timekeeper;
mod writer;
mod writes;

pub use builder::Builder;
pub use builder::{DEFAULT_HANDS, DEFAULT_WINDUP_INTERVAL};
pub use capture::Stamp;
pub use ntp::{Ntp, NtpState, NtpTime, Status as NtpStatus, TimeState, Timex};
pub use pps::{Pps, PpsState, PpsStatus};
pub use state::MAX_HANDS;
pub use stats::Stats;
#[cfg(feature = "std")]
pub(crate) use timekeeper::Due;
pub use timekeeper::Timekeeper;
pub use writer::Windup;
#[cfg(feature = "std")]
pub(crate) use writes::Writes;
