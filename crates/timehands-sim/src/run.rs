//! One simulated run: the oscillator, the PPS source, our disciplined
//! clock beside `hardpps` models at five tunings, chrony's PPS refclock,
//! and the oracle, second by second.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use timehands::{BinTime, Ntp, NtpStatus, Pps, SimCounter, Timekeeper, Timex};

use crate::chrony::Chrony;
use crate::hardpps::{DEFAULT_SHIFT_MAX, HardPps};
use crate::oracle::Oracle;
use crate::oscillator::{Oscillator, gaussian};
use crate::receiver::{Pulses, Receiver};

/// The `pps_shiftmax` values the `hardpps` model runs at beside its
/// default: 16 to 128 s as the longest calibration interval.
pub const TUNINGS: [u32; 4] = [4, 5, 6, 7];

/// The counter's nominal frequency: 1 GHz, a count a nanosecond.
pub const NOMINAL_HZ: u64 = 1_000_000_000;
/// Windups a second: a 125 ms interval, as a slow tick would.
const WINDUPS: u32 = 8;
/// When a pulse is processed, after its edge: 2 ms.
const PROCESSING: f64 = 0.002;

/// What a run simulates.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The random generator's seed: the same seed, the same run.
    pub seed: u64,
    /// Simulated seconds.
    pub seconds: u64,
    /// The oscillator's frequency offset at the start, ppm (positive fast).
    pub frequency_ppm: f64,
    /// The clocks' phase error at the start, µs (positive ahead).
    pub phase_us: f64,
    /// The pulses' timestamp jitter (one standard deviation), ns.
    pub jitter_ns: f64,
    /// The oscillator's random-walk wander, ppb per √s.
    pub wander_ppb: f64,
    /// The fraction of pulses that come late.
    pub outliers: f64,
    /// How late an outlier comes, µs: uniform in this range.
    pub outlier_us: (f64, f64),
    /// One pulse late by this many µs at this second, besides.
    pub late: Option<(u64, f64)>,
    /// One pulse missing at this second, besides.
    pub missing: Option<u64>,
    /// The fraction of pulses dropped.
    pub drops: f64,
    /// An outage: no pulses from this second for that many.
    pub outage: Option<(u64, u64)>,
    /// A step of the oscillator's frequency at this second, by that many ppm.
    pub step: Option<(u64, f64)>,
    /// Our clock disciplined by NTP offsets instead of the pulses.
    pub ntp: Option<NtpSource>,
    /// The pulses from a GPS receiver's world besides (the second world).
    pub receiver: Option<Receiver>,
}

/// An NTP client's offsets: one a poll interval, with network delays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NtpSource {
    /// Seconds between offsets.
    pub poll: u64,
    /// The mean of each direction's exponential delay, µs: the offset's
    /// error is half their difference.
    pub delay_us: f64,
    /// The PLL's time constant the client sets.
    pub constant: u32,
}

impl Config {
    /// A clean run of `seconds`: no offset, no jitter, no wander, no events.
    pub fn new(seed: u64, seconds: u64) -> Config {
        Config {
            seed,
            seconds,
            frequency_ppm: 0.0,
            phase_us: 0.0,
            jitter_ns: 0.0,
            wander_ppb: 0.0,
            outliers: 0.0,
            outlier_us: (0.0, 0.0),
            late: None,
            missing: None,
            drops: 0.0,
            outage: None,
            step: None,
            ntp: None,
            receiver: None,
        }
    }
}

/// What a run recorded, a sample a second (at its middle).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Our clock's error against true time, ns.
    pub ours_ns: Vec<f64>,
    /// The `hardpps` model's clock's error at its default tuning, ns.
    pub model_ns: Vec<f64>,
    /// The model's clock's error at each of the [`TUNINGS`] (none in an NTP
    /// run), ns.
    pub tuned_ns: Vec<Vec<f64>>,
    /// The error of a clock steered by the oracle's estimate, ns.
    pub oracle_ns: Vec<f64>,
    /// The error of the clock chrony's PPS refclock disciplines (none in an
    /// NTP run), ns.
    pub chrony_ns: Vec<f64>,
    /// Our frequency estimate's error, ppb.
    pub ours_frequency_ppb: Vec<f64>,
    /// The model's frequency estimate's error, ppb.
    pub model_frequency_ppb: Vec<f64>,
    /// chrony's frequency estimate's error (none in an NTP run), ppb.
    pub chrony_frequency_ppb: Vec<f64>,
    /// Reads of either clock earlier than a read before them.
    pub backward_steps: u64,
}

/// A clock under simulation: its counter and timekeeper, and the last
/// realtime read (for backward steps).
struct Clock {
    counter: SimCounter,
    tk: Timekeeper<SimCounter>,
    last: BinTime,
}

impl Clock {
    fn new(phase_us: f64) -> Clock {
        let counter = SimCounter::new(NOMINAL_HZ);
        let tk = Timekeeper::builder(counter.clone())
            .windup_interval(Duration::from_secs(1) / WINDUPS)
            .start_at(BinTime::from_nanos((phase_us * 1e3).round() as i128))
            .build()
            .expect("a 1 GHz counter with a 125 ms interval builds");
        Clock {
            counter,
            tk,
            last: BinTime::ZERO,
        }
    }

    /// Moves the counter to `count` (forward only).
    fn at(&mut self, count: u64) -> &Timekeeper<SimCounter> {
        self.counter.set(count.max(self.counter.value()));
        &self.tk
    }

    /// The clock's error at true time `t` (its counter at `count`), ns;
    /// counts a read that went back.
    fn error(&mut self, count: u64, t: f64, backward: &mut u64) -> f64 {
        let now = self.at(count).realtime();
        *backward += (now < self.last) as u64;
        self.last = now;
        (now.sec() as f64 - t) * 1e9 + now.frac() as f64 / 2f64.powi(64) * 1e9
    }
}

/// Runs `config`: both disciplines on the same oscillator and pulses.
pub fn run(config: &Config) -> Trace {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut osc = Oscillator::new(
        NOMINAL_HZ,
        config.frequency_ppm * 1e-6,
        config.wander_ppb * 1e-9,
    );
    let mut ours = Clock::new(config.phase_us);
    // The model at its default tuning first, then at the others.
    // An NTP run has no pulses for the tunings to differ on.
    let tunings = if config.ntp.is_some() {
        &[][..]
    } else {
        &TUNINGS[..]
    };
    let mut models: Vec<(Clock, HardPps)> = [DEFAULT_SHIFT_MAX]
        .iter()
        .chain(tunings)
        .map(|shift_max| {
            (
                Clock::new(config.phase_us),
                HardPps::with_shift_max(*shift_max),
            )
        })
        .collect();
    // chrony beside them, on pulses only.
    let mut chrony = config
        .ntp
        .is_none()
        .then(|| (Clock::new(config.phase_us), Chrony::new()));
    let mut pps = Pps::new();
    let mut receiver = config.receiver.map(|r| Pulses::new(r, &mut rng));
    // The oracle is told the receiver's noise and flicker too.
    let (sawtooth, flicker) = config
        .receiver
        .map_or((0.0, 0.0), |r| (r.noise_variance(), r.flicker_variance()));
    let mut oracle = Oracle::new(
        (config.jitter_ns.powi(2) + sawtooth).sqrt(),
        (config.wander_ppb.powi(2) + flicker).sqrt(),
    );
    let mut ntp = Ntp::new();
    if let Some(source) = config.ntp {
        let mut timex = Timex::default();
        timex.status = Some(NtpStatus::PLL);
        timex.constant = Some(source.constant);
        ntp.adjtime(&ours.tk, &timex)
            .expect("a valid time constant");
    }
    let mut trace = Trace {
        tuned_ns: vec![Vec::new(); tunings.len()],
        ..Trace::default()
    };
    // Every clock's counter to `count`, wound up (chrony's timers run
    // first).
    let windup = |ours: &mut Clock,
                  models: &mut [(Clock, HardPps)],
                  chrony: &mut Option<(Clock, Chrony)>,
                  count: u64| {
        ours.at(count).windup();
        for (clock, _) in models {
            clock.at(count).windup();
        }
        if let Some((clock, chrony)) = chrony {
            chrony.timers(clock.at(count));
            clock.at(count).windup();
        }
    };
    for second in 0..config.seconds {
        let t0 = second as f64;
        // The kernel's second, then the pulse at its edge.
        for (clock, hardpps) in &mut models {
            hardpps.second(clock.at(osc.count_at(t0)));
        }
        let out = config
            .outage
            .is_some_and(|(from, len)| (from..from + len).contains(&second));
        let dropped = rng.random::<f64>() < config.drops;
        let outlier = rng.random::<f64>() < config.outliers;
        let noise = config.jitter_ns * 1e-9 * gaussian(&mut rng);
        let (earliest, latest) = config.outlier_us;
        let lateness = earliest + (latest - earliest) * rng.random::<f64>();
        let late = match config.late {
            Some((at, us)) if at == second => us,
            _ if outlier => lateness,
            _ => 0.0,
        };
        let (received, not_a_pulse) = receiver
            .as_mut()
            .map_or((0.0, false), |pulses| pulses.lateness(second, &mut rng));
        let processed = osc.count_at(t0 + PROCESSING);
        let mut chrony_capture = None;
        if second > 0 && !out && !dropped && config.missing != Some(second) {
            let capture = osc.count_at(t0 + noise + late * 1e-6 + received * 1e-9);
            chrony_capture = Some(capture);
            if config.ntp.is_none() {
                pps.event(ours.at(processed), capture)
                    .expect("a capture 2 ms old is in the ring");
            }
            for (clock, hardpps) in &mut models {
                hardpps.pulse(clock.at(processed), capture, NOMINAL_HZ as f64);
            }
            if late == 0.0 && !not_a_pulse {
                oracle.pulse(second, capture as f64 - t0 * NOMINAL_HZ as f64);
            }
        }
        // chrony's driver polls each second, as the pulse is processed.
        if let Some((clock, chrony)) = &mut chrony {
            chrony.poll(clock.at(processed), chrony_capture);
        }
        if let Some(source) = config.ntp.filter(|source| second % source.poll == 0) {
            let delay = |rng: &mut ChaCha8Rng| -source.delay_us * (1.0 - rng.random::<f64>()).ln();
            let asymmetry = (delay(&mut rng) - delay(&mut rng)) / 2.0;
            let error = ours.error(processed, t0 + PROCESSING, &mut trace.backward_steps);
            let mut timex = Timex::default();
            timex.offset_ns = Some((-error + asymmetry * 1e3).round() as i64);
            ntp.adjtime(&ours.tk, &timex)
                .expect("an offset is always taken");
        }
        for windup_at in 1..WINDUPS {
            let count = osc.count_at(t0 + windup_at as f64 / WINDUPS as f64);
            if windup_at == WINDUPS / 2 {
                let t = t0 + 0.5;
                let backward = &mut trace.backward_steps;
                trace.ours_ns.push(ours.error(count, t, backward));
                trace.model_ns.push(models[0].0.error(count, t, backward));
                for (errors, (clock, _)) in trace.tuned_ns.iter_mut().zip(&mut models[1..]) {
                    errors.push(clock.error(count, t, backward));
                }
                // A clock steered by the oracle is behind by as much as
                // it thinks the oscillator ahead beyond the truth.
                let truth = count as f64 - t * NOMINAL_HZ as f64;
                trace.oracle_ns.push(truth - oracle.phase(0.5));
                if let Some((clock, chrony)) = &mut chrony {
                    trace.chrony_ns.push(clock.error(count, t, backward));
                    trace
                        .chrony_frequency_ppb
                        .push(chrony.frequency_ppb() - osc.y() * 1e9);
                }
                let y = osc.y() * 1e9;
                let estimate = match config.ntp {
                    // The NTP frequency is the correction: minus the oscillator's.
                    Some(_) => -ntp.state().frequency_ppb as f64,
                    None => pps.status(&ours.tk).frequency_ppb as f64,
                };
                trace.ours_frequency_ppb.push(estimate - y);
                trace
                    .model_frequency_ppb
                    .push(models[0].1.frequency_ppb() - y);
            }
            windup(&mut ours, &mut models, &mut chrony, count);
            ntp.second(&ours.tk);
        }
        let step = config
            .step
            .filter(|&(at, _)| at == second + 1)
            .map_or(0.0, |(_, ppm)| ppm * 1e-6);
        let flicker = receiver
            .as_mut()
            .map_or(0.0, |pulses| pulses.flicker_step(&mut rng));
        osc.next_second(&mut rng, step + flicker);
        oracle.next_second(step * 1e9);
        let count = osc.count_at(t0 + 1.0);
        windup(&mut ours, &mut models, &mut chrony, count);
        ntp.second(&ours.tk);
    }
    trace
}
