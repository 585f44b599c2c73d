//! The Linux and Android alarm: a timerfd on CLOCK_MONOTONIC (see `alarm`).

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::sleep::timespec;

pub(crate) struct Alarm {
    /// A timerfd this alarm owns; replaced only after a fork, before any
    /// thread of the child uses it.
    fd: AtomicI32,
}

/// A new timerfd on CLOCK_MONOTONIC.
fn timerfd() -> io::Result<i32> {
    // SAFETY: timerfd_create takes no pointers; a negative result is an
    // error, anything else a new descriptor that the caller then owns.
    let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

impl Alarm {
    pub(crate) fn new() -> io::Result<Alarm> {
        Ok(Alarm {
            fd: AtomicI32::new(timerfd()?),
        })
    }

    /// In a forked child: a timerfd of the child's own, the one shared with
    /// the parent closed here (which leaves the parent's open). On an error
    /// the alarm is left with no descriptor: setting it does nothing and
    /// waiting on it returns at once, so no thread may be left to wait.
    ///
    /// # Safety
    ///
    /// No other thread may use the alarm during the call.
    pub(crate) unsafe fn reset_after_fork(&self) -> io::Result<()> {
        let fresh = timerfd();
        let inherited = self
            .fd
            .swap(*fresh.as_ref().unwrap_or(&-1), Ordering::Relaxed);
        // SAFETY: the descriptor was this alarm's, and nothing uses it now.
        unsafe { libc::close(inherited) };
        fresh.map(drop)
    }

    fn raw(&self) -> i32 {
        self.fd.load(Ordering::Relaxed)
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
                self.raw(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        // The descriptor is ours and the value in range: this cannot fail,
        // unless a fork left the alarm with no descriptor.
        debug_assert!(
            rc == 0 || self.raw() < 0,
            "timerfd_settime: {}",
            io::Error::last_os_error()
        );
    }

    /// Blocks until the alarm rings (or returns at once if it has rung since
    /// the last wait).
    pub(crate) fn wait(&self) {
        let mut expirations = 0u64;
        loop {
            // SAFETY: the buffer is 8 writable bytes, as timerfd requires.
            let n =
                unsafe { libc::read(self.raw(), (&raw mut expirations).cast::<libc::c_void>(), 8) };
            if n == 8 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this alarm's, and it is going.
        unsafe { libc::close(self.raw()) };
    }
}
