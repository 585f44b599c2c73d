//! The simulated oscillator: a nominal frequency, an offset from it, a
//! random-walk wander and steps, and the counter value at any true time.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A standard normal sample (Box–Muller): one of the pair, for determinism
/// without a cache.
pub fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>();
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// An oscillator counting at `nominal × (1 + y)`, `y` constant within each
/// true second and taking a random-walk step (and any scheduled step) at
/// each whole second.
#[derive(Clone, Debug)]
pub struct Oscillator {
    nominal: f64,
    wander: f64,
    /// The true second the state below is for.
    second: i64,
    /// Its frequency offset, and the previous second's.
    y: f64,
    y_before: f64,
    /// Counts at the start of the second (exact to a hundredth of a count
    /// over a day at 1 GHz).
    counts: f64,
}

impl Oscillator {
    /// An oscillator of `nominal` Hz, `y` fast (a fraction: 1e-4 is 100
    /// ppm), wandering `wander` a √s, at count 0 at true time 0.
    pub fn new(nominal: u64, y: f64, wander: f64) -> Oscillator {
        Oscillator {
            nominal: nominal as f64,
            wander,
            second: 0,
            y,
            y_before: y,
            counts: 0.0,
        }
    }

    /// The frequency offset now.
    pub fn y(&self) -> f64 {
        self.y
    }

    /// Moves to the next true second: the wander's step, plus `step`.
    pub fn next_second(&mut self, rng: &mut ChaCha8Rng, step: f64) {
        self.counts += self.nominal * (1.0 + self.y);
        self.second += 1;
        self.y_before = self.y;
        self.y += self.wander * gaussian(rng) + step;
    }

    /// The counter's value at true time `t`, within a second of the current
    /// second's start (either side).
    pub fn count_at(&self, t: f64) -> u64 {
        let since = t - self.second as f64;
        let y = if since >= 0.0 { self.y } else { self.y_before };
        (self.counts + self.nominal * (1.0 + y) * since).floor() as u64
    }
}
