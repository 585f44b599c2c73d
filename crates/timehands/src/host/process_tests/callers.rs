//! The same clock for every caller, as programs have their threads read it:
//! in a fresh process each, one reader of one kind reads for a while, and
//! what the clock became is compared with what an ordinary thread's reads
//! make of it (see [`every_caller_gets_the_clock_an_ordinary_thread_gets`]).
//!
//! The kinds are the ones that once got another clock, when the clock
//! guessed from the signal mask whether a reader ran in a handler (a thread
//! that blocks every signal was taken for one, and never steered):
//!
//! - `ordinary`: a thread that reads;
//! - `blocked`: a thread that blocks every signal first, as many libraries'
//!   helper threads do;
//! - `daemon`: handlers for SIGHUP and SIGTERM, both blocked but around a
//!   `ppoll`, nginx's way;
//! - `handler`: a process whose only reads are in a SIGPROF handler at
//!   1 kHz (a profiler in a program that does not read the clock);
//! - `fifo`: a SCHED_FIFO thread at priority 80 on one CPU, the first
//!   reader (where the process may take SCHED_FIFO).
//!
//! What is compared is read off the clock's own state, never through
//! `info` or `getres` (which wind up, and would hide a clock its reads left
//! unkept): the counter, the steerings, the stated bound, the windups its
//! readers made; and what the library may not take: no thread of its own,
//! RLIMIT_RTPRIO as it was.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{PROCESS_CHILD, assert_half_passes};
use crate::diagnostics::readers::Reader;
use crate::host::process::clock;
use crate::{ClockId, gettime, now, now_coarse};

/// How long the reader reads: thirty steerings' worth.
const READING: Duration = Duration::from_millis(300);

/// The threads of this process, where the OS lists them (`/proc`).
fn threads() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/task").ok()?.count())
}

/// The soft and hard RLIMIT_RTPRIO, where the OS has it.
fn rtprio() -> Option<(libc::rlim_t, libc::rlim_t)> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is a valid rlimit to write.
        (unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) } == 0)
            .then_some((limit.rlim_cur, limit.rlim_max))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    None
}

/// Reads of every kind the clock has, as a program's would: precise,
/// Realtime, coarse.
fn read_every_clock() -> u64 {
    now().as_nanos() ^ gettime(ClockId::Realtime).subsec_nanos() as u64 ^ now_coarse().as_nanos()
}

/// What the readers read, so that no read is left out, and how many times
/// the SIGPROF handler ran.
static SINK: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn read_in_handler(_: libc::c_int) {
    SINK.fetch_xor(read_every_clock(), Ordering::Relaxed);
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

/// The reader of `kind` reads for [`READING`], a thousand reads a batch;
/// `Ok(false)` where the kind cannot be had here (SCHED_FIFO refused).
fn read_as(kind: Reader) -> Result<bool, String> {
    let batch = || {
        for _ in 0..1_000 {
            SINK.fetch_xor(read_every_clock(), Ordering::Relaxed);
        }
    };
    let read = kind.read(READING, batch, || (), read_in_handler)?;
    if kind == Reader::Handler && HANDLED.load(Ordering::Relaxed) == 0 {
        return Err("the SIGPROF handler never ran".to_string());
    }
    Ok(read.is_some())
}

/// The child half: the reader of the kind in `plan` reads, and the child
/// prints what the clock became (a `CALLER` line), or that the kind could
/// not be had here.
pub(super) fn caller(kind: &str) -> Result<(), String> {
    let (threads_before, rtprio_before) = (threads(), rtprio());
    if !read_as(Reader::of(kind)?)? {
        println!("CALLER {kind} skipped: SCHED_FIFO is not allowed here");
        return Ok(());
    }
    let clock = clock();
    let steerings = clock.steering().steerings();
    println!(
        "CALLER {kind} counter={} steerings={steerings} accuracy_ns={} reader_windups={}",
        clock.timekeeper().counter().kind(),
        clock.stated_bound(),
        clock.reader_windups.load(Ordering::Relaxed),
    );
    // A joined thread may linger in /proc a moment (under qemu-user, say):
    // a thread of the library's would stay.
    let mut threads_after = threads();
    for _ in 0..500 {
        if threads_after == threads_before {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        threads_after = threads();
    }
    if threads_after != threads_before {
        return Err(format!(
            "{threads_after:?} threads after the reads, {threads_before:?} before"
        ));
    }
    if rtprio() != rtprio_before {
        return Err(format!(
            "RLIMIT_RTPRIO {:?} after the reads, {rtprio_before:?} before",
            rtprio()
        ));
    }
    Ok(())
}

/// One kind's `CALLER` line, parsed: its counter and its figures.
#[derive(Debug)]
struct Became {
    counter: String,
    steerings: u64,
    accuracy_ns: u64,
    reader_windups: u64,
}

/// The `CALLER` line of `stdout`, or `None` where the kind was skipped.
fn became(stdout: &str) -> Option<Became> {
    let line = stdout.lines().find(|l| l.starts_with("CALLER "))?;
    if line.contains("skipped") {
        return None;
    }
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    let number = |name: &str| field(name).parse().expect("a number");
    Some(Became {
        counter: field("counter").to_string(),
        steerings: number("steerings"),
        accuracy_ns: number("accuracy_ns"),
        reader_windups: number("reader_windups"),
    })
}

/// Every kind of reader, in a process of its own, leaves the clock as an
/// ordinary thread's reads do: on the same counter, steered, stating a
/// bound within twice an ordinary thread's (and the 5 µs a loaded
/// machine's brackets may add), wound up by its readers about as often;
/// and no kind makes the library start a thread or change RLIMIT_RTPRIO
/// (each child checks). Before, a thread that blocked its signals was taken
/// for a signal handler: its process stayed on the kernel's clock with the
/// startup's 50 µs windups, never steered, and stated 59 µs.
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn every_caller_gets_the_clock_an_ordinary_thread_gets() {
    let mut ordinary: Option<Became> = None;
    // The ordinary first: the others are compared with it.
    for kind in Reader::ALL.map(Reader::name) {
        let stdout = assert_half_passes(PROCESS_CHILD, &format!("caller:{kind}"), &[]);
        let Some(this) = became(&stdout) else {
            println!("{kind}: skipped");
            continue;
        };
        assert!(this.steerings > 0, "{kind} was never steered: {this:?}");
        let Some(ordinary) = &ordinary else {
            ordinary = Some(this);
            continue;
        };
        assert_eq!(this.counter, ordinary.counter, "{kind}: {this:?}");
        assert!(
            this.accuracy_ns <= 2 * ordinary.accuracy_ns + 5_000,
            "{kind} states {} ns, an ordinary thread {} ns",
            this.accuracy_ns,
            ordinary.accuracy_ns
        );
        assert!(
            this.reader_windups <= 4 * ordinary.reader_windups + 100,
            "{kind}: {} windups by readers, an ordinary thread {}",
            this.reader_windups,
            ordinary.reader_windups
        );
    }
}
