//! The physical limit: the steady-state RMS phase error of the Kalman
//! filter for a 1 Hz PPS with white timestamp noise σ and a frequency
//! wandering as a random walk of w per √s (the error just after a pulse).

/// The limit, in the units of `sigma` (seconds or nanoseconds alike), for
/// timestamp noise `sigma` and wander `wander` (in those units a second
/// per √s).
///
/// ```
/// // σ = 100 ns, w = 1 ppb/√s (1 ns a second per √s): about 36 ns.
/// let limit = timehands_sim::limit(100.0, 1.0);
/// assert!((limit - 36.3).abs() < 0.1, "{limit}");
/// ```
pub fn limit(sigma: f64, wander: f64) -> f64 {
    steady_state(sigma, wander).0.sqrt()
}

/// The best a clock can do through an outage: the RMS phase error of the
/// Kalman filter's prediction `seconds` after its last pulse, from its
/// steady state (units as [`limit`]).
///
/// ```
/// // σ = 100 ns, w = 1 ppb/√s, a minute without pulses: about 366 ns.
/// let holdover = timehands_sim::holdover(100.0, 1.0, 60);
/// assert!((holdover - 365.6).abs() < 0.5, "{holdover}");
/// ```
pub fn holdover(sigma: f64, wander: f64, seconds: u64) -> f64 {
    let (xx, xy, yy) = steady_state(sigma, wander);
    let (n, q) = (seconds as f64, wander * wander);
    (xx + 2.0 * n * xy + n * n * yy + q * n * (n - 1.0) * (2.0 * n - 1.0) / 6.0).sqrt()
}

/// The Kalman filter's steady-state covariance after a pulse: the phase's
/// variance, its covariance with the frequency, the frequency's variance.
fn steady_state(sigma: f64, wander: f64) -> (f64, f64, f64) {
    let (r, q) = (sigma * sigma, wander * wander);
    // The Riccati recursion from a two-point fit, to its fixed point.
    let (mut xx, mut xy, mut yy) = (r, r, 2.0 * r);
    for _ in 0..100_000 {
        let (pxx, pxy, pyy) = (xx + 2.0 * xy + yy, xy + yy, yy + q);
        let s = pxx + r;
        let (kx, ky) = (pxx / s, pxy / s);
        let next = ((1.0 - kx) * pxx, (1.0 - kx) * pxy, pyy - ky * pxy);
        if next == (xx, xy, yy) {
            break;
        }
        (xx, xy, yy) = next;
    }
    (xx, xy, yy)
}
