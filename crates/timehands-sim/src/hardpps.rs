//! The baseline: FreeBSD's (and RTEMS') `hardpps` with the kernel's
//! per-second update, modelled from its published behaviour and driving a
//! real `Timekeeper` the way the kernel drives its timecounter.
//!
//! - phase: the median of the last three pulses' offsets; their spread is
//!   a jitter sample, averaged with a weight of 1/4; a pulse whose spread
//!   exceeds four times that average is dropped (the popcorn spike
//!   suppressor);
//! - a pulse less than a second less 500 µs after the last is ignored
//!   (the gate);
//! - frequency: the raw counts over a calibration interval of 2^shift
//!   seconds (4 s at first) give the oscillator's frequency; its difference
//!   from the current estimate, clamped to ±100 ppm (the wander limit), is
//!   added; four good intervals in a row double the interval, up to 256 s,
//!   four clamped ones halve it; an interval that does not last exactly
//!   2^shift seconds (a pulse missing) is discarded;
//! - each second the clock is slewed by the phase offset over 2^shift and
//!   runs at the frequency estimate;
//! - a watchdog: 120 s without a pulse and the phase is no longer used.

use timehands::{SimCounter, Timekeeper};

const MIN_SHIFT: u32 = 2;
/// The kernel's default `pps_shiftmax` (`PPS_FAVGDEF`): calibration
/// intervals up to 256 s; `PPS_FAVGMAX` allows up to 2^15 s.
pub(crate) const DEFAULT_SHIFT_MAX: u32 = 8;
const MAX_SHIFT_MAX: u32 = 15;
const MAX_WANDER_PPB: f64 = 100_000.0;
const MAX_FREQ_PPB: f64 = 500_000.0;
const GATE_NS: f64 = 500_000.0;
const WATCHDOG: u32 = 120;

/// The `hardpps` model's state.
#[derive(Debug)]
pub struct HardPps {
    /// The last three offsets (ns, the correction to apply), newest first.
    offsets: [f64; 3],
    seen: usize,
    jitter: f64,
    /// The phase offset still to slew out, ns.
    offset: f64,
    /// The frequency estimate, ppb (the correction: minus the oscillator's).
    freq: f64,
    shift: u32,
    /// The longest interval's shift (`pps_shiftmax`).
    shift_max: u32,
    good: i32,
    /// The count and raw second number where the calibration interval began.
    calibration: Option<(u64, u64)>,
    last_count: Option<u64>,
    valid: u32,
}

impl Default for HardPps {
    fn default() -> HardPps {
        HardPps::new()
    }
}

impl HardPps {
    /// No pulse yet: shift 2, frequency 0, intervals up to 256 s.
    pub fn new() -> HardPps {
        HardPps::with_shift_max(DEFAULT_SHIFT_MAX)
    }

    /// As [`new`](HardPps::new), with calibration intervals up to
    /// 2^`shift_max` s (the kernel's `pps_shiftmax`, 2 to 15).
    pub fn with_shift_max(shift_max: u32) -> HardPps {
        HardPps {
            offsets: [0.0; 3],
            seen: 0,
            jitter: 0.0,
            offset: 0.0,
            freq: 0.0,
            shift: MIN_SHIFT,
            shift_max: shift_max.clamp(MIN_SHIFT, MAX_SHIFT_MAX),
            good: 0,
            calibration: None,
            last_count: None,
            valid: 0,
        }
    }

    /// The frequency estimate as the oscillator's offset, ppb (positive fast).
    pub fn frequency_ppb(&self) -> f64 {
        -self.freq
    }

    /// The calibration interval, seconds.
    pub fn interval(&self) -> u64 {
        1 << self.shift
    }

    /// A pulse captured at `count` on `tk` (whose counter runs at a nominal
    /// `hz`).
    pub fn pulse(&mut self, tk: &Timekeeper<SimCounter>, count: u64, hz: f64) {
        let Ok(stamp) = tk.time_of(count) else {
            return;
        };
        if let Some(last) = self.last_count {
            let interval = (count - last) as f64 * 1e9 / hz;
            if interval < 1e9 - GATE_NS {
                return;
            }
        }
        self.last_count = Some(count);
        self.valid = WATCHDOG;
        // The offset to correct: minus the time past the nearest second.
        let frac = stamp.realtime.frac() as i64 as f64 / 2f64.powi(64);
        self.offsets = [-frac * 1e9, self.offsets[0], self.offsets[1]];
        self.seen += 1;
        if self.seen >= 3 {
            let mut sorted = self.offsets;
            sorted.sort_by(f64::total_cmp);
            let (median, spread) = (sorted[1], sorted[2] - sorted[0]);
            if self.seen > 3 && spread > 4.0 * self.jitter {
                // Popcorn: dropped, the jitter average still learns.
            } else {
                self.offset = median;
            }
            self.jitter += (spread - self.jitter) / 4.0;
        }
        self.calibrate(count, hz);
    }

    /// The frequency calibration at a pulse at `count`.
    fn calibrate(&mut self, count: u64, hz: f64) {
        let Some((start, _)) = self.calibration else {
            self.calibration = Some((count, 0));
            return;
        };
        let (_, pulses) = self.calibration.as_mut().expect("set above");
        *pulses += 1;
        if *pulses < self.interval() {
            return;
        }
        self.calibration = Some((count, 0));
        let raw = (count - start) as f64 * 1e9 / hz;
        let seconds = (raw / 1e9).round();
        if seconds != self.interval() as f64 {
            return;
        }
        let measured = -(raw - seconds * 1e9) / seconds;
        let mut change = measured - self.freq;
        if change.abs() > MAX_WANDER_PPB {
            change = change.signum() * MAX_WANDER_PPB;
            self.good -= 1;
        } else {
            self.good += 1;
        }
        if self.good >= 4 {
            self.good = 0;
            self.shift = (self.shift + 1).min(self.shift_max);
        } else if self.good <= -4 {
            self.good = 0;
            self.shift = (self.shift - 1).max(MIN_SHIFT);
        }
        self.freq = (self.freq + change).clamp(-MAX_FREQ_PPB, MAX_FREQ_PPB);
    }

    /// The kernel's second: slews `tk` by the offset over 2^shift and sets
    /// its frequency.
    pub fn second(&mut self, tk: &Timekeeper<SimCounter>) {
        if self.valid > 0 {
            self.valid -= 1;
        } else {
            self.offset = 0.0;
        }
        let adj = self.offset / self.interval() as f64;
        self.offset -= adj;
        tk.adjtime(adj.round() as i64);
        tk.set_frequency_adjustment(self.freq.round() as i64)
            .expect("clamped to ±500 ppm");
    }
}
