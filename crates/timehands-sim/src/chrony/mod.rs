//! The second anchor: chrony's PPS reference clock, `refclock PPS /dev/pps0`
//! with chrony's defaults as the only source, modelled from chrony's own
//! source (the `mlichvar/chrony` tree at 8f2db839, June 2026) and driving a
//! real `Timekeeper` the way chronyd drives the Linux kernel's clock.
//!
//! # The configuration
//!
//! ```text
//! refclock PPS /dev/pps0
//! local
//! ```
//!
//! A PPS refclock gives no whole seconds, so without `lock` chrony takes a
//! pulse only while its clock is synchronised or its local reference is
//! active (`refclock.c`, `RCL_AddCookedPulse`); alone it would never start.
//! `local` is the alternative chrony's documentation gives for that
//! (`doc/chrony.conf.adoc`, `PPS`): with its defaults (no `waitunsynced`, no
//! `activate`) the local reference is active from the start
//! (`reference.c`, `REF_GetReferenceParams`) and pulses are taken at once.
//! Once the PPS source has updated the clock, chrony is synchronised to it.
//! No `makestep` (the offset is only ever slewed), no driftfile (the
//! frequency starts at 0), `minsamples` 6, `maxsamples` 64.
//!
//! # A pulse's path to the clock
//!
//! - **refclock.c**: the PPS driver is polled every second (`dpoll` 0); a
//!   new pulse's offset is minus its time past the second on the *cooked*
//!   clock (the raw time with the slew still to run taken as run), wrapped into
//!   [-0.5, 0.5) s, with the clock's precision (1 ns: Linux's
//!   `clock_getres`) as its dispersion; every sixteen driver polls (`poll` 4)
//!   the filter's sample goes to the source.
//! - **samplefilt.c**: of the up to 64 samples (`filter` 64) since the last
//!   poll, the 60 % nearest the median offset (at least one dropped at each
//!   end from three on) are averaged, time and offset; their dispersion is a
//!   line's intercept error (four or more) or their standard deviation,
//!   replaced by a long-term average unless significantly smaller.
//! - **sourcestats.c, regress.c**: a weighted least-squares line through
//!   the source's samples (up to 64), its weights from their dispersions;
//!   the oldest are dropped one at a time while the residuals' runs test
//!   fails (down to six samples), with as many older samples as the line
//!   has kept extending the test; the line's intercept at the newest
//!   sample is the offset, its slope the frequency, and the slope's
//!   standard error times Student's t at 99.95 % the skew.
//! - **reference.c**: the new frequency is the old plus the measured one
//!   with a gain of `3 skew_old² / (3 skew_old² + skew²)`, and the skew
//!   follows; the offset, projected to now, is handed to the clock with a
//!   correction rate of `corrtimeratio` (3) × ½ × its standard deviation ×
//!   the time since the last update.
//! - **local.c, sys_generic.c, sys_linux.c**: the frequency is the kernel's
//!   (`ADJ_TICK` and `ADJ_FREQUENCY`, rounded as the kernel takes it); the
//!   offset is slewed by a further frequency offset of the offset over a
//!   duration (the correction rate over the offset, at least 1 s), at most
//!   `maxslewrate` (83 333 ppm), until a timer ends it. Every change of
//!   frequency or offset moves the samples held in the filter and the
//!   source's statistics as chrony moves them.
//!
//! # On the timekeeper
//!
//! chronyd on Linux sets one kernel frequency, the estimate plus the slew's
//! offset, and times the slew itself; the timekeeper has a frequency
//! adjustment (±500 ppm, in ppt) and an `adjtime` slew at a set rate that
//! stops by itself when its amount has run. The kernel's frequency (its
//! 2^-16 ppm steps taken as Linux takes them) becomes the frequency
//! adjustment while the slew's part is under 1 ppm; from 1 ppm on (the
//! first updates of an acquisition, a step's), the frequency adjustment is
//! the estimate and the slew's part runs as `adjtime` at its rate in whole
//! ppb for the amount chrony's timer allows it, so that it stops on time
//! however the windups fall. What differs is the timekeeper's, and every
//! discipline here has it: a change takes effect at its next switch point,
//! up to two windups (250 ms) after chrony made it (Linux: within 10 µs).
//! So an `adjtime` slew begins, and ends, later than chrony counts; what
//! the timekeeper has not run of one beyond what chrony counts as left is
//! added to the next, so that no slew is lost. A new frequency is late by
//! as much: 25 µs at 100 ppm, which the first update of an acquisition
//! leaves on the clock for the next to find. chrony's timers (the end of a
//! slew) run at the first windup after they are due, counted as if on
//! time; under 1 ppm the slew then runs on for that long (0.4 ns at most a
//! ppb).
//!
//! # Left out
//!
//! What cannot matter with one PPS source and these scenarios: source
//! selection and combining (with one source it reduces to "the regression
//! has three samples"), the reachability register, the root distance and
//! its limits (3 s to select; 0.5 s for a pulse to be taken, which an
//! outage reaches only after days), the driver's and the source's time
//! sanity checks, the pulse edge check (no `width`), `maxdispersion`,
//! `maxchange`, the frequency's limit (100 000 ppm), the asymmetry
//! correction (fixed at 0 for refclocks), leap seconds, temperature
//! compensation, the drift file and the tracking logs. The monotonic clock of the update
//! interval is the disciplined clock itself (they differ by the frequency
//! correction: ppm of 16 s).

mod filter;
mod regress;
mod slew;
mod sourcestats;

use timehands::{SimCounter, Timekeeper};

use filter::{Filter, PRECISION, Sample};
use slew::Slew;
use sourcestats::{Estimate, SourceStats};

/// Driver polls a source poll: `poll` 4 (16 s) over `dpoll` 0 (1 s)
/// (`conf.c`, `parse_refclock`; `refclock.c`, `poll_timeout`).
const DRIVER_POLLS: u32 = 16;
/// A skew beyond which the frequency is not updated, `maxupdateskew` 1000
/// ppm (`conf.c`).
const MAX_UPDATE_SKEW: f64 = 1000e-6;
/// `corrtimeratio` (`conf.c`).
const CORRECTION_TIME_RATIO: f64 = 3.0;

/// chrony's PPS refclock disciplining a clock: the model's state.
#[derive(Debug)]
pub struct Chrony {
    /// Driver polls since the last source poll.
    driver_polls: u32,
    filter: Filter,
    stats: SourceStats,
    /// reference.c: the skew of the frequency in use, and when the last
    /// update was (none yet: the first has no interval).
    our_skew: f64,
    last_update: Option<f64>,
    slew: Slew,
}

impl Default for Chrony {
    fn default() -> Chrony {
        Chrony::new()
    }
}

/// The timekeeper's realtime as seconds.
fn seconds(tk: &Timekeeper<SimCounter>) -> f64 {
    let now = tk.realtime();
    now.sec() as f64 + now.frac() as f64 / 2f64.powi(64)
}

impl Chrony {
    /// chronyd just started: no samples, frequency 0, skew 1 (reference.c,
    /// `REF_Initialise`).
    pub fn new() -> Chrony {
        Chrony {
            driver_polls: 0,
            filter: Filter::new(),
            stats: SourceStats::new(),
            our_skew: 1.0,
            last_update: None,
            slew: Slew::new(),
        }
    }

    /// The frequency estimate as the oscillator's offset, ppb (positive
    /// fast): the clock slowed by `f` runs true on an oscillator `f / (1 -
    /// f)` fast.
    pub fn frequency_ppb(&self) -> f64 {
        let f = self.slew.base_freq * 1e-6;
        f / (1.0 - f) * 1e9
    }

    /// chrony's timers due by now: the end of a slew, run as if on time.
    pub fn timers(&mut self, tk: &Timekeeper<SimCounter>) {
        let end = self.slew.end();
        if seconds(tk) >= end {
            let dispersion = self.slew.update(tk, end);
            self.add_dispersion(dispersion);
        }
    }

    /// The driver's poll, once a second (refclock.c, `poll_timeout`): the
    /// pulse the kernel captured at `capture` since the last poll, if any
    /// (the PPS driver's `pps_poll`: a new sequence number), and every
    /// sixteenth poll the filtered sample to the source and the clock.
    pub fn poll(&mut self, tk: &Timekeeper<SimCounter>, capture: Option<u64>) {
        self.timers(tk);
        if let Some(stamp) = capture.and_then(|count| tk.time_of(count).ok()) {
            let raw = stamp.realtime.sec() as f64 + stamp.realtime.frac() as f64 / 2f64.powi(64);
            self.add_pulse(raw);
        }
        self.driver_polls += 1;
        if self.driver_polls < DRIVER_POLLS {
            return;
        }
        self.driver_polls = 0;
        if let Some(sample) = self.filter.filtered() {
            // sources.c, SRC_AccumulateSample and SRC_SelectSource: with one
            // source, the reference is updated whenever its line has enough
            // samples.
            self.stats.accumulate(sample);
            self.stats.regress();
            if let Some(estimate) = self.stats.estimate {
                self.set_reference(tk, estimate);
            }
        }
    }

    /// RCL_AddPulse and RCL_AddCookedPulse: a pulse at raw time `raw`.
    fn add_pulse(&mut self, raw: f64) {
        // The cooked time: the raw time with the slew still to run.
        let (correction, error) = self.slew.correction(raw);
        let second = raw - raw.floor() + correction;
        // Minus the time past the second, into [-0.5, 0.5) (`rate` 1).
        let mut offset = -second;
        offset -= offset.trunc();
        if offset < -0.5 {
            offset += 1.0;
        } else if offset >= 0.5 {
            offset -= 1.0;
        }
        // Without `lock`, a pulse is taken while the clock is synchronised
        // or the local reference is active (REF_GetReferenceParams): here,
        // always (see the module's doc).
        self.filter.accumulate(Sample {
            time: raw + correction,
            offset,
            dispersion: error + PRECISION,
        });
    }

    /// REF_SetReference: the source's estimate to the clock.
    fn set_reference(&mut self, tk: &Timekeeper<SimCounter>, estimate: Estimate) {
        let now_raw = seconds(tk);
        let now = now_raw + self.slew.correction(now_raw).0;
        let offset = estimate.offset + (now - estimate.time) * estimate.frequency;
        let update_interval = self.last_update.map_or(0.0, |last| now_raw - last);
        // get_clock_estimates: the measured frequency weighted against the
        // one in use (taken as exact) by their skews.
        let gain = if estimate.skew.abs() > MAX_UPDATE_SKEW {
            0.0
        } else {
            let expected = 3.0 * self.our_skew * self.our_skew;
            (expected / (expected + estimate.skew * estimate.skew)).clamp(0.0, 1.0)
        };
        let frequency = gain * estimate.frequency;
        let extra_skew = (frequency * frequency * (1.0 - gain)
            + (estimate.frequency - frequency).powi(2) * gain)
            .sqrt();
        self.our_skew += gain * (estimate.skew - self.our_skew) + extra_skew;
        self.last_update = Some(now_raw);
        // get_correction_rate.
        let correction_rate = CORRECTION_TIME_RATIO * 0.5 * estimate.offset_sd * update_interval;
        self.accumulate(tk, now_raw, frequency, offset, correction_rate);
    }

    /// LCL_AccumulateFrequencyAndOffset: the frequency changed by `dfreq`,
    /// `doffset` to slew out at `correction_rate`, and the samples held moved
    /// to match.
    fn accumulate(
        &mut self,
        tk: &Timekeeper<SimCounter>,
        now: f64,
        dfreq: f64,
        doffset: f64,
        correction_rate: f64,
    ) {
        // The cooked time before the change.
        let cooked = now + self.slew.correction(now).0;
        let old = self.slew.base_freq;
        self.slew.base_freq += dfreq * (1e6 - old);
        // sys_generic.c, set_frequency then accrue_offset: each plans the
        // slew again.
        let first = self.slew.update(tk, now);
        self.add_dispersion(first);
        let dfreq = (self.slew.base_freq - old) / (1e6 - old);
        self.slew.offset_register += doffset;
        self.slew.correction_rate = correction_rate;
        let second = self.slew.update(tk, now);
        self.add_dispersion(second);
        // The parameter change handlers: the source's statistics
        // (sources.c, slew_sources) and the filter (refclock.c,
        // slew_samples).
        self.stats.slew(cooked, dfreq, doffset);
        self.filter.slew(cooked, dfreq, doffset);
    }

    /// The dispersion notify handlers (refclock.c and sources.c,
    /// add_dispersion).
    fn add_dispersion(&mut self, dispersion: Option<f64>) {
        if let Some(dispersion) = dispersion {
            self.filter.add_dispersion(dispersion);
            self.stats.add_dispersion(dispersion);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::run::{Config, run};

    #[test]
    fn clean_pulses_converge_to_the_phase_and_the_frequency() {
        let config = Config {
            frequency_ppm: 50.0,
            phase_us: 200.0,
            ..Config::new(1, 1800)
        };
        let trace = run(&config);
        let late = &trace.chrony_ns[1200..];
        let worst = late.iter().fold(0.0f64, |m, e| m.max(e.abs()));
        assert!(worst < 5.0, "phase within {worst} ns");
        let frequency = trace.chrony_frequency_ppb[1799];
        assert!(frequency.abs() < 0.1, "frequency {frequency} ppb off");
    }

    #[test]
    fn a_frequency_error_is_found_through_jitter() {
        let config = Config {
            frequency_ppm: -100.0,
            jitter_ns: 100.0,
            ..Config::new(3, 3600)
        };
        let trace = run(&config);
        let late = &trace.chrony_frequency_ppb[1800..];
        let rms = (late.iter().map(|f| f * f).sum::<f64>() / late.len() as f64).sqrt();
        assert!(rms < 2.0, "frequency {rms} ppb RMS off");
    }
}
