//! `Alarm`: a timerfd on CLOCK_MONOTONIC that an expiry thread sleeps on.
//!
//! The expiry thread blocks in `read` until the alarm's absolute deadline
//! (a `timehands::Instant`, whose origin is CLOCK_MONOTONIC's, so no
//! conversion). Any thread may move the deadline earlier with [`Alarm::set`]:
//! the kernel then wakes the sleeper at the new time, so arming an earlier
//! timer needs no separate wake-up channel, and setting a deadline that has
//! already passed wakes it at once.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::sleep::timespec;

pub(crate) struct Alarm {
    fd: OwnedFd,
}

impl Alarm {
    pub(crate) fn new() -> io::Result<Alarm> {
        // SAFETY: timerfd_create takes no pointers; a negative result is an
        // error, anything else a new descriptor that we then own.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(Alarm {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Rings at `deadline` (nanoseconds on CLOCK_MONOTONIC); `None` disarms.
    pub(crate) fn set(&self, deadline: Option<u64>) {
        // An all-zero it_value disarms, so a deadline of 0 is sent as 1 ns,
        // which has passed as well.
        let nanos = deadline.map_or(0, |d| d.max(1));
        let spec = libc::itimerspec {
            it_interval: timespec(0),
            it_value: timespec(nanos),
        };
        // SAFETY: `spec` is a valid itimerspec for the call's duration and
        // the old-value pointer may be null.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        // The descriptor is ours and the value in range: this cannot fail.
        debug_assert_eq!(rc, 0, "timerfd_settime: {}", io::Error::last_os_error());
    }

    /// Blocks until the alarm rings (or returns at once if it has rung since
    /// the last wait).
    pub(crate) fn wait(&self) {
        let mut expirations = 0u64;
        loop {
            // SAFETY: the buffer is 8 writable bytes, as timerfd requires.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&raw mut expirations).cast::<libc::c_void>(),
                    8,
                )
            };
            if n == 8 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }
}
