//! C's `%g`, which ministat prints every number with.
//!
//! `%.Pg` rounds to P significant digits, then writes the number in fixed
//! notation when its decimal exponent X (after that rounding) satisfies
//! `-4 <= X < P`, in exponent notation (`1.5e-06`, two exponent digits at
//! least) otherwise, and in both cases drops trailing zeros and a trailing
//! point. Rust's `{:.N}` and `{:.Ne}` round exactly (like glibc), so they give
//! the digits; this module only chooses the notation and trims.

/// `value` as C's `printf("%.{precision}g", value)` writes it.
pub fn g(value: f64, precision: usize) -> String {
    if value.is_nan() {
        // glibc writes the sign of a NaN (x86's default NaN is negative).
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .to_string();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    let significant = precision.max(1);
    let scientific = format!("{:.*e}", significant - 1, value);
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("Rust's {:e} always writes an exponent");
    let exponent: i32 = exponent
        .parse()
        .expect("Rust's {:e} writes a decimal exponent");
    if (-4..significant as i32).contains(&exponent) {
        let decimals = (significant as i32 - 1 - exponent) as usize;
        trim_fraction(&format!("{value:.decimals$}")).to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            trim_fraction(mantissa),
            exponent.unsigned_abs()
        )
    }
}

/// `digits` without the zeros that end its fraction, nor a point left bare.
fn trim_fraction(digits: &str) -> &str {
    if digits.contains('.') {
        digits.trim_end_matches('0').trim_end_matches('.')
    } else {
        digits
    }
}

#[cfg(test)]
mod tests {
    use super::g;

    #[test]
    fn examples_from_clock_gettime_figures() {
        assert_eq!(g(1.97503e-05, 6), "1.97503e-05");
        assert_eq!(g(5.88111, 6), "5.88111");
        assert_eq!(g(0.00033582683, 8), "0.00033582683");
        assert_eq!(g(3.6951597e-06, 8), "3.6951597e-06");
        assert_eq!(g(1000.0, 6), "1000");
        assert_eq!(g(1e9, 8), "1e+09");
        assert_eq!(g(0.0, 8), "0");
        assert_eq!(g(-0.0, 8), "-0");
        assert_eq!(g(f64::INFINITY, 6), "inf");
        assert_eq!(g(-f64::INFINITY, 6), "-inf");
    }

    /// Against the C library's own `%g`. The oracle is a C99 printf, which
    /// Windows' C library (msvcrt, behind mingw's `snprintf`) is not: it
    /// writes three exponent digits.
    #[cfg(unix)]
    mod against_c_printf {
        use super::g;
        use proptest::prelude::*;

        /// What the C library's `snprintf("%.*g")` writes: the oracle.
        fn c_printf(value: f64, precision: usize) -> String {
            let mut buf = [0u8; 64];
            let precision = libc::c_int::try_from(precision).expect("small precision");
            // SAFETY: the format string is NUL-terminated and takes exactly one
            // int and one double, which are passed; snprintf writes at most
            // buf.len() bytes, NUL included, so the buffer is never overrun.
            let written = unsafe {
                libc::snprintf(
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    c"%.*g".as_ptr(),
                    precision,
                    value,
                )
            };
            let len = usize::try_from(written).expect("snprintf succeeds");
            String::from_utf8(buf[..len].to_vec()).expect("ASCII")
        }

        #[test]
        fn rounding_up_can_change_the_notation() {
            // 999999.5 rounds to 1e+06 at 6 digits, so the exponent that decides
            // is the one after rounding.
            assert_eq!(g(999_999.5, 6), c_printf(999_999.5, 6));
            assert_eq!(g(0.000099999999, 6), c_printf(0.000099999999, 6));
        }

        proptest! {
            #[test]
            fn agrees_with_c_printf_on_any_double(bits: u64, precision in 0usize..18) {
                let value = f64::from_bits(bits);
                prop_assume!(!value.is_nan());
                prop_assert_eq!(g(value, precision), c_printf(value, precision));
            }

            #[test]
            fn agrees_with_c_printf_on_short_decimals(
                mantissa in -2_000_000i64..2_000_000,
                exponent in -12i32..12,
                precision in 1usize..10,
            ) {
                // Short decimals hit the ties and the notation boundaries.
                let value = mantissa as f64 * 10f64.powi(exponent);
                prop_assert_eq!(g(value, precision), c_printf(value, precision));
            }
        }
    }
}
