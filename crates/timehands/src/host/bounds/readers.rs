//! The bounds as programs meet them: each reader in a fresh process (this
//! test binary again, filtered to [`bounds_child`], as the process tests
//! run theirs), asking a chronyd of the test's own on loopback
//! (`fake_chronyd.rs`, named by `TIMEHANDS_CHRONYD`): an ordinary thread,
//! which then forks (the child asks from a socket of its own); a thread
//! that blocks every signal; a process whose only reads are in a SIGPROF
//! handler. Each gets chronyd's bound, synchronized, and the bounds add no
//! thread to the process (`/proc/self/task` counted around the reads).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::fake_chronyd::FakeChronyd;
use super::{BoundsSource, BoundsStatus, realtime_bounds};
use crate::host::process_tests::{assert_half_passes, fork_and, no_fork, report, verdict};

/// The child half's test, by its full path.
pub(super) const CHILD: &str = "host::bounds::readers::bounds_child";
/// How long a reader may take to get chronyd's bound before the half
/// says it did not (it takes milliseconds): a guard against a hang, not a
/// measure.
pub(super) const GUARD: Duration = Duration::from_secs(10);

/// The threads of this process.
fn tasks() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count)
}

/// Whether a read gives chronyd's bound, synchronized.
fn from_chronyd() -> bool {
    realtime_bounds()
        .is_ok_and(|b| (b.source, b.status) == (BoundsSource::Chronyd, BoundsStatus::Synchronized))
}

/// The clock started and read for a moment, so that whatever threads it
/// keeps are there before the bounds' reads are counted.
fn clock_started() {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(20) {
        crate::now();
    }
    std::thread::sleep(Duration::from_millis(20));
}

/// Reads the bounds until chronyd's come and `published` more states than
/// there were (this process's own steps, not a parent's state), with the
/// threads counted around the reads.
fn read_until_chronyd(published: u64) -> Result<(), String> {
    let before = tasks();
    let first = super::state::PUBLISHED.publications();
    let limit = Instant::now() + GUARD;
    while !(from_chronyd() && super::state::PUBLISHED.publications() >= first + published) {
        if Instant::now() > limit {
            return Err(format!("no bound from chronyd: {:?}", realtime_bounds()));
        }
    }
    let after = tasks();
    if after != before {
        return Err(format!("{before} threads before the reads, {after} after"));
    }
    Ok(())
}

/// An ordinary thread reads; then a forked child, whose own steps publish
/// chronyd's answers to its own socket.
fn ordinary_thread() -> Result<(), String> {
    clock_started();
    read_until_chronyd(1)?;
    if no_fork().is_none() {
        verdict(fork_and(|| {
            clock_started();
            read_until_chronyd(2)
        }))?;
    }
    read_until_chronyd(1)
}

/// A thread that blocks every signal first, as many libraries' helper
/// threads do.
fn blocking_thread() -> Result<(), String> {
    std::thread::spawn(|| {
        // SAFETY: a zeroed sigset_t is valid storage for sigfillset;
        // pthread_sigmask changes only this thread's mask.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        }
        clock_started();
        read_until_chronyd(1)
    })
    .join()
    .expect("the reader")
}

/// The handler's reads: chronyd's bounds, others, and none.
static FROM_CHRONYD: AtomicU64 = AtomicU64::new(0);
static OTHERS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_sigprof(_: libc::c_int) {
    if from_chronyd() {
        FROM_CHRONYD.fetch_add(1, Ordering::Relaxed);
    } else {
        OTHERS.fetch_add(1, Ordering::Relaxed);
    }
}

/// A process that reads nothing of timehands but in a SIGPROF handler (a
/// profiler's, at 5 kHz of CPU time, armed as the handler's reader kind
/// arms it): the handler's reads step the sources, until chronyd's bound
/// comes.
fn only_in_a_handler() -> Result<(), String> {
    let before = tasks();
    let limit = Instant::now() + GUARD;
    crate::diagnostics::readers::profile_until(Duration::from_micros(200), on_sigprof, || {
        FROM_CHRONYD.load(Ordering::Relaxed) >= 10 || Instant::now() >= limit
    })?;
    let (chronyd, others) = (
        FROM_CHRONYD.load(Ordering::Relaxed),
        OTHERS.load(Ordering::Relaxed),
    );
    println!("handlers: {chronyd} with chronyd's bound, {others} before it");
    let after = tasks();
    if chronyd < 10 {
        return Err(format!(
            "{chronyd} of {} handlers had chronyd's bound",
            chronyd + others
        ));
    }
    if after != before {
        return Err(format!(
            "{before} threads before the handlers, {after} after"
        ));
    }
    Ok(())
}

/// The child half: the reader its plan names.
#[test]
#[ignore = "the child half of the readers' tests, which run it"]
fn bounds_child() {
    let plan = std::env::var("TIMEHANDS_TEST_PLAN").expect("run by a readers' test");
    report(match plan.as_str() {
        "thread" => ordinary_thread(),
        "blocking" => blocking_thread(),
        "sigprof" => only_in_a_handler(),
        "migration" => super::refresh::counter_sources_tests::a_migration_played(),
        plan if plan.starts_with("ptp:") => {
            super::ptp4l_test::reads_in_the_slave_s_namespace(&plan["ptp:".len()..])
        }
        _ => Err(format!("unknown plan {plan}")),
    });
}

/// Runs the reader `plan` against a chronyd of the test's own: it passes,
/// and `sockets` sockets asked.
fn reader_passes(plan: &str, sockets: usize) {
    let chronyd = FakeChronyd::start();
    let address = chronyd.address.to_string();
    assert_half_passes(CHILD, plan, &[("TIMEHANDS_CHRONYD", &address)]);
    let peers = chronyd.peers();
    assert_eq!(peers.len(), sockets, "{plan}: asked from {peers:?}");
}

/// An ordinary thread gets chronyd's bound with no thread started; a
/// forked child gets it from a socket of its own (two sockets asked).
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn an_ordinary_thread_and_its_forked_child_get_chronyd_s_bound() {
    reader_passes("thread", if no_fork().is_none() { 2 } else { 1 });
}

/// A thread that blocks every signal gets the same bound, the same way.
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn a_thread_that_blocks_every_signal_gets_chronyd_s_bound() {
    reader_passes("blocking", 1);
}

/// A process whose only reads are in a SIGPROF handler gets it too: the
/// handler's reads keep the bounds.
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn reads_only_in_a_sigprof_handler_get_chronyd_s_bound() {
    reader_passes("sigprof", 1);
}

/// A migration played on a VMClock page (`counter_sources_tests.rs`): no
/// read after the marker changed gets a bound, from the device's clock or
/// chronyd's, until the sources answer anew.
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn a_played_migration_leaves_no_false_bound() {
    assert_half_passes(CHILD, "migration", &[]);
}
