//! `timehands load`: a timer stress: many ordinary threads sleeping random
//! sub-millisecond times.
//!
//! N ordinary (SCHED_OTHER) threads each sleep a random time below one
//! millisecond with a relative `clock_nanosleep`, over and over, as Gratian
//! Crisan's test load does: the kind of sloppy timeouts (retries, condition
//! waits) an ordinary program arms by the thousand. On PREEMPT_RT their
//! expiries stacked in front of a real-time thread's and made cyclictest's
//! worst case grow; run `timehands latency` beside it to see what they do
//! here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::Rng;

use crate::interrupt;
use crate::latency::{duration, sleep_for};

/// The longest sleep, exclusive: one millisecond.
const MAX_SLEEP_NS: u64 = 1_000_000;
/// More threads than this is a typo, not a load.
const MAX_THREADS: u32 = 4096;
/// How often the main thread looks at the clock and the Ctrl-C flag.
const POLL: Duration = Duration::from_millis(20);

/// Flags of `timehands load`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  timehands load -t 6              six threads until Ctrl-C
  timehands load -t 6 -D 16h       a 16-hour soak
  timehands load -t 6 -D 60 & timehands latency -p 80 -m -q -D 60")]
pub struct Args {
    /// Number of threads doing random sub-millisecond sleeps.
    #[arg(short = 't', long = "threads", value_name = "NUM", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_THREADS as i64))]
    pub threads: u32,

    /// Stop after TIME: seconds, or a number with s, m, h or d; without it,
    /// run until Ctrl-C.
    #[arg(short = 'D', long = "duration", value_name = "TIME", value_parser = duration::parse)]
    pub duration: Option<Duration>,
}

/// Runs `timehands load`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let stop = interrupt::stop_on_interrupt()?;
    let until = args.duration.map_or("Ctrl-C".to_string(), |d| {
        format!("{} s or Ctrl-C", d.as_secs())
    });
    crate::output::print(&format!(
        "load: {} threads sleeping random times below 1 ms until {until}\n",
        args.threads
    ))?;
    let started = Instant::now();
    let sleeps = std::thread::scope(|scope| -> anyhow::Result<u64> {
        let mut handles = Vec::new();
        for i in 0..args.threads {
            let spawned = std::thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn_scoped(scope, || sleep_randomly(stop));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    // The threads that did start must end for the scope to.
                    stop.store(true, Ordering::Relaxed);
                    return Err(e).context("cannot start a load thread");
                }
            }
        }
        wait(stop, args.duration, started);
        stop.store(true, Ordering::Relaxed);
        Ok(handles.into_iter().map(|h| h.join().unwrap_or(0)).sum())
    })?;
    let seconds = started.elapsed().as_secs_f64();
    crate::output::print(&format!(
        "load: {} threads, {seconds:.1} s, {sleeps} sleeps ({:.0} per second)\n",
        args.threads,
        sleeps as f64 / seconds
    ))
}

/// Blocks until `duration` has passed since `started` or the flag is raised.
fn wait(stop: &AtomicBool, duration: Option<Duration>, started: Instant) {
    while !stop.load(Ordering::Relaxed) {
        if duration.is_some_and(|d| started.elapsed() >= d) {
            return;
        }
        std::thread::sleep(POLL);
    }
}

/// Sleeps random times in [0, 1 ms) until the flag is raised; returns how many
/// sleeps it did.
fn sleep_randomly(stop: &AtomicBool) -> u64 {
    let mut rng = rand::rng();
    let mut sleeps = 0;
    while !stop.load(Ordering::Relaxed) {
        // An interrupted sleep is as good as a finished one: it armed a timer.
        let _ = sleep_for(rng.random_range(0..MAX_SLEEP_NS));
        sleeps += 1;
    }
    sleeps
}
