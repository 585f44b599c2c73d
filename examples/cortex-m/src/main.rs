//! # The engine on a Cortex-M4
//!
//! Firmware for QEMU's `mps2-an386` that keeps time with the timehands engine
//! the way an RTOS would, and checks it as it goes.
//!
//! ## The model
//!
//! - The counter is a hardware timer register: CMSDK APB timer 0, free-running
//!   at 25 MHz over 32 bits, so it wraps every 171.8 s (see [`board`]).
//! - The windups come from an interrupt: timer 1's, whose period each phase
//!   sets. Its handler winds up two timekeepers and then reads each once. A
//!   windup handler is never preempted here, so the count that read used is
//!   known, and the *reference* is computed from the counter alone: the
//!   counts since the start (the 32-bit count extended across its wraps) times
//!   40 ns.
//! - The main loop reads both timekeepers without pause, so the interrupt lands
//!   in the middle of reads. The ring of eight hands leaves an interrupted
//!   reader on its hands, still valid; the timekeeper of one hands rewrites it
//!   in place, and a reader interrupted between its two ticket loads retries
//!   (the seqlock). thumbv7em has no 64-bit atomics, so every 64-bit field of
//!   a hands is two 32-bit halves that a windup can tear: the ticket check is
//!   what throws a torn copy away.
//!
//! ## The phases
//!
//! The tick runs at 20 Hz, 1 Hz, every 10 s, then every 150 s: seven eighths
//! of the counter's wrap (150.3 s) is as late as a windup may come, since a
//! count in the top eighth of the range reads as a counter behind its base.
//! The timekeepers are built for a 50 ms windup interval, so every tick slower
//! than 20 Hz is a late windup. What bounds the tick is the wrap of the counter,
//! not one second: a 64-bit `scale * delta` (the kernels' arithmetic, with
//! `scale` about 2^64 / frequency) overflows once a windup is a second late.
//!
//! Then, at 20 Hz again, the eight-hand timekeeper slews by `adjtime` one way
//! and back, and runs 100 ppm fast; the one-hand timekeeper is left alone.
//! Last, for 40 s, every 20th tick is a pulse per second that disciplines a
//! third timekeeper, whose counter is declared 100 ppm slow ([`pps`]).
//!
//! ## The checks
//!
//! Each prints a numbered `ok` or `FAIL` line; the firmware exits through
//! semihosting with status 0 only when all passed. They are: no read of either
//! timekeeper ever goes backwards; while neither is adjusted, each read of the
//! one-hand timekeeper lies between the eight-hand one's reads around it (they
//! are the same function of the counter); uptime right after each windup is the
//! reference to a nanosecond (the engine's scale and its nanoseconds round
//! down); the windup interval may be an eighth of the wrap and no more; a slew
//! gains exactly what was asked, never faster than 500 ppm nor the wrong way,
//! and leaves no remainder; a frequency adjustment shows as that rate against
//! the reference, and one beyond 500 ppm is refused; the PPS discipline locks,
//! with the phase at every pulse after the 20th within 1 µs and the
//! frequency error found to 0.1 ppm (estimated, and seen against the
//! reference); windups did land inside reads of both timekeepers.
#![no_std]
#![no_main]

mod board;
mod pps;
mod report;

use core::cell::RefCell;
use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;

use cortex_m::interrupt::{self, Mutex};
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::hprintln;
use spin::Once;
use timehands::{BinTime, Counter, Error, Timekeeper, Windup};

use board::{COUNTER_MASK, FreeRunningCounter, TIMER_HZ};
use report::Report;

/// Nanoseconds per count of the counter: the whole arithmetic of the reference.
const NS_PER_COUNT: u64 = 1_000_000_000 / TIMER_HZ;
const _: () = assert!(NS_PER_COUNT * TIMER_HZ == 1_000_000_000);

/// The windup interval the timekeepers are built for: the fastest tick.
const WINDUP_INTERVAL: Duration = Duration::from_millis(50);

/// Counts between windups at 20 Hz: the windup interval.
const TWENTY_HZ: u32 = (TIMER_HZ / 20) as u32;
const _: () =
    assert!(TWENTY_HZ as u128 * 1_000_000_000 == WINDUP_INTERVAL.as_nanos() * TIMER_HZ as u128);

/// The latest a windup may come, in counts: seven eighths of the wrap
/// (3 758 096 384 counts) less a third of a second, so that the handler's
/// latency and the main loop's last read before it stay inside.
const LATEST_WINDUP: u32 = 3_750_000_000;
const _: () = assert!(LATEST_WINDUP as u64 <= COUNTER_MASK - COUNTER_MASK / 8);

/// A stretch of the run with one tick period.
struct TickPhase {
    name: &'static str,
    /// Counts between windups.
    period: u32,
    /// Windups to run.
    windups: u32,
}

const TICK_PHASES: [TickPhase; 4] = [
    TickPhase {
        name: "20 Hz",
        period: TWENTY_HZ,
        windups: 40,
    },
    TickPhase {
        name: "1 Hz",
        period: TIMER_HZ as u32,
        windups: 3,
    },
    TickPhase {
        name: "every 10 s",
        period: 10 * TIMER_HZ as u32,
        windups: 2,
    },
    TickPhase {
        name: "every 150 s",
        period: LATEST_WINDUP,
        windups: 2,
    },
];

/// What each slew asks, one way then back.
const SLEW_NS: i64 = 1_000_000;
/// Windups to run a slew out: at 500 ppm a 50 ms interval slews 25 µs, so
/// 40 windups, and a few for the switch points that lag them.
const SLEW_WINDUPS: u32 = 48;
/// The frequency adjustment tried: 100 ppm fast.
const FREQUENCY_PPB: i64 = 100_000;
/// Windups over which the frequency adjustment is measured (2 s).
const FREQUENCY_WINDUPS: u32 = 40;

/// The slew rate the engine allows, in ppb.
const MAX_SLEW_PPB: i128 = 500_000;

type Keeper = Timekeeper<&'static FreeRunningCounter>;

/// Two timekeepers on the one counter, started at the same count: while
/// neither is adjusted they are the same function of the counter.
struct Keepers {
    /// Eight hands, the default ring.
    ring: Keeper,
    /// One hands, which each windup rewrites in place.
    single: Keeper,
}

static COUNTER: FreeRunningCounter = FreeRunningCounter::new();
static KEEPERS: Once<Keepers> = Once::new();
/// Windups the tick handler has finished (both timekeepers wound up and read).
static WINDUPS: AtomicU32 = AtomicU32::new(0);
/// What the tick handler keeps between windups, and its last sample.
static TICK: Mutex<RefCell<TickState>> = Mutex::new(RefCell::new(TickState::new()));

/// A timekeeper's uptime read in the tick handler, and the counts since the
/// start at which it was read.
#[derive(Clone, Copy)]
struct Reading {
    counts: u64,
    uptime: BinTime,
}

impl Reading {
    /// The reference: the time of `counts` counts, in nanoseconds.
    fn reference_ns(&self) -> i128 {
        (self.counts * NS_PER_COUNT) as i128
    }

    /// Uptime minus the reference, in nanoseconds.
    fn offset_ns(&self) -> i128 {
        self.uptime.as_nanos() - self.reference_ns()
    }
}

/// What the tick handler read after a windup.
#[derive(Clone, Copy)]
struct Sample {
    ring: Reading,
    single: Reading,
}

struct TickState {
    /// The last count seen, and the counts since the start up to it.
    last_count: u32,
    counts: u64,
    /// Windups of the ring that found its writer busy (the main loop adjusting).
    busy: u32,
    last: Sample,
}

impl TickState {
    const fn new() -> TickState {
        let zero = Reading {
            counts: 0,
            uptime: BinTime::ZERO,
        };
        TickState {
            last_count: 0,
            counts: 0,
            busy: 0,
            last: Sample {
                ring: zero,
                single: zero,
            },
        }
    }

    /// Counts since the start at `count`. The handler sees the counter at
    /// least once in seven eighths of a wrap, so the difference is the truth.
    fn extend(&mut self, count: u32) -> u64 {
        self.counts += count.wrapping_sub(self.last_count) as u64;
        self.last_count = count;
        self.counts
    }
}

/// The last sample the tick handler took, and how many windups found the
/// ring's writer busy.
fn last_tick() -> (Sample, u32) {
    interrupt::free(|cs| {
        let tick = TICK.borrow(cs).borrow();
        (tick.last, tick.busy)
    })
}

/// The tick: timer 1's interrupt, through the default handler (the board has
/// no device crate naming its lines). cortex-m-rt has the default handler
/// `unsafe`, as it catches every exception that has no handler of its own.
#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    // First: the PPS phase's capture of the pulse's edge.
    let capture = COUNTER.read() as u32;
    if irqn != board::TICK_IRQ {
        report::fatal(format_args!("unexpected interrupt {irqn}"));
    }
    board::acknowledge_tick();
    let Some(keepers) = KEEPERS.get() else {
        return;
    };
    pps::tick(capture);
    let ring_busy = keepers.ring.windup() == Windup::Busy;
    keepers.single.windup();
    // Nothing runs between a read and `last_read`: the counts are the ones
    // the engine used.
    let ring = keepers.ring.uptime();
    let ring_count = COUNTER.last_read();
    let single = keepers.single.uptime();
    let single_count = COUNTER.last_read();
    interrupt::free(|cs| {
        let mut tick = TICK.borrow(cs).borrow_mut();
        let ring = Reading {
            counts: tick.extend(ring_count),
            uptime: ring,
        };
        let single = Reading {
            counts: tick.extend(single_count),
            uptime: single,
        };
        tick.busy += ring_busy as u32;
        tick.last = Sample { ring, single };
    });
    WINDUPS.fetch_add(1, Ordering::Release);
}

/// What the main loop's reads found over a stretch.
#[derive(Clone, Copy, Default)]
struct ReadStats {
    /// Rounds of reads (each reads the ring, the single, the ring).
    rounds: u32,
    /// Reads earlier than the same timekeeper's read before.
    backwards: u32,
    /// Reads of the single outside the ring's reads around it.
    disagreed: u32,
}

impl ReadStats {
    fn add(&mut self, other: ReadStats) {
        self.rounds += other.rounds;
        self.backwards += other.backwards;
        self.disagreed += other.disagreed;
    }

    fn clean(&self) -> bool {
        self.backwards == 0 && self.disagreed == 0
    }
}

/// The main loop: reads both timekeepers while the tick winds them up.
struct Reader {
    keepers: &'static Keepers,
    last_ring: BinTime,
    last_single: BinTime,
    /// Windups seen so far.
    seen: u32,
    /// Windups that came in during a read, for the whole run.
    landed_in_ring: u32,
    landed_in_single: u32,
}

impl Reader {
    fn new(keepers: &'static Keepers) -> Reader {
        Reader {
            keepers,
            last_ring: BinTime::ZERO,
            last_single: BinTime::ZERO,
            seen: WINDUPS.load(Ordering::Acquire),
            landed_in_ring: 0,
            landed_in_single: 0,
        }
    }

    /// `read`, and whether a windup came in while it ran.
    fn read_counting(read: impl Fn() -> BinTime) -> (BinTime, bool) {
        let before = WINDUPS.load(Ordering::Acquire);
        let uptime = read();
        (uptime, WINDUPS.load(Ordering::Acquire) != before)
    }

    /// Reads until `windups` more windups are done, handing each one's sample
    /// to `at_windup`. `same_function`: neither timekeeper is adjusted, so a
    /// read of the single must lie between the ring's reads around it.
    fn run(
        &mut self,
        windups: u32,
        same_function: bool,
        mut at_windup: impl FnMut(&Sample),
    ) -> ReadStats {
        let mut stats = ReadStats::default();
        let target = self.seen + windups;
        while self.seen < target {
            let keepers = self.keepers;
            let (ring_before, landed_a) = Reader::read_counting(|| keepers.ring.uptime());
            let (single, landed_b) = Reader::read_counting(|| keepers.single.uptime());
            let (ring_after, landed_c) = Reader::read_counting(|| keepers.ring.uptime());
            self.landed_in_ring += landed_a as u32 + landed_c as u32;
            self.landed_in_single += landed_b as u32;
            stats.rounds += 1;
            stats.backwards += (ring_before < self.last_ring) as u32
                + (ring_after < ring_before) as u32
                + (single < self.last_single) as u32;
            stats.disagreed +=
                (same_function && !(ring_before <= single && single <= ring_after)) as u32;
            self.last_ring = ring_after;
            self.last_single = single;
            let done = WINDUPS.load(Ordering::Acquire);
            if done != self.seen {
                self.seen = done;
                at_windup(&last_tick().0);
            }
        }
        stats
    }
}

/// The largest distance from the reference seen in samples, per timekeeper.
#[derive(Default)]
struct WorstOffset {
    ring: i128,
    single: i128,
}

impl WorstOffset {
    fn note(&mut self, sample: &Sample) {
        self.ring = self.ring.max(sample.ring.offset_ns().abs());
        self.single = self.single.max(sample.single.offset_ns().abs());
    }
}

/// A duration given in counts, for the output.
struct Counts(u64);

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0 * NS_PER_COUNT / 1_000_000;
        write!(f, "{}.{:03} s", ms / 1000, ms % 1000)
    }
}

fn build(hands: usize, start: u64) -> Keeper {
    Timekeeper::builder(&COUNTER)
        .hands(hands)
        .windup_interval(WINDUP_INTERVAL)
        .start_count(start)
        .build()
        .unwrap_or_else(|error| report::fatal(format_args!("building a timekeeper: {error}")))
}

/// The windup interval may be as long as an eighth of the counter's wrap:
/// the bound comes from the counter's width alone.
fn check_interval_limit(report: &mut Report) {
    let eighth = COUNTER_MASK / 8;
    let interval = |counts: u64| {
        Timekeeper::builder(&COUNTER)
            .windup_interval(Duration::from_nanos(counts * NS_PER_COUNT))
            .build()
            .map(|_| ())
    };
    let longest = interval(eighth);
    let beyond = interval(eighth + 1);
    report.check(
        longest.is_ok() && matches!(beyond, Err(Error::WindupInterval { .. })),
        format_args!(
            "a windup interval of an eighth of the wrap ({}) is accepted, one count more is refused",
            Counts(eighth)
        ),
    );
}

fn run_tick_phase(report: &mut Report, reader: &mut Reader, phase: &TickPhase) {
    board::set_tick_period(phase.period);
    let mut worst = WorstOffset::default();
    let stats = reader.run(phase.windups, true, |sample| worst.note(sample));
    let (last, _) = last_tick();
    report.check(
        stats.clean(),
        format_args!(
            "{}: {} rounds of reads: {} went backwards, {} where the timekeepers disagreed",
            phase.name, stats.rounds, stats.backwards, stats.disagreed
        ),
    );
    report.check(
        worst.ring <= 1 && worst.single <= 1,
        format_args!(
            "{}: {} windups {} apart, uptime after each is counts x 40 ns to 1 ns (worst {} ns with 8 hands, {} ns with 1; uptime {})",
            phase.name,
            phase.windups,
            Counts(phase.period as u64),
            worst.ring,
            worst.single,
            last.ring.uptime
        ),
    );
}

/// Slews the ring by `request` ns and checks what the slew did, from the tick
/// handler's samples.
fn run_slew(report: &mut Report, reader: &mut Reader, request: i64) -> ReadStats {
    let keepers = reader.keepers;
    let (start, _) = last_tick();
    let previous = keepers.ring.adjtime(request);
    let mut last = start;
    let mut too_fast = 0;
    let mut wrong_way = 0;
    let mut worst = WorstOffset::default();
    let stats = reader.run(SLEW_WINDUPS, false, |sample| {
        worst.note(sample);
        let step = sample.ring.offset_ns() - last.ring.offset_ns();
        let elapsed = sample.ring.reference_ns() - last.ring.reference_ns();
        // Each offset is rounded down to a nanosecond: a step may be off by one.
        too_fast += (step.abs() > elapsed * MAX_SLEW_PPB / 1_000_000_000 + 1) as u32;
        wrong_way += (step * (request.signum() as i128) < -1) as u32;
        last = *sample;
    });
    let gained = last.ring.offset_ns() - start.ring.offset_ns();
    let remainder = keepers.ring.adjtime(0);
    report.check(
        previous == 0 && remainder == 0 && (gained - request as i128).abs() <= 1,
        format_args!(
            "adjtime({request} ns): gained {gained} ns over {SLEW_WINDUPS} windups, nothing left over"
        ),
    );
    report.check(
        too_fast == 0 && wrong_way == 0 && worst.single <= 1,
        format_args!(
            "adjtime({request} ns): no windup interval slewed faster than 500 ppm or the wrong way; the 1-hand timekeeper stayed on the reference"
        ),
    );
    stats
}

/// Runs the ring `FREQUENCY_PPB` fast and measures its rate against the
/// reference.
fn run_frequency(report: &mut Report, reader: &mut Reader) -> ReadStats {
    let ring = &reader.keepers.ring;
    let set = ring.set_frequency_adjustment(FREQUENCY_PPB);
    // The new rate starts at the next windup's switch point.
    let mut stats = reader.run(2, false, |_| {});
    let (from, _) = last_tick();
    stats.add(reader.run(FREQUENCY_WINDUPS, false, |_| {}));
    let (to, _) = last_tick();
    let gained = to.ring.offset_ns() - from.ring.offset_ns();
    let elapsed = to.ring.reference_ns() - from.ring.reference_ns();
    let measured_ppb = gained * 1_000_000_000 / elapsed;
    report.check(
        set.is_ok() && (measured_ppb - FREQUENCY_PPB as i128).abs() <= 2,
        format_args!(
            "frequency adjustment {FREQUENCY_PPB} ppb: measured {measured_ppb} ppb against the reference over {}",
            Counts(elapsed as u64 / NS_PER_COUNT)
        ),
    );
    let reset = ring.set_frequency_adjustment(0);
    let refused = ring.set_frequency_adjustment(500_001);
    report.check(
        reset.is_ok() && refused == Err(Error::FrequencyAdjustment { ppb: 500_001 }),
        format_args!("a frequency adjustment of 500001 ppb is refused"),
    );
    stats
}

#[entry]
fn main() -> ! {
    let mut report = Report::default();
    COUNTER.start();
    let start = COUNTER.read();
    interrupt::free(|cs| TICK.borrow(cs).borrow_mut().last_count = start as u32);
    let keepers = KEEPERS.call_once(|| Keepers {
        ring: build(timehands::DEFAULT_HANDS, start),
        single: build(1, start),
    });
    hprintln!(
        "timehands on mps2-an386: {}, {} Hz, mask {:#x} (wraps every {}); windup interval {:?}",
        COUNTER.name(),
        COUNTER.frequency(),
        COUNTER.mask(),
        Counts(COUNTER_MASK + 1),
        WINDUP_INTERVAL
    );
    hprintln!(
        "64-bit atomics: {}",
        if cfg!(target_has_atomic = "64") {
            "yes, the hands' 64-bit fields are single words"
        } else {
            "none, the hands' 64-bit fields are pairs of 32-bit halves"
        }
    );
    check_interval_limit(&mut report);

    let mut reader = Reader::new(keepers);
    board::unmask_tick();
    for phase in &TICK_PHASES {
        run_tick_phase(&mut report, &mut reader, phase);
    }

    board::set_tick_period(TWENTY_HZ);
    let mut stats = run_slew(&mut report, &mut reader, SLEW_NS);
    stats.add(run_slew(&mut report, &mut reader, -SLEW_NS));
    stats.add(run_frequency(&mut report, &mut reader));
    pps::start(COUNTER.read());
    stats.add(reader.run(pps::TICKS, false, |_| {}));
    pps::check(&mut report);
    let (_, busy) = last_tick();
    report.check(
        stats.clean(),
        format_args!(
            "adjustments: {} rounds of reads: {} went backwards ({busy} windups found the writer busy)",
            stats.rounds, stats.backwards
        ),
    );
    report.check(
        reader.landed_in_ring > 0 && reader.landed_in_single > 0,
        format_args!(
            "windups landed inside reads: {} of the 8-hand timekeeper, {} of the 1-hand one",
            reader.landed_in_ring, reader.landed_in_single
        ),
    );
    report.finish()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    report::fatal(format_args!("panic: {info}"))
}
