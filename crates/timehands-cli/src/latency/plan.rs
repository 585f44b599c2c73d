//! A run's plan: the flags checked and cyclictest's rules applied (which
//! CPUs, how many threads, what policy and priority, how they wait).

use anyhow::bail;

use super::clock::Clock;
use super::measure::{Limits, ThreadPlan};
use super::realtime::{self, Policy};
use super::stats::Unit;
use super::{Args, DEFAULT_DISTANCE_US, MAX_HISTOGRAM_BYTES, ThreadCount, affinity};

/// How the threads wait, from the flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// `clock_nanosleep` to absolute deadlines, cyclictest's default.
    Absolute,
    /// `clock_nanosleep` for an interval (`-r`).
    Relative,
    /// The `nanosleep` system call (`-s`).
    System,
    /// A POSIX interval timer (`-x`).
    PosixTimer,
    /// A hard timer of the timer service (`--service`).
    Service,
}

/// A run's settings once the flags are checked and cyclictest's rules
/// applied.
pub struct Plan {
    /// Each thread's plan.
    pub threads: Vec<ThreadPlan>,
    /// When they stop, and their unit.
    pub limits: Limits,
    /// `-H`: the histogram has a column summing all threads.
    pub all_column: bool,
    /// `-d` as applied (0 with a histogram), µs.
    pub distance_us: u64,
    /// The policy asked for (cyclictest's `policy: fifo` or
    /// `policy: batch/other`).
    pub policy: Policy,
    /// The threads run SCHED_OTHER whatever the policy asked.
    pub other: bool,
    /// How they wait.
    pub wait: WaitMode,
}

impl Plan {
    /// The plan of `args`, or why they cannot run.
    pub fn from_args(args: &Args) -> anyhow::Result<Plan> {
        let allowed = realtime::allowed_cpus();
        // Without a CPUSET, cyclictest 2.40 pins thread N to the N-th CPU it
        // may use, round-robin, whether -a is given or not.
        let cpus: Vec<usize> = match (&args.affinity, args.smp) {
            (_, true) => {
                if args.affinity.is_some() {
                    eprintln!("WARN: -a ignored due to smp mode");
                }
                allowed.clone()
            }
            (Some(list), false) if !list.is_empty() => {
                affinity::parse_cpu_list("-a", list, &allowed).map_err(anyhow::Error::msg)?
            }
            (_, false) => allowed.clone(),
        };
        let per_cpu = cpus.len();
        let count = match (args.threads, args.smp) {
            (Some(_), true) => {
                eprintln!("WARN: -t ignored due to smp mode");
                per_cpu
            }
            (_, true) | (Some(ThreadCount::PerCpu), false) => per_cpu,
            (Some(ThreadCount::Exactly(n)), false) => n,
            (None, false) => 1,
        };
        let bound = args.histogram.or(args.histofall).map(|b| b as usize);
        if let Some(bound) = bound {
            let bytes = bound.saturating_mul(count).saturating_mul(size_of::<u64>());
            if bytes > MAX_HISTOGRAM_BYTES {
                bail!(
                    "-h {bound} with {count} threads needs {} MiB of buckets: \
                     use a smaller bound or fewer threads",
                    bytes >> 20
                );
            }
        }
        if let (Some(red), false) = (args.oscope, args.verbose) {
            bail!("-o {red}: the oscilloscope mode reduces -v's output: give -v too");
        }
        let distance_us = match (bound, args.distance) {
            (Some(_), Some(_)) => {
                eprintln!("WARN: distance is ignored and set to 0, if histogram enabled");
                0
            }
            (Some(_), None) => 0,
            (None, d) => u64::from(d.unwrap_or(DEFAULT_DISTANCE_US)),
        };
        let (policy, first_priority) = policy_and_priority(args, count);
        let other = first_priority == 0 || !policy.is_realtime();
        let wait = match (args.service, args.system, args.posix_timers, args.relative) {
            (true, ..) => WaitMode::Service,
            (_, true, true, _) => {
                eprintln!("WARN: The system option requires clock_nanosleep");
                eprintln!("WARN: and is not compatible with posix_timers");
                eprintln!("WARN: Using clock_nanosleep");
                WaitMode::System
            }
            (_, true, ..) => WaitMode::System,
            (_, _, true, _) => WaitMode::PosixTimer,
            (.., true) => WaitMode::Relative,
            _ => WaitMode::Absolute,
        };
        let clock = Clock::from_number(args.clock).unwrap_or_default();
        if wait == WaitMode::Service && clock != Clock::Monotonic {
            bail!(
                "--service -c {}: the timer service keeps CLOCK_MONOTONIC only",
                args.clock
            );
        }
        let threads = (0..count)
            .map(|index| {
                let spread = if args.priospread { index } else { 0 };
                let priority = if other {
                    0
                } else {
                    u8::try_from(usize::from(first_priority).saturating_sub(spread)).unwrap_or(0)
                };
                ThreadPlan {
                    index,
                    interval_us: u64::from(args.interval) + index as u64 * distance_us,
                    cpu: affinity::cpu_for_thread(index, &cpus),
                    priority,
                    policy,
                    clock,
                    least_slack: args.least_slack,
                    smi: args.smi,
                }
            })
            .collect();
        Ok(Plan {
            threads,
            limits: Limits {
                loops: args.loops,
                duration: args.duration,
                bound,
                unit: if args.nsecs {
                    Unit::Nanos
                } else {
                    Unit::Micros
                },
            },
            all_column: args.histofall.is_some(),
            distance_us,
            policy,
            other,
            wait,
        })
    }
}

/// cyclictest's rules for `-p`, `--policy` and `--priospread`: a priority
/// makes the policy SCHED_FIFO unless it is FIFO or RR already; a real-time
/// policy without a priority (or -p 0) gets threads + 1.
fn policy_and_priority(args: &Args, count: usize) -> (Policy, u8) {
    let default_priority = || {
        let p = u8::try_from((count + 1).min(99)).unwrap_or(99);
        eprintln!("defaulting realtime priority to {p}");
        p
    };
    let asked = args.policy.unwrap_or(Policy::Other);
    let mut policy = asked;
    let mut priority = args.priority.unwrap_or(0);
    if args.priority.is_some() && !policy.is_realtime() {
        if args.policy.is_some() {
            eprintln!("policy and priority don't match: setting policy to SCHED_FIFO");
        }
        policy = Policy::Fifo;
    }
    if priority == 0 && (policy.is_realtime() || args.priospread) {
        priority = default_priority();
        if !policy.is_realtime() {
            policy = Policy::Fifo;
        }
    }
    (policy, priority)
}
