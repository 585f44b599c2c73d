//! The second world: a GPS receiver's PPS as it really comes, so that the
//! discipline is not tuned to the first world's white jitter and random
//! walk alone.
//!
//! - the receiver puts its pulse on an edge of its own clock: a
//!   quantization error (the sawtooth) of up to half that clock's period
//!   either way, which drifts with the receiver's clock rate and so is
//!   correlated from second to second ("hanging bridges" where the rate
//!   nearly divides the period);
//! - before its fix it emits pulses from its free-running clock: a line
//!   10 µs to 1 ms off true time, at a rate a ppm or two off;
//! - bursts of outliers: now and then a few seconds of pulses each late by
//!   10 to 200 µs (a busy interrupt, multipath);
//! - flicker frequency noise on the oscillator: five Ornstein–Uhlenbeck
//!   processes, their time constants 10 to 100 000 s a decade apart, each of
//!   the same deviation (a flat Allan deviation over those decades).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::oscillator::gaussian;

/// The flicker's components' time constants, s.
const FLICKER_TAUS: [f64; 5] = [1e1, 1e2, 1e3, 1e4, 1e5];

/// What the receiver does, for a run's [`Config`](crate::Config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Receiver {
    /// Half the sawtooth's span, ns (its clock's period is twice this).
    pub sawtooth_ns: f64,
    /// The receiver clock's rate against true time, ppm: the sawtooth's
    /// drift.
    pub receiver_ppm: f64,
    /// Seconds of pulses before the fix.
    pub fix_after: u64,
    /// The chance that a second starts a burst of outliers.
    pub burst_chance: f64,
    /// How many seconds a burst lasts.
    pub burst_seconds: u64,
    /// Each flicker component's deviation, ppb.
    pub flicker_ppb: f64,
}

/// A receiver under way: its draws made at the start, and its state.
#[derive(Clone, Debug)]
pub struct Pulses {
    receiver: Receiver,
    /// The receiver clock's phase at true time 0, ns (within a period).
    phase: f64,
    /// Before the fix: the free-running pulses' offset (ns) and rate (ppb).
    free_offset: f64,
    free_rate: f64,
    /// Seconds of burst left.
    burst_left: u64,
    /// The flicker's components, ppb.
    flicker: [f64; FLICKER_TAUS.len()],
}

impl Pulses {
    /// The receiver's draws from `rng`: the sawtooth's starting phase, and
    /// the free-running pulses' offset (±10 µs to 1 ms) and rate (±0.5 to
    /// 2 ppm).
    pub fn new(receiver: Receiver, rng: &mut ChaCha8Rng) -> Pulses {
        let sign = |rng: &mut ChaCha8Rng| if rng.random::<bool>() { 1.0 } else { -1.0 };
        let phase = 2.0 * receiver.sawtooth_ns * rng.random::<f64>();
        let free_offset = sign(rng) * (10_000.0 + 990_000.0 * rng.random::<f64>());
        let free_rate = sign(rng) * (500.0 + 1_500.0 * rng.random::<f64>());
        let flicker = FLICKER_TAUS.map(|_| receiver.flicker_ppb * gaussian(rng));
        Pulses {
            receiver,
            phase,
            free_offset,
            free_rate,
            burst_left: 0,
            flicker,
        }
    }

    /// How late second `second`'s pulse is, ns, and whether the oracle is
    /// told it is not one to take (before the fix, or in a burst); draws
    /// the burst's.
    pub fn lateness(&mut self, second: u64, rng: &mut ChaCha8Rng) -> (f64, bool) {
        let starts = rng.random::<f64>() < self.receiver.burst_chance;
        let burst_late = 10_000.0 + 190_000.0 * rng.random::<f64>();
        if starts && self.burst_left == 0 {
            self.burst_left = self.receiver.burst_seconds;
        }
        let in_burst = self.burst_left > 0;
        self.burst_left = self.burst_left.saturating_sub(1);
        if second < self.receiver.fix_after {
            return (self.free_offset + self.free_rate * second as f64, true);
        }
        // The next edge of the receiver's clock after the true second,
        // centred: the sawtooth.
        let period = 2.0 * self.receiver.sawtooth_ns;
        let at = self.phase + second as f64 * self.receiver.receiver_ppm * 1e3;
        let sawtooth = period - at.rem_euclid(period) - self.receiver.sawtooth_ns;
        if in_burst {
            (sawtooth + burst_late, true)
        } else {
            (sawtooth, false)
        }
    }

    /// The flicker's change of the oscillator's frequency over the next
    /// second, as a fraction.
    pub fn flicker_step(&mut self, rng: &mut ChaCha8Rng) -> f64 {
        let mut change = 0.0;
        for (value, tau) in self.flicker.iter_mut().zip(FLICKER_TAUS) {
            let keep = (-1.0 / tau).exp();
            let next = keep * *value
                + self.receiver.flicker_ppb * (1.0 - keep * keep).sqrt() * gaussian(rng);
            change += next - *value;
            *value = next;
        }
        change * 1e-9
    }
}

impl Receiver {
    /// The variance of the pulses' error about the truth that is not the
    /// oscillator's, ns²: the sawtooth's (uniform over its span).
    pub fn noise_variance(&self) -> f64 {
        self.sawtooth_ns * self.sawtooth_ns / 3.0
    }

    /// The variance of the flicker's change of frequency in a second,
    /// ppb²: what the oracle is told as its wander.
    pub fn flicker_variance(&self) -> f64 {
        FLICKER_TAUS
            .iter()
            .map(|tau| {
                let keep = (-1.0 / tau).exp();
                // (keep − 1)² var + (1 − keep²) var, var the deviation².
                ((keep - 1.0).powi(2) + 1.0 - keep * keep) * self.flicker_ppb.powi(2)
            })
            .sum()
    }
}
