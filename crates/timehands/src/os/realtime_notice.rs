//! Linux's notice of a step of CLOCK_REALTIME, for the upkeep thread's
//! timed sleeps (Android's kernel is Linux's).
//!
//! A timerfd on CLOCK_REALTIME armed at the end of time with
//! `TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET` never expires; the kernel
//! cancels it when it sets the clock (`settimeofday`, `clock_settime`, a
//! leap second, a resume), and it becomes readable, its read failing with
//! ECANCELED. The thread sleeps in `ppoll` on it and on an eventfd that a
//! reader writes to wake it early (the nudge a timed park has from
//! `unpark`): one wakeup per sleep, as a timed park, and one more per step
//! of the clock. A parked thread waits on neither (see `wake.rs`): a step
//! while nothing reads wakes nobody.
//!
//! Both descriptors close on `exec`; a `fork()`ed child shares them with
//! its parent (one timer for both), so a child drops the parent's notice
//! and its own thread makes its own.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// The timerfd that a step of CLOCK_REALTIME cancels, and the eventfd that
/// wakes its waiter.
#[derive(Debug)]
pub(crate) struct RealtimeNotice {
    timer: OwnedFd,
    nudge: OwnedFd,
}

/// A descriptor the call returned, or its error.
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just returned, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads the 8-byte count of `fd` (a timerfd's expirations, an eventfd's
/// nudges), which resets it: the error ECANCELED on a timerfd the clock's
/// step cancelled, EAGAIN when there is none.
fn read_count(fd: &OwnedFd) -> io::Result<u64> {
    let mut count = 0u64;
    // SAFETY: writes at most 8 bytes into `count`, which has them.
    let read = unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
    if read == 8 {
        Ok(count)
    } else {
        Err(io::Error::last_os_error())
    }
}

impl RealtimeNotice {
    /// The notice, armed; or the OS's error (out of descriptors, a sandbox).
    pub(crate) fn new() -> io::Result<RealtimeNotice> {
        // SAFETY: creates a descriptor; no memory is passed.
        let timer = owned(unsafe {
            libc::timerfd_create(libc::CLOCK_REALTIME, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK)
        })?;
        // SAFETY: as above.
        let nudge = owned(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        let notice = RealtimeNotice { timer, nudge };
        notice.arm()?;
        Ok(notice)
    }

    /// Arms the timer at the end of time, to be cancelled by a step (as
    /// systemd watches the clock).
    #[allow(deprecated)] // musl's `time_t`: the libc crate will make it 64 bits.
    fn arm(&self) -> io::Result<()> {
        let end = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::MAX,
                tv_nsec: 0,
            },
        };
        let flags = libc::TFD_TIMER_ABSTIME | libc::TFD_TIMER_CANCEL_ON_SET;
        // SAFETY: `end` is a valid itimerspec; no old value is asked for.
        let armed = unsafe {
            libc::timerfd_settime(self.timer.as_raw_fd(), flags, &end, std::ptr::null_mut())
        };
        if armed == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Sleeps `timeout`, or until a nudge or a step of CLOCK_REALTIME; true
    /// after a step. The timer is armed again before this returns, so that
    /// a step after it is noticed at the next wait, and one before it is in
    /// what the caller reads next.
    #[allow(deprecated)] // musl's `time_t`, as in `arm`.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let mut fds = [&self.timer, &self.nudge].map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        let timeout = libc::timespec {
            tv_sec: timeout.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` holds two pollfds, `timeout` is valid, no signal
        // mask is given. An interruption (EINTR) is an early return.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &timeout, std::ptr::null()) };
        if fds[1].revents != 0 {
            let _ = read_count(&self.nudge);
        }
        if fds[0].revents == 0 {
            return false;
        }
        let stepped =
            read_count(&self.timer).is_err_and(|e| e.raw_os_error() == Some(libc::ECANCELED));
        if stepped {
            // Linux keeps it armed, but the man page says that a step
            // cancels it: armed again. A failure only silences the notice
            // (the read reset it): windups still follow steps.
            let _ = self.arm();
        }
        stepped
    }

    /// Wakes the waiter early, or makes its next wait return at once.
    pub(crate) fn nudge(&self) {
        let one = 1u64;
        // SAFETY: reads 8 bytes from `one`, which has them.
        unsafe { libc::write(self.nudge.as_raw_fd(), (&raw const one).cast(), 8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait with nothing to notice returns no step; a nudge made before
    /// a wait ends it at once (the 60 s are never waited), and says no step.
    #[test]
    #[cfg_attr(miri, ignore = "calls timerfd_create")]
    fn a_nudge_ends_a_wait_that_notices_no_step() {
        let notice = RealtimeNotice::new().expect("a timerfd and an eventfd");
        assert!(!notice.wait(Duration::from_millis(1)));
        notice.nudge();
        assert!(!notice.wait(Duration::from_secs(60)));
    }
}
