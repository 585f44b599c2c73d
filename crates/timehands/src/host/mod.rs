//! The process-wide clock: the engine on the best counter this machine has,
//! steered to the kernel's clocks, kept by its readers.
//!
//! # Who keeps the time
//!
//! Nobody but the readers, as the kernel's tick keeps the kernel's clock:
//! the clock starts no thread, takes no priority, and reads no signal mask.
//! A read that finds its hands a windup interval old winds up; the windup
//! steers every 10 ms, follows a change of the kernel's rate, and while the
//! counter is being chosen takes a step of the choice (`windup.rs`). Each
//! step tries its locks and leaves the work to whoever holds them, and
//! allocates nothing, so that any read can take it: a signal handler's
//! (even one that interrupted its own thread halfway through a step), a
//! thread's that blocks every signal, a real-time thread's. A read costs,
//! states and leaves the clock the same whoever makes it. A process that
//! reads now and then winds up now and then, and one that stopped reading
//! costs nothing at all. The coarse clocks are the kernel's (its timer
//! interrupt keeps them, which no scheduler holds up), less 50 µs, so that
//! they are never ahead of a precise read (`read.rs`).
//!
//! # Choosing the counter
//!
//! The first read (never anything before `main`) starts the clock on the
//! kernel's CLOCK_MONOTONIC itself: nothing to choose, so the first read costs
//! tens of microseconds, with CLOCK_MONOTONIC's own offset (none) and error
//! bound from the start. The first windup (some 50 µs of reads on, or the
//! next read of a program that reads seldom) chooses (`choice.rs`): on
//! x86_64 the TSC, when CPUID says it is invariant and the kernel itself
//! keeps time with it (its clocksource is `tsc`, which Linux grants only to
//! a TSC it found synchronized across CPUs), or, under a hypervisor's
//! paravirtual clocksource, on its own evidence once a program ran the
//! cross-CPU check ([`check_across_cpus`](crate::check_across_cpus()), in
//! `cross_cpu.rs`); on aarch64 the generic timer's CNTVCT_EL0, unless it
//! reads the wall clock (qemu-user's emulation of it steps with Realtime);
//! otherwise, or when `TIMEHANDS_COUNTER=kernel`, the kernel's clock stays,
//! so the clock is correct everywhere and fast where it can be.
//! `TIMEHANDS_COUNTER=tsc` takes the hardware counter (the TSC, the generic
//! timer) whatever the checks say. [`info`](crate::info()) tells what was
//! chosen and why.
//!
//! The TSC takes over only once its frequency is measured against
//! CLOCK_MONOTONIC over [`SETTLE`](choice::SETTLE) (10 ms, a step at each
//! windup, while readers read the kernel's clock; longer on a machine that
//! preempts the brackets): a frequency CPUID states is some hundreds of ppm
//! off in a VM, which puts a fresh process microseconds off the kernel by
//! its first steering.
//!
//! The move is a retirement ([`Timekeeper::retire`](crate::Timekeeper::retire)) of the timekeeper on the
//! kernel's clock for one on the chosen counter that starts where it stops
//! (`handover.rs`). The readers stay on the retired one, which is right up
//! to that point, until a windup finds the point come and moves them, so
//! time neither steps back nor runs ahead of CLOCK_MONOTONIC; the first
//! timekeeper winds up every [`STARTUP_INTERVAL`](clock::STARTUP_INTERVAL), so that the point is near.
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
//! steering, a step of the choice) runs under the steering lock, which a
//! `pthread_atfork` handler takes before a fork (`process.rs`, which says
//! in one place what a child forgets): a child never sees one half done,
//! and its reads take the steps on. A stop (SIGSTOP, a paused VM) leaves
//! reads standing at the promise; the windup after it resumes on
//! CLOCK_MONOTONIC wherever the counter's rate would have put it. The error
//! bound [`getres`](crate::getres()) reports is true at every moment while
//! the kernel's clock keeps its rate, and through a change of it where the
//! kernel says its rate (`getres` asks): the offset measured last plus the
//! frequency's uncertainty times the time since. A change only a
//! measurement finds is in it from the windup that finds it. A sandbox
//! that refuses `adjtimex` is asked once, and `info` says so.
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
//! again after it, however rare reads are).
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
//! after a counter went back too. A counter that stops is found by the
//! first read after it that stands at its hands' promise, where it fails
//! to move: a read never falls due on a counter that does not move, so a
//! stopped TSC (which no invariant TSC is) shows as time standing still
//! until `getres`, `info` or a coarse read past the bound winds up.
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
//! # Wherever `clock_gettime` is
//!
//! POSIX lets a signal handler call `clock_gettime`, and programs do
//! (profilers stamp samples in `SIGPROF` handlers, tracers fire probes in
//! handlers). So every read is async-signal-safe: nothing on a read's path
//! waits for a lock, allocates or starts a thread, and a handler that
//! interrupts its own thread halfway through any step of the clock's life
//! (its start, a windup, a steering, a step of the choice, a hand-over, a
//! fork) reads correct time. The locks a read meets are tried, never
//! waited for; the error bound is loaded without a lock
//! (`stated_bound.rs`); what the steps write down for `info` is text of a
//! fixed size (`text.rs`); a read that stood at its hands' promise (no
//! windup for two intervals: a stop, a suspend, a program that reads
//! seldom) winds up once and reads again
//! ([`Info::standing_reads`](crate::Info::standing_reads)); where another
//! thread holds the windup (or the thread a signal handler interrupted), it
//! waits for nothing and vouches for CLOCK_MONOTONIC less the stated bound
//! (`read::stand_in`).

mod choice;
mod clock;
mod coarse_limit;
mod counter;
mod cross_cpu;
mod fork_points;
mod handover;
mod info;
mod life;
pub(crate) mod page;
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
mod text;
pub(crate) mod trace;
pub(crate) mod watchdog;
mod windup;

pub use choice::Verdict;
pub use counter::CounterKind;
pub use cross_cpu::check_across_cpus;
pub use info::{Info, Resolution, getres, info};
pub(crate) use process::clock;
#[cfg(unix)]
pub(crate) use process::register_before_main as register_fork_handlers_before_main;
pub use read::{
    ClockId, gettime, now, now_coarse, now_coarse_coherent, now_coherent, now_unordered,
    try_gettime,
};
