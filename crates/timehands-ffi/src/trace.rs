//! The clock's description for tracers, as the text of a CTF 1.8 `clock`
//! block, copied into the caller's buffer the way `snprintf` does: truncated
//! to fit, always NUL-terminated, and the full length returned so that the
//! caller can tell and retry.

use std::ptr;

use libc::{EFAULT, EIO, EOVERFLOW, c_char, c_int, size_t};

use crate::boundary::{contain, fail};

/// Writes the CTF 1.8 `clock { ... };` block that describes th_now_ns's
/// timestamps (1 GHz, CLOCK_MONOTONIC's origin, the measured offset to Unix
/// time and its precision) into `buf`, as snprintf(3) does: at most `size - 1`
/// characters and a NUL; `buf` may be NULL when `size` is 0.
///
/// Returns the length of the whole text (without the NUL): the text was cut
/// short if that is `size` or more. The offset and precision are measured at
/// each call, so the length can differ by a few characters from one call to
/// the next: give room to spare (512 bytes is plenty), or retry until the
/// return is below `size`. Returns -1 with errno EFAULT if `buf` is NULL and
/// `size` is not 0.
///
/// # Safety
/// `buf` is NULL or points to `size` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_clock_description_ctf(buf: *mut c_char, size: size_t) -> c_int {
    if buf.is_null() && size != 0 {
        return fail(EFAULT);
    }
    let Some(text) = contain(|| Some(timehands_rs::clock_description().to_ctf()), || None) else {
        return fail(EIO);
    };
    // snprintf's error for a text longer than its int return can say.
    let Ok(length) = c_int::try_from(text.len()) else {
        return fail(EOVERFLOW);
    };
    if size != 0 {
        let copied = text.len().min(size - 1);
        // SAFETY: `buf` is not NULL (size is not 0) and holds `size` bytes,
        // the caller promises; `copied + 1 <= size` bytes are written, from a
        // `String` that cannot overlap the caller's buffer.
        unsafe {
            ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, copied);
            buf.add(copied).write(0);
        }
    }
    length
}
