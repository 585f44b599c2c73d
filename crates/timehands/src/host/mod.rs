//! The process-wide clock: the engine on the best counter this machine has,
//! steered to the kernel's clocks.
//!
//! # Choosing the counter
//!
//! The first read (never anything before `main`) starts the clock on the
//! kernel's CLOCK_MONOTONIC itself: nothing to choose, so the first read costs
//! tens of microseconds, with CLOCK_MONOTONIC's own offset (none) and error
//! bound from the start. The choice costs more than that in a VM, where every
//! CPUID traps to the hypervisor (some microseconds a leaf) and the kernel's
//! clocksource is a file to read; so it is made at the first windup, on the
//! upkeep thread (below), or by [`info`](crate::info()) if it asks first: on x86_64 the
//! TSC, when CPUID says it is invariant and the kernel itself keeps time with
//! it (its clocksource is `tsc`, which Linux grants only to a TSC it found
//! synchronized across CPUs); on aarch64 the generic timer's CNTVCT_EL0,
//! unless it reads the wall clock (qemu-user's emulation of it steps with Realtime);
//! otherwise, or when `TIMEHANDS_COUNTER=kernel`, the kernel's clock stays, so
//! the clock is correct everywhere and fast where it can be.
//! `TIMEHANDS_COUNTER=tsc` takes the hardware counter (the TSC, the generic
//! timer) whatever the checks say. [`info`](crate::info())
//! tells what was chosen and why.
//!
//! The TSC takes over only once its frequency is measured against
//! CLOCK_MONOTONIC over [`SETTLE`](choice::SETTLE) (10 ms, while readers read the kernel's
//! clock; longer on a machine that preempts the brackets): a frequency
//! CPUID states is some hundreds of ppm off in a VM, which puts a fresh
//! process microseconds off the kernel by its first steering.
//!
//! The move is a retirement ([`Timekeeper::retire`](crate::Timekeeper::retire)) of the timekeeper on the
//! kernel's clock for one on the chosen counter that starts where it stops.
//! The thread waits until that point falls due before it moves the readers,
//! so time neither steps back nor runs ahead of CLOCK_MONOTONIC; the first
//! timekeeper winds up every [`STARTUP_INTERVAL`](clock::STARTUP_INTERVAL), so that the point is near.
//!
//! A check of our own follows on the TSC: the same thread measures each CPU's
//! TSC against the first CPU's (`tsc_sync`, as Linux does at boot); TSCs found
//! apart are dropped for the kernel's clock, as the watchdog drops a counter
//! (below), and the verdict joins the others in [`info`](crate::info()).
//!
//! # How a read finds the clock
//!
//! `now()` loads one word ([`READER`](published::READER)): the address of the timekeeper in use
//! and, in its low bits, how to read its counter (`rdtscp`, `lfence; rdtsc`,
//! or the counter's own read), so that a read tests nothing else before the
//! counter read. Then the engine's first nanosecond segment of the current
//! hands gives the time with one multiply-add (or its other segment, where a
//! rate change splits the line; see [`Timekeeper::nanos_at`](crate::Timekeeper::nanos_at)).
//! The word is 0 until the clock starts, and changes when a timekeeper takes
//! over from another.
//!
//! # fork(), stops, sandboxes
//!
//! Every step of the clock's life that must be seen whole (a hand-over, a
//! steering) runs under the steering lock, which a `pthread_atfork` handler
//! takes before a fork (`process.rs`, which says in one place what a child
//! forgets): a child never sees one half done, and starts its own upkeep
//! thread when a read needs it. A stop (SIGSTOP, a paused VM) leaves reads
//! standing at the promise; the windup after it resumes on CLOCK_MONOTONIC
//! wherever the counter's rate would have put it. The error bound
//! [`getres`](crate::getres()) reports is true at every moment while the
//! kernel's clock keeps its rate, and through a change of it where the
//! kernel says its rate (`getres` asks): the offset measured last plus the
//! frequency's uncertainty times the time since. A change only a
//! measurement finds is in it from the windup that finds it.
//!
//! # Staying with the kernel
//!
//! The clock has CLOCK_MONOTONIC's origin from its first read, and the steering
//! of `steer.rs` keeps it there: at windups it compares itself with the kernel
//! through tight brackets and slews its phase and trims its rate, never
//! stepping. The kernel's clock itself changes rate (chrony slews through the
//! tick at 8.3 %, PTP daemons step the frequency): every windup looks for
//! such a change (the kernel's word where it gives one, Linux's `adjtimex`;
//! a measurement elsewhere), follows the new rate from its own switch
//! point, and closes the gap it left within some tens of milliseconds,
//! running fast, or slow as far as standing still. Realtime and Boottime are
//! Monotonic plus the kernel's own offsets (REALTIME − MONOTONIC, BOOTTIME −
//! MONOTONIC), re-read at each windup, so they follow `settimeofday` and
//! suspend within one windup (a Realtime read that finds a windup due reads
//! again after it); on Linux, while reads come, at once: the upkeep thread
//! sleeps on the kernel's notice of a step (a timerfd) and winds up.
//!
//! # When the counter goes wrong
//!
//! Each steering also asks the watchdog (`watchdog.rs`) whether the counter
//! still advances as CLOCK_MONOTONIC_RAW (plus any suspend) says. One that went
//! backwards, stopped or strayed in rate is retired ([`Timekeeper::retire`](crate::Timekeeper::retire))
//! for a timekeeper on the kernel's CLOCK_MONOTONIC that starts where the
//! retired one stopped, so time never steps back (but for reads behind the
//! base, which the engine clamps to it: a counter that went back shows as time
//! standing at the last windup, a step back of at most the reads made since);
//! [`info`](crate::info()) reports the fallback and its reason. Readers find windups due
//! after a counter went back too; a counter that stopped, which no reader
//! can notice (its reads never fall due), is caught by the upkeep thread's
//! last windup before it parks, when the windups readers made stopped.
//!
//! A suspend is not a failure: an invariant TSC counts on through s2idle,
//! where CLOCK_MONOTONIC stops, and the watchdog's reference counts the
//! suspend in. The host's timekeepers [follow](crate::Builder::follows_reference)
//! CLOCK_MONOTONIC: no read extrapolates the counter past the current
//! timehands' promise (two windup intervals at most), and the windup the
//! first reader after a resume makes (see [`Timekeeper::windup_following`](crate::Timekeeper::windup_following))
//! resumes the time from CLOCK_MONOTONIC, read after the counter, plus an
//! interval, rather than an hour ahead of it. The steering slews that last
//! interval away. The steering's rate baseline starts again after a suspend,
//! so that the counts of the suspend are not taken for a frequency. A TSC
//! that restarts from 0 (S3 on some machines) reads behind its base: time
//! stands at the last windup until the watchdog fails over.
//!
//! # Who winds up
//!
//! Keeping time costs what the reading needs, and nothing while nobody
//! reads. Precise readers wind up themselves: a read that finds its hands a
//! [`WINDUP_INTERVAL`](clock::WINDUP_INTERVAL) old winds up (and steers every 10 ms, or at once
//! after a change of the kernel's rate), about a microsecond some hundred
//! times a second for a program that reads
//! all the time ([`Info::reader_windups`](crate::Info::reader_windups)).
//! No steering waits for another's windup: it makes its writes under one
//! hold of the engine's writer lock, taken only where no windup holds it
//! (see `windup.rs`), since the reader may be a real-time thread and the
//! holder a preempted one. A read that stood at its hands' promise (no
//! windup for two intervals: a stop, a suspend, a program that reads
//! seldom) winds up once and reads again
//! ([`Info::standing_reads`](crate::Info::standing_reads)); where another
//! thread holds the windup (or the thread a signal handler interrupted), it
//! waits for nothing and vouches for CLOCK_MONOTONIC less the stated bound
//! (`read::stand_in`). The upkeep thread (`upkeep.rs`) runs only while the
//! clock is read: a tick apart while coarse clocks are read (they read no
//! counter, so they cannot find a windup due), at the highest real-time
//! priority the process may take, a few times a second while precise reads
//! come, and it parks, with no wakeup at all, once nothing is read
//! ([`wake.rs`](wake) says how a read wakes it). Where it may not take a
//! real-time priority (or was ever held up half a tick, or a sandbox
//! refuses the thread), coarse reads check ours against the kernel's coarse
//! clock, which the kernel's timer interrupt keeps. The thread's ticks leave
//! the coarse time ready for [`now_coarse`](crate::now_coarse()) in one
//! word ([`COARSE_NANOS`](published::COARSE_NANOS)); every windup leaves
//! the whole seconds of each clock as hints for
//! [`gettime`](crate::gettime()), which then splits nanoseconds into seconds
//! without a division.
//!
//! # Wherever `clock_gettime` is
//!
//! POSIX lets a signal handler call `clock_gettime`, and programs do
//! (profilers stamp samples in `SIGPROF` handlers, tracers fire probes in
//! handlers). So every read is async-signal-safe: nothing on a read's path
//! waits for a lock, allocates or starts a thread, and a handler that
//! interrupts its own thread halfway through any step of the clock's life
//! (its start, a windup, a steering, a hand-over, a fork) reads correct
//! time. The locks a read meets are tried, never waited for; the error
//! bound is loaded without a lock (`stated_bound.rs`); the first read
//! starts the clock without allocating, and a read during a start it cannot
//! wait for asks the kernel, on which the clock starts exactly; the upkeep
//! thread is started, and a failover made, only by a read that can tell it
//! runs outside any handler (`os::outside_signal_handler`), and otherwise
//! by the next one that can.

mod choice;
mod clock;
mod counter;
mod fork_points;
mod handover;
mod info;
// The clock under fork(), SIGSTOP and a sandbox: where those exist.
mod process;
#[cfg(all(test, unix))]
mod process_tests;
mod published;
mod read;
#[cfg(test)]
mod tests;

pub(crate) mod bounds;
mod brackets;
pub(crate) mod instant;
pub(crate) mod kernel_clocks;
pub(crate) mod mock;
#[cfg(test)]
mod simulated_kernel;
mod stated_bound;
pub(crate) mod steer;
pub(crate) mod trace;
mod upkeep;
mod wake;
pub(crate) mod watchdog;
mod windup;

pub use choice::Verdict;
pub use counter::CounterKind;
pub use info::{Info, Resolution, getres, info};
pub(crate) use process::clock;
#[cfg(unix)]
pub(crate) use process::register_before_main as register_fork_handlers_before_main;
pub use read::{
    ClockId, gettime, now, now_coarse, now_coarse_coherent, now_coherent, now_unordered,
    try_gettime,
};
