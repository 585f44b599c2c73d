//! What the steps need from the environment, read once before `main`
//! (the loader's initializer that registers the fork handlers calls
//! [`read_environment`]): a step, which may be a signal handler, cannot
//! read the environment. `TIMEHANDS_CHRONYD` names chronyd's address,
//! `TIMEHANDS_PTP4L` ptp4l's management socket.

use std::net::SocketAddr;
use std::sync::OnceLock;

use super::chrony;
#[cfg(target_os = "linux")]
use super::ptp;

/// chronyd's address as the environment gave it before `main` (see
/// [`chrony::address`], [`read_environment`]); unset where no initializer
/// ran (AIX, Cygwin: the default is asked there).
static CHRONYD: OnceLock<Option<SocketAddr>> = OnceLock::new();

/// Reads `TIMEHANDS_CHRONYD` and `TIMEHANDS_PTP4L`: before `main` (before
/// anything runs in a program, or when a library is `dlopen`ed).
#[cfg(unix)]
pub(crate) fn read_environment() {
    let variable = std::env::var_os("TIMEHANDS_CHRONYD");
    let _ = CHRONYD.set(chrony::address(variable.as_deref()));
    #[cfg(target_os = "linux")]
    if let Some(path) = std::env::var_os("TIMEHANDS_PTP4L") {
        use std::os::unix::ffi::OsStrExt;
        // A path with a NUL in it names no socket: the default is asked.
        if let Ok(path) = std::ffi::CString::new(path.as_bytes()) {
            let _ = PTP4L.set(path);
        }
    }
}

/// ptp4l's management socket as `TIMEHANDS_PTP4L` named it before `main`.
#[cfg(target_os = "linux")]
static PTP4L: OnceLock<std::ffi::CString> = OnceLock::new();

/// ptp4l's management socket: the environment's, or the default.
#[cfg(target_os = "linux")]
pub(super) fn ptp4l_path() -> &'static std::ffi::CStr {
    PTP4L
        .get()
        .map_or(ptp::DEFAULT_PATH, |path| path.as_c_str())
}

/// chronyd's address: the environment's, or the default port's.
pub(super) fn chronyd_address() -> Option<SocketAddr> {
    CHRONYD
        .get()
        .copied()
        .unwrap_or_else(|| chrony::address(None))
}
