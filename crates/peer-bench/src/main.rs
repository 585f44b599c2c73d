//! Side-by-side comparison of clocks, from one run on one machine.
//!
//! Four sections read one table of clocks (`clocks::clocks`):
//!
//! - **cost**: nanoseconds per call, and the ratio to `std::time::Instant::now`;
//! - **ordering**: whether a reading handed to another CPU is ever ahead of
//!   that CPU's next reading;
//! - **first call**: what each library costs in a fresh process, before `main`
//!   and on its first `now()`, from one small child binary per library;
//! - **tracking**: rate and offset against the kernel's monotonic clock
//!   (Linux's CLOCK_MONOTONIC) over some seconds;
//! - **fresh**: every `timehands::now()` of a fresh process's first 50 ms
//!   against the kernel's monotonic clock, in many fresh processes;
//! - **keeping**: what each library costs a process beyond its reads (its
//!   threads' wakeups and CPU, the process's CPU), in a process that read
//!   and sleeps, one that reads once a millisecond, one that reads all the
//!   time.
//!
//! Then the targets timehands aims at, from the entries they name. Tables go to
//! stdout (or one JSON document with `--json`), progress to stderr. Numbers from
//! different runs or machines are not comparable; ratios within a run are.

mod child_line;
mod clocks;
mod cost;
mod first_call;
mod fresh;
mod keeper;
mod keeping;
mod ordering;
mod spawn_clock;
mod targets;
mod tracking;

use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde::Serialize;

/// Compares clocks side by side: cost, ordering across CPUs, first call in a
/// fresh process, tracking against the kernel's monotonic clock.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Fewer rounds and hand-offs and 3 s of tracking, for tests.
    #[arg(long)]
    quick: bool,
    /// Hand-offs per clock in the ordering section [default: 2000000, 20000
    /// with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=1 << 40))]
    handoffs: Option<u64>,
    /// Seconds of tracking [default: 30, 3 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=3600))]
    track_seconds: Option<u64>,
    /// Run only this section.
    #[arg(long, value_name = "SECTION")]
    only: Option<Section>,
    /// Print all results as one JSON document instead of tables.
    #[arg(long)]
    json: bool,
}

/// Parses the command line; a bad one gets clap's error folded onto one line.
fn parse_args() -> Args {
    match Args::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let text = e.to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                .collect();
            eprintln!("{}", line.join(" "));
            std::process::exit(e.exit_code());
        }
    }
}

/// The sections, as `--only` names them.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Section {
    Cost,
    Ordering,
    FirstCall,
    Tracking,
    Fresh,
    Keeping,
    Keeper,
}

/// Everything one run measured; sections not run are `None`.
#[derive(Serialize)]
struct Report {
    cost: Option<Vec<cost::Row>>,
    ordering: Option<ordering::Outcome>,
    first_call: Option<first_call::Outcome>,
    tracking: Option<Vec<tracking::Row>>,
    fresh: Option<fresh::Outcome>,
    keeping: Option<Vec<keeping::Row>>,
    keeper: Option<keeper::Outcome>,
    targets: Vec<targets::Target>,
}

fn main() {
    if std::env::var_os(fresh::CHILD_ENV).is_some() {
        fresh::child();
    }
    if let Ok(orders) = std::env::var(keeping::CHILD_ENV) {
        keeping::child(&orders);
    }
    if let Ok(path) = std::env::var(keeper::KEEPER_ENV) {
        keeper::keeper_child(&path);
    }
    if let Ok(window) = std::env::var(keeper::READER_ENV) {
        keeper::reader_child(&window);
    }
    let args = parse_args();
    let runs = |section| args.only.is_none_or(|only| only == section);

    // quanta::Instant::recent() reads what this thread keeps up to date.
    let _upkeep = match quanta::Upkeep::new(Duration::from_millis(1)).start() {
        Ok(handle) => Some(handle),
        Err(e) => {
            eprintln!("quanta upkeep thread did not start ({e}): quanta recent falls back to now");
            None
        }
    };
    let clocks = clocks::clocks();
    for clock in clocks.iter().filter(|c| c.name.ends_with("(std)")) {
        eprintln!(
            "{}: no TSC it reads here (only on x86 Linux, where usable): its now() is std's Instant",
            clock.name
        );
    }

    let mut report = Report {
        cost: None,
        ordering: None,
        first_call: None,
        tracking: None,
        fresh: None,
        keeping: None,
        keeper: None,
        targets: Vec::new(),
    };
    if runs(Section::Cost) {
        let plan = if args.quick {
            cost::Plan {
                rounds: 5,
                round_ns: 2_000_000,
            }
        } else {
            cost::Plan {
                rounds: 11,
                round_ns: 20_000_000,
            }
        };
        report.cost = Some(cost::run(&clocks, &plan));
    }
    if runs(Section::Ordering) {
        let default = if args.quick { 20_000 } else { 2_000_000 };
        report.ordering = Some(ordering::run(&clocks, args.handoffs.unwrap_or(default)));
    }
    if runs(Section::FirstCall) {
        report.first_call = Some(first_call::run(if args.quick { 3 } else { 7 }));
    }
    if runs(Section::Tracking) {
        let default = if args.quick { 3 } else { 30 };
        report.tracking = Some(tracking::run(
            &clocks,
            args.track_seconds.unwrap_or(default),
        ));
    }
    if runs(Section::Fresh) {
        report.fresh = fresh::run(if args.quick { 20 } else { 1000 }, &[]);
    }
    if runs(Section::Keeping) {
        report.keeping = keeping::run(args.quick);
    }
    if runs(Section::Keeper) {
        report.keeper = keeper::run(args.quick, if args.quick { 20 } else { 1000 });
    }
    report.targets = targets::evaluate(&report);

    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("the report serialises")
        );
        return;
    }
    if let Some(rows) = &report.cost {
        cost::print(rows);
        println!();
    }
    if let Some(outcome) = &report.ordering {
        ordering::print(outcome);
        println!();
    }
    if let Some(outcome) = &report.first_call {
        first_call::print(outcome);
        println!();
    }
    if let Some(rows) = &report.tracking {
        tracking::print(rows);
        println!();
    }
    if let Some(outcome) = &report.fresh {
        fresh::print(outcome);
        println!();
    }
    if let Some(rows) = &report.keeping {
        keeping::print(rows);
        println!();
    }
    if let Some(outcome) = &report.keeper {
        keeper::print(outcome);
        println!();
    }
    targets::print(&report.targets);
}
