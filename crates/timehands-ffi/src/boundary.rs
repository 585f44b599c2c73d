//! The edge between C and Rust: failures reported the C way (-1 and `errno`),
//! and panics stopped before they reach a C frame.
//!
//! Unwinding into C is undefined behaviour, and aborting the host program
//! because the clock library hit a bug is not much better; so every call into
//! the Rust library goes through [`contain`], which turns a panic into the
//! caller's fallback. The panic's message is still printed (by the panic hook)
//! so that the bug is seen.

use std::panic::{AssertUnwindSafe, catch_unwind};

use libc::c_int;

/// Fails a call as the C library does: sets `errno` to `code`, returns -1.
pub(crate) fn fail(code: c_int) -> c_int {
    // SAFETY: `errno()` is the calling thread's `errno`, a valid, aligned
    // `int` for as long as the thread lives.
    unsafe { *errno() = code };
    -1
}

/// The calling thread's `errno`, by the name each C library gives it.
fn errno() -> *mut c_int {
    #[cfg(any(target_os = "android", target_os = "netbsd", target_os = "openbsd"))]
    use libc::__errno as location;
    #[cfg(target_os = "linux")]
    use libc::__errno_location as location;
    #[cfg(any(target_vendor = "apple", target_os = "freebsd"))]
    use libc::__error as location;
    // SAFETY: each takes nothing and returns the calling thread's errno.
    unsafe { location() }
}

/// `body()`, or `recover()` if `body` panics.
///
/// Asserting unwind safety is sound here: the only state a panicking `body`
/// can leave behind is the Rust clock's, which is built for it (its
/// `OnceLock` retries a start that panicked, its mutexes ignore poisoning).
#[inline]
pub(crate) fn contain<T>(body: impl FnOnce() -> T, recover: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| recover())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_fallback() {
        assert_eq!(contain(|| panic!("a bug in the clock"), || 7), 7);
        assert_eq!(contain(|| 3, || 7), 3);
    }

    #[test]
    fn fail_sets_errno_and_returns_minus_one() {
        assert_eq!(fail(libc::EFAULT), -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EFAULT)
        );
    }
}
