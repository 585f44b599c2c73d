//! The PPS phase: a pulse a second from timer 1 (every 20th tick at 20 Hz),
//! captured by reading the counter first thing in the tick's handler (as
//! FreeBSD's `pps_capture` does), disciplines a third timekeeper whose
//! counter is declared 100 ppm below its real frequency (timer 0 counted as
//! 24.9975 MHz): the discipline must find that error and the pulses' phase.
//!
//! Under `-icount` an instruction is 1.024 µs of emulated time, so the
//! capture's latency varies by an instruction or so: the pulses have about
//! a microsecond of jitter, and every run the same. The second pulse is
//! given 20 µs late (a receiver without its fix, an interrupt held up), so
//! that the line the filter starts on is the outlier's: the third pulse
//! must find it out (the line through the first and the third is the one
//! it is late of) and the clock be on the others from the sixth.

use core::cell::RefCell;

use cortex_m::interrupt::{self, Mutex};
use spin::Once;
use timehands::{BinTime, Counter, Pps, PpsState, Timekeeper};

use crate::board::{COUNTER_MASK, TIMER_HZ};
use crate::report::{self, Report};
use crate::{COUNTER, NS_PER_COUNT, WINDUP_INTERVAL};

/// Ticks a pulse (20 Hz ticks: one a second).
const TICKS_PER_PULSE: u32 = 20;
/// Pulses the phase runs.
const PULSES: u32 = 40;
/// Pulses after which the clock must be locked: the checks cover the rest.
const LOCKED_AFTER: u32 = 20;
/// The pulse given late, and by how many counts (20 µs at 25 MHz).
const EARLY_OUTLIER: u32 = 2;
/// The first pulse whose phase the early check holds: the fourth after the
/// outlier. The one after it finds it out, but the line it leaves (through
/// the first pulse and that one) rests on two pulses, so the clock is
/// slewed to that pulse alone and the counter's 100 ppm runs on for a
/// second; the next, the third on the line, sets the frequency. Its
/// handler runs some 70 ms of emulated time (an instruction is a
/// microsecond under `-icount`), so the new frequency takes effect later
/// than a quick handler's would, and the pulse after it is a few µs off.
const EARLY_FROM: u32 = EARLY_OUTLIER + 4;
const OUTLIER_COUNTS: u32 = 500;
/// Ticks the phase runs.
pub const TICKS: u32 = TICKS_PER_PULSE * PULSES;
/// The frequency the board declares for timer 0: 100 ppm below its 25 MHz.
const DECLARED_HZ: u64 = TIMER_HZ - TIMER_HZ / 10_000;
/// The counter's error as the timekeeper sees it: 25 MHz counted as 24.9975
/// MHz runs 25 / 24.9975 - 1 fast, 100 010 ppb.
const COUNTER_ERROR_PPB: i64 = 100_010;
/// The bounds the checks hold the discipline to: phase and frequency.
const PHASE_NS: i128 = 1_000;
const FREQUENCY_PPB: i128 = 100;

/// Timer 0 as a board with a mis-stated crystal declares it.
pub struct Mistuned;

impl Counter for Mistuned {
    fn read(&self) -> u64 {
        COUNTER.read()
    }

    fn frequency(&self) -> u64 {
        DECLARED_HZ
    }

    fn mask(&self) -> u64 {
        COUNTER_MASK
    }

    fn name(&self) -> &str {
        "CMSDK APB timer 0, declared 100 ppm slow"
    }

    fn order_after_read(&self) {
        COUNTER.order_after_read()
    }
}

/// What the handler keeps of the phase.
struct Run {
    pps: Pps,
    ticks: u32,
    pulses: u32,
    /// Captures the discipline refused (older than the ring).
    refused: u32,
    /// The largest phase error at a pulse after [`LOCKED_AFTER`], ns.
    worst_phase: i128,
    /// The largest from [`EARLY_FROM`] to [`LOCKED_AFTER`], ns.
    worst_early: i128,
    /// The capture and its uptime at pulse [`LOCKED_AFTER`], and at the last.
    from: Option<(u32, BinTime)>,
    to: Option<(u32, BinTime)>,
}

static KEEPER: Once<Timekeeper<Mistuned>> = Once::new();
static RUN: Mutex<RefCell<Option<Run>>> = Mutex::new(RefCell::new(None));

/// Builds the disciplined timekeeper at the counter's value `start` and lets
/// the tick handler run the phase. Realtime is stepped to the pulses' second
/// when more than 1 ms off (the first pulse), and slewed after.
pub fn start(start: u64) {
    KEEPER.call_once(|| {
        Timekeeper::builder(Mistuned)
            .windup_interval(WINDUP_INTERVAL)
            .start_count(start)
            .build()
            .unwrap_or_else(|error| report::fatal(format_args!("building a timekeeper: {error}")))
    });
    interrupt::free(|cs| {
        RUN.borrow(cs).replace(Some(Run {
            pps: Pps::new().step_threshold(1_000_000),
            ticks: 0,
            pulses: 0,
            refused: 0,
            worst_phase: 0,
            worst_early: 0,
            from: None,
            to: None,
        }));
    });
}

/// The tick handler's part, `capture` being the counter it read first.
pub fn tick(capture: u32) {
    let Some(keeper) = KEEPER.get() else {
        return;
    };
    keeper.windup();
    interrupt::free(|cs| {
        let mut run = RUN.borrow(cs).borrow_mut();
        let Some(run) = run.as_mut() else {
            return;
        };
        run.ticks += 1;
        if run.ticks % TICKS_PER_PULSE != 0 || run.pulses == PULSES {
            return;
        }
        run.pulses += 1;
        let late = if run.pulses == EARLY_OUTLIER {
            OUTLIER_COUNTS
        } else {
            0
        };
        let given = capture.wrapping_add(late) as u64 & COUNTER_MASK;
        run.refused += run.pps.event(keeper, given).is_err() as u32;
        let Ok(stamp) = keeper.time_of(capture as u64) else {
            return;
        };
        // Realtime past the nearest whole second at the true edge, in ns.
        let phase = (stamp.realtime.frac() as i64 as i128 * 1_000_000_000) >> 64;
        if run.pulses > LOCKED_AFTER {
            run.worst_phase = run.worst_phase.max(phase.abs());
            run.to = Some((capture, stamp.uptime));
        } else if run.pulses >= EARLY_FROM {
            run.worst_early = run.worst_early.max(phase.abs());
            if run.pulses == LOCKED_AFTER {
                run.from = Some((capture, stamp.uptime));
            }
        }
    });
}

/// The phase's checks, once it has run.
pub fn check(report: &mut Report) {
    let Some(keeper) = KEEPER.get() else {
        report::fatal(format_args!("the PPS phase did not start"));
    };
    let Some(run) = interrupt::free(|cs| RUN.borrow(cs).take()) else {
        report::fatal(format_args!("the PPS phase did not start"));
    };
    let status = run.pps.status(keeper);
    report.check(
        status.outliers == 1 && run.worst_early <= PHASE_NS,
        format_args!(
            "PPS: pulse {EARLY_OUTLIER} given 20 µs late is rejected ({} outlier), the phase at every pulse from the {EARLY_FROM}th within {} ns (at most {PHASE_NS})",
            status.outliers, run.worst_early
        ),
    );
    report.check(
        run.pulses == PULSES
            && run.refused == 0
            && status.state == PpsState::Locked
            && run.worst_phase <= PHASE_NS,
        format_args!(
            "PPS from timer 1, counter declared 100 ppm slow: {} pulses, locked, phase at every pulse after the {LOCKED_AFTER}th within {} ns (at most {PHASE_NS}); jitter {} ns",
            run.pulses, run.worst_phase, status.jitter_ns
        ),
    );
    // The clock's rate against the reference (counts x 40 ns) from pulse
    // LOCKED_AFTER on: the discipline's frequency, seen from outside.
    let rate = match (run.from, run.to) {
        (Some((from, up_from)), Some((to, up_to))) => {
            let reference = (to.wrapping_sub(from) as u64 * NS_PER_COUNT) as i128;
            let measured = (up_to - up_from).as_nanos();
            Some((measured - reference) * 1_000_000_000 / reference)
        }
        _ => None,
    };
    let estimated = status.frequency_ppb as i128;
    report.check(
        rate.is_some_and(|rate| rate.abs() <= FREQUENCY_PPB)
            && (estimated - COUNTER_ERROR_PPB as i128).abs() <= FREQUENCY_PPB,
        format_args!(
            "PPS: the counter's error estimated at {estimated} ppb (truly {COUNTER_ERROR_PPB}), the clock's rate against the reference {} ppb, both within {FREQUENCY_PPB} ppb",
            rate.unwrap_or(i128::MAX)
        ),
    );
}
