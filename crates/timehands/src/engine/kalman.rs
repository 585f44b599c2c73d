//! The estimator of a free-running oscillator's phase and frequency from
//! noisy timestamps of known instants: a two-state Kalman filter in fixed
//! point (no floating point: a Cortex-M0 has none).
//!
//! # The model
//!
//! At second `k` the oscillator is `x` ahead of true time and runs `y` fast;
//! its frequency wanders as a random walk of variance `q` a second:
//! `x[k+1] = x[k] + y[k]`, `y[k+1] = y[k] + v`, `v ~ N(0, q)`. A pulse's
//! timestamp measures `x` with white noise of variance `r`. For this model
//! the Kalman filter is the best estimator there is, and its steady-state
//! error is the physical limit the discipline is held to; its gains start
//! as those of a least-squares line through the pulses so far (acquisition
//! in seconds) and settle where the wander and the jitter balance.
//!
//! # Units
//!
//! Phases are nanoseconds as 96.32 fixed point (`i128`), frequencies
//! nanoseconds a second (ppb) as the same; the covariance is in those units
//! squared, also with 32 fraction bits. Every product below fits an `i128`
//! for phases up to a second, jitter up to a millisecond and gaps up to
//! [`MAX_GAP`] seconds.

/// One in the 32-bit fixed point of phases, frequencies and gains.
pub(super) const ONE: i128 = 1 << 32;

/// The longest gap between pulses the filter carries its state over, in
/// seconds: longer, and it starts again.
pub(super) const MAX_GAP: i128 = 4096;

/// `a * b` for fixed-point operands, rounded toward negative infinity.
fn mul(a: i128, b: i128) -> i128 {
    (a * b) >> 32
}

/// `a / b` as a fixed-point quotient.
fn div(a: i128, b: i128) -> i128 {
    (a << 32) / b
}

/// The state estimate and its covariance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Kalman {
    /// Phase, ns (fixed point), in the oscillator's frame.
    pub(super) x: i128,
    /// Frequency, ppb (fixed point).
    pub(super) y: i128,
    /// Variance of `x`, ns².
    pub(super) pxx: i128,
    /// Covariance of `x` and `y`, ns²/s.
    pub(super) pxy: i128,
    /// Variance of `y`, ppb².
    pub(super) pyy: i128,
}

impl Kalman {
    /// The line through two measurements `n` seconds apart, `x1` the later,
    /// each of variance `r`: where acquisition starts.
    pub(super) fn fit(x0: i128, x1: i128, n: i128, r: i128) -> Kalman {
        Kalman {
            x: x1,
            y: (x1 - x0) / n,
            pxx: r,
            pxy: r / n,
            pyy: 2 * r / (n * n),
        }
    }

    /// Carries the estimate `n` seconds on, under a wander of `q` (ppb² a
    /// second): the phase runs at the frequency, and the uncertainty of
    /// both grows (`F^n P F^n' + Q_n`, with `Q_n` the integrated random walk).
    pub(super) fn predict(&mut self, n: i128, q: i128) {
        self.x += self.y * n;
        self.pxx += 2 * n * self.pxy + n * n * self.pyy + q * n * (n - 1) * (2 * n - 1) / 6;
        self.pxy += n * self.pyy + q * n * (n - 1) / 2;
        self.pyy += q * n;
    }

    /// The variance of the next measurement's innovation, for jitter `r`.
    pub(super) fn innovation_variance(&self, r: i128) -> i128 {
        self.pxx + r
    }

    /// Takes in a measurement `z` of the phase with variance `r`.
    pub(super) fn update(&mut self, z: i128, r: i128) {
        let s = self.innovation_variance(r);
        let (kx, ky) = (div(self.pxx, s), div(self.pxy, s));
        let innovation = z - self.x;
        self.x += mul(kx, innovation);
        self.y += mul(ky, innovation);
        // (I - K H) P, written so that the covariance stays symmetric.
        self.pyy -= mul(ky, self.pxy);
        self.pxx -= mul(kx, self.pxx);
        self.pxy -= mul(kx, self.pxy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From a two-point fit the covariance converges to the steady state
    /// of the Riccati equation: for σ = 100 ns and w = 1 ppb/√s the phase
    /// error is 36.3 ns (the figure the discipline is held to).
    #[test]
    fn the_covariance_settles_at_the_physical_limit() {
        let r = 10_000 * ONE; // (100 ns)²
        let q = ONE; // (1 ppb)² a second
        let mut k = Kalman::fit(0, 0, 1, r);
        for _ in 0..2000 {
            k.predict(1, q);
            k.update(k.x, r);
        }
        let ns = (k.pxx / ONE).isqrt();
        assert_eq!(ns, 36, "{k:?}");
    }

    /// With no wander the filter is the least-squares line: a noiseless
    /// line is found exactly, whatever the gaps.
    #[test]
    fn a_straight_line_is_found_exactly() {
        let y = 100_000 * ONE; // 100 ppm
        let mut k = Kalman::fit(0, y, 1, ONE);
        let mut second = 1;
        for gap in [1, 1, 3, 1, 60, 1] {
            second += gap;
            k.predict(gap, 0);
            k.update(y * second, ONE);
        }
        assert_eq!(k.y / ONE, 100_000);
        assert_eq!(k.x / ONE, 100_000 * second);
    }
}
