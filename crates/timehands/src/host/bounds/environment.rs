//! What the steps need from the environment: `TIMEHANDS_CHRONYD` names
//! chronyd's address, `TIMEHANDS_PTP4L` ptp4l's management socket. A step
//! may run in a signal handler, so each is read there as the counter's
//! choice reads `TIMEHANDS_COUNTER`: `getenv` into a buffer on the stack
//! (`os::env_var`), no allocation and no lock, parsed without either; and
//! nothing is read before `main`.

use std::net::SocketAddr;

use super::chrony;

/// chronyd's address: the environment's (none where it does not parse, see
/// [`chrony::address`]), or the default port's where it is unset (or
/// longer than any address: 64 bytes).
pub(super) fn chronyd_address() -> Option<SocketAddr> {
    let mut buf = [0; 64];
    let variable = crate::os::env_var(c"TIMEHANDS_CHRONYD", &mut buf);
    chrony::address(variable.map(|bytes| std::str::from_utf8(bytes).unwrap_or("")))
}

/// ptp4l's management socket (the environment's, or the default), as a C
/// string in `buf` (a path longer than a socket's, or with a NUL in it,
/// names none: the default then).
#[cfg(target_os = "linux")]
pub(super) fn ptp4l_path(buf: &mut [u8; 108]) -> &std::ffi::CStr {
    let mut path = [0; 107];
    let named = crate::os::env_var(c"TIMEHANDS_PTP4L", &mut path)
        .filter(|bytes| !bytes.contains(&0))
        .map(<[u8]>::len);
    match named {
        Some(len) => {
            buf[..len].copy_from_slice(&path[..len]);
            buf[len] = 0;
            std::ffi::CStr::from_bytes_until_nul(&buf[..=len]).unwrap_or(super::ptp::DEFAULT_PATH)
        }
        None => super::ptp::DEFAULT_PATH,
    }
}
