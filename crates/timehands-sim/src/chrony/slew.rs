//! `local.c`, `sys_generic.c` and `sys_linux.c`: chrony's absolute
//! frequency and the slew of its offset over the Linux kernel's frequency,
//! set on the timekeeper.

use timehands::{SimCounter, Timekeeper};

/// `maxslewrate`, 83 333 ppm, as a fraction (`conf.c`).
const MAX_SLEW_RATE: f64 = 1.0 / 12.0;
/// `sys_generic.c`: the smallest offset slewed, the slew's length bounds,
/// and the tracking of timers that end late.
const MIN_OFFSET_CORRECTION: f64 = 1e-9;
const MIN_SLEW_DURATION: f64 = 1.0;
const MAX_SLEW_DURATION: f64 = 1e4;
const MAX_SLEW_EXCESS_DURATION: f64 = 100.0;
const MIN_SLEW_DURATION_EXCESS_RATIO: f64 = 5.0;
const SLEW_EXCESS_DURATION_DECAY: f64 = 0.9;
/// `USER_HZ`: `ADJ_TICK` moves the frequency in steps of 100 ppm
/// (`sys_linux.c`, `set_frequency`).
const USER_HZ: f64 = 100.0;
/// `ADJ_FREQUENCY`'s unit: 2^-16 ppm (`sys_timex.c`, `FREQ_SCALE`).
const FREQ_SCALE: f64 = 65536.0;
/// How late a frequency change may take effect: 10 µs on kernels from 4.19
/// (`sys_linux.c`, `tick_update_hz`), widened by the largest frequency,
/// 10 % (`sys_generic.c`, `SYS_Generic_CompleteFreqDriver`).
const MAX_FREQ_CHANGE_DELAY: f64 = 1e-5 * 1.1;
/// The slew's part of the frequency from which the timekeeper runs it as an
/// `adjtime` slew rather than in the frequency adjustment, ppm.
const ADJTIME_FROM_PPM: f64 = 1.0;

/// sys_generic.c's slew over sys_linux.c's kernel frequency, and local.c's
/// absolute frequency.
#[derive(Debug)]
pub(super) struct Slew {
    /// The frequency estimate, ppm (positive: the clock is slowed, its
    /// oscillator fast): local.c's `current_freq_ppm`, sys_generic.c's
    /// `base_freq`.
    pub(super) base_freq: f64,
    /// The offset still to slew out (positive: the clock is fast), s.
    pub(super) offset_register: f64,
    /// The slew's frequency offset, relative to the kernel's frequency.
    slew_freq: f64,
    /// When the current slew began and how long it was to last, s.
    slew_start: f64,
    slew_duration: f64,
    /// How late slews have ended, as a decaying maximum, s.
    excess_duration: f64,
    /// The suggested correction rate, s².
    pub(super) correction_rate: f64,
    /// The dispersion the last change of slew frequency introduced, s.
    slew_error: f64,
    /// The slew the timekeeper runs as `adjtime`, if any.
    adjtime: Option<Plan>,
}

/// A slew given to the timekeeper's `adjtime`, as chrony counts it.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// When chrony began it, raw s.
    start: f64,
    /// Its frequency offset (chrony's `slew_freq`; 0 for what only the
    /// timekeeper has left of earlier ones) and its length, s.
    rate: f64,
    duration: f64,
}

impl Plan {
    /// What chrony counts as still to run of it at raw time `now`, s
    /// (positive: to slow the clock by).
    fn left(&self, now: f64) -> f64 {
        self.rate * (self.duration - (now - self.start).clamp(0.0, self.duration))
    }
}

/// sys_linux.c, `set_frequency`: the frequency `ppm` as the kernel takes
/// it, whole ticks of `USER_HZ` ppm and the rest in 2^-16 ppm truncated.
fn kernel_frequency(ppm: f64) -> f64 {
    let ticks = (ppm / USER_HZ).round();
    let rest = ppm - USER_HZ * ticks;
    USER_HZ * ticks + (rest * FREQ_SCALE).trunc() / FREQ_SCALE
}

impl Slew {
    pub(super) fn new() -> Slew {
        Slew {
            base_freq: 0.0,
            offset_register: 0.0,
            slew_freq: 0.0,
            slew_start: 0.0,
            slew_duration: MAX_SLEW_DURATION,
            excess_duration: 0.0,
            correction_rate: 0.0,
            slew_error: 0.0,
            adjtime: None,
        }
    }

    /// offset_convert: the correction from the raw time `raw` to cooked
    /// time, and its error.
    pub(super) fn correction(&self, raw: f64) -> (f64, f64) {
        let duration = raw - self.slew_start;
        let correction = self.slew_freq * duration - self.offset_register;
        let error = if duration.abs() <= MAX_FREQ_CHANGE_DELAY {
            self.slew_error
        } else {
            0.0
        };
        (correction, error)
    }

    /// When the running slew's timer ends it.
    pub(super) fn end(&self) -> f64 {
        self.slew_start + self.slew_duration
    }

    /// update_slew, at raw time `now`: what ran taken off the register, a
    /// new slew planned and set on `tk`; the dispersion a change of the
    /// slew's frequency adds, if it counts.
    pub(super) fn update(&mut self, tk: &Timekeeper<SimCounter>, now: f64) -> Option<f64> {
        let elapsed = now - self.slew_start;
        self.offset_register -= self.slew_freq * elapsed;
        self.excess_duration = (self.excess_duration + 1e-9) * SLEW_EXCESS_DURATION_DECAY;
        let excess = elapsed - self.slew_duration;
        if self.excess_duration < excess && excess <= MAX_SLEW_EXCESS_DURATION {
            self.excess_duration = excess;
        }
        // The correction rate over the offset, at least 1 s (and five
        // times the late ends).
        let register = self.offset_register;
        let duration = if register.abs() < MIN_OFFSET_CORRECTION {
            MAX_SLEW_DURATION
        } else {
            (self.correction_rate / register.abs())
                .max(MIN_SLEW_DURATION)
                .max(MIN_SLEW_DURATION_EXCESS_RATIO * self.excess_duration)
        };
        let correction_freq = (register / duration).clamp(-MAX_SLEW_RATE, MAX_SLEW_RATE);
        let total = kernel_frequency(self.base_freq + correction_freq * (1e6 - self.base_freq));
        let old_slew_freq = self.slew_freq;
        self.slew_freq = (total - self.base_freq) / (1e6 - total);
        self.slew_error = ((old_slew_freq - self.slew_freq) * MAX_FREQ_CHANGE_DELAY).abs();
        // The slew lasts until the register is out at its frequency (1 s to
        // 10^4 s), or, none or the wrong way, till a retry.
        self.slew_duration =
            if register.abs() < MIN_OFFSET_CORRECTION || register * self.slew_freq <= 0.0 {
                MAX_SLEW_DURATION
            } else {
                (register / self.slew_freq).clamp(MIN_SLEW_DURATION, MAX_SLEW_DURATION)
            };
        self.slew_start = now;
        self.set_kernel(tk, total, now);
        (self.slew_error >= MIN_OFFSET_CORRECTION).then_some(self.slew_error)
    }

    /// The kernel's frequency `total` (ppm, slowing) on the timekeeper at
    /// raw time `now`: in its frequency adjustment while the slew's part is
    /// under [`ADJTIME_FROM_PPM`], otherwise the estimate there and the
    /// slew as `adjtime` at its rate for what it is to run before its
    /// timer. The timekeeper begins a slew at its next switch point, later
    /// than chrony counts: what it has not run of earlier ones beyond what
    /// chrony counts as left is run besides.
    fn set_kernel(&mut self, tk: &Timekeeper<SimCounter>, total: f64, now: f64) {
        let base = kernel_frequency(self.base_freq);
        let slew_ppm = total - base;
        let fast = slew_ppm.abs() >= ADJTIME_FROM_PPM;
        if fast {
            tk.set_slew_rate((slew_ppm.abs() * 1e3).round() as i64)
                .expect("maxslewrate is under 10^9 ppb");
        }
        if fast || self.adjtime.is_some() {
            // Seconds to slow the clock by as the timekeeper's nanoseconds.
            let ns = |s: f64| (-s * 1e9).round() as i64;
            let request = if fast {
                self.slew_freq * self.slew_duration
            } else {
                0.0
            };
            let expected = self.adjtime.map_or(0.0, |plan| plan.left(now));
            let left = -(tk.adjtime(ns(request)) as f64) * 1e-9;
            let lag = left - expected;
            if ns(lag) != 0 {
                tk.adjtime(ns(request + lag));
            }
            self.adjtime = (fast || ns(lag) != 0).then_some(Plan {
                start: now,
                rate: if fast { self.slew_freq } else { 0.0 },
                duration: if fast { self.slew_duration } else { 0.0 },
            });
        }
        let frequency = if fast { base } else { total };
        tk.set_frequency_adjustment_ppt((-frequency * 1e6).round() as i64)
            .expect("the frequency is within ±500 ppm");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_takes_the_frequency_in_ticks_and_2_to_the_minus_16_ppm() {
        assert_eq!(kernel_frequency(100.0), 100.0);
        assert_eq!(kernel_frequency(10.0), 10.0);
        let rest = kernel_frequency(10.00001) - 10.0;
        assert_eq!(rest, 0.0, "under 2^-16 ppm, truncated");
        assert_eq!(kernel_frequency(-149.0), -100.0 - 49.0);
    }
}
