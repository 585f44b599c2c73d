//! The yardstick: a Kalman filter of the oscillator that is told the truth
//! the discipline has to find out (the jitter, the wander, which pulses are
//! outliers, the second of a frequency step and its size as a variance),
//! run on the same pulses. No discipline can do better on the same draws;
//! ours is held to a fraction above it.
//!
//! Its figure is that of a clock it would steer through the same
//! interface as ours: between pulses such a clock runs at the whole number
//! of ppt that cancels the estimated frequency (the timekeeper's frequency
//! adjustment, rounded as ours rounds it; the scale's own resolution, 54 ppt
//! at 1 GHz, is 16 ns over a 300 s outage at the most).

/// The oracle's estimate of the oscillator's raw phase (ns ahead of true
/// time) and frequency (ppb), with their covariance.
#[derive(Clone, Debug)]
pub struct Oracle {
    /// The jitter's variance, ns² (with the counter's quantization).
    r: f64,
    /// The wander's variance a second, ppb².
    q: f64,
    /// The first pulse's phase, until a second one gives the line.
    first: Option<(u64, f64)>,
    /// The state after the last second's pulse, once there is a line.
    state: Option<State>,
    /// The phase at the last good pulse, the frequency there in whole ppt,
    /// and the seconds since.
    held: (f64, f64, f64),
}

#[derive(Clone, Copy, Debug)]
struct State {
    x: f64,
    y: f64,
    pxx: f64,
    pxy: f64,
    pyy: f64,
}

impl Oracle {
    /// An oracle told the pulses' jitter `sigma` (ns) and the wander
    /// `wander` (ppb/√s).
    pub fn new(sigma: f64, wander: f64) -> Oracle {
        Oracle {
            // A count is a nanosecond: its floor adds 1/12 ns².
            r: sigma * sigma + 1.0 / 12.0,
            q: wander * wander,
            first: None,
            state: None,
            held: (0.0, 0.0, 0.0),
        }
    }

    /// Moves to the next second, whose frequency may have stepped by up to
    /// `step` ppb (the oracle knows when, and how much it could be).
    pub fn next_second(&mut self, step: f64) {
        self.held.2 += 1.0;
        if let Some(s) = &mut self.state {
            s.x += s.y;
            s.pxx += 2.0 * s.pxy + s.pyy;
            s.pxy += s.pyy;
            s.pyy += self.q + step * step;
        }
    }

    /// A good pulse of second `second`, its phase `z` ns (outliers are not
    /// given: the oracle knows them).
    pub fn pulse(&mut self, second: u64, z: f64) {
        let r = self.r;
        match (&mut self.state, self.first) {
            (Some(s), _) => {
                let innovation = s.pxx + r;
                let (kx, ky) = (s.pxx / innovation, s.pxy / innovation);
                let residual = z - s.x;
                s.x += kx * residual;
                s.y += ky * residual;
                s.pyy -= ky * s.pxy;
                s.pxx -= kx * s.pxx;
                s.pxy -= kx * s.pxy;
            }
            (None, Some((at, z0))) if at < second => {
                let n = (second - at) as f64;
                self.state = Some(State {
                    x: z,
                    y: (z - z0) / n,
                    pxx: r,
                    pxy: r / n,
                    pyy: 2.0 * r / (n * n),
                });
            }
            (None, _) => self.first = Some((second, z)),
        }
        self.held = match self.state {
            Some(s) => (s.x, cancelled(s.y), 0.0),
            None => (z, 0.0, 0.0),
        };
    }

    /// The phase its clock holds `seconds` into this second, ns: the last
    /// good pulse's estimate run on at its whole ppt (zero before any).
    pub fn phase(&self, seconds: f64) -> f64 {
        let (x, y, since) = self.held;
        x + y * (since + seconds)
    }
}

/// The frequency (ppb) a clock cancels when its adjustment is the whole
/// ppt nearest `-y / (1 + y)`, as ours sets it for an estimate `y`.
fn cancelled(y: f64) -> f64 {
    let adjustment = (-y / (1.0 + y * 1e-9) * 1e3).round() / 1e3;
    -adjustment / (1.0 + adjustment * 1e-9)
}
