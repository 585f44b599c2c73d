//! The kinds of thread that read a clock, as programs have them: what
//! `timehands callers` and the crate's tests run, one kind in a process, to
//! show that the clock is the same for each.
//!
//! They are the kinds that once got another clock, when the library
//! guessed from the signal mask whether a reader ran in a handler (a thread
//! that blocks every signal was taken for one, and never steered).

use std::time::Duration;

/// A kind of thread that reads the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// A thread that reads.
    Ordinary,
    /// A thread that blocks every signal first, as many libraries' helper
    /// threads do.
    Blocked,
    /// A daemon's: handlers for SIGHUP and SIGTERM, both blocked but around
    /// a `ppoll` between the reads, nginx's way.
    Daemon,
    /// A SCHED_FIFO thread at priority 80 on the first CPU.
    Fifo,
    /// No thread: a SIGPROF handler, every millisecond of the process's
    /// CPU time, in a process that reads nowhere else (a profiler's).
    Handler,
}

impl Reader {
    /// Every kind, the ordinary first.
    pub const ALL: [Reader; 5] = [
        Reader::Ordinary,
        Reader::Blocked,
        Reader::Daemon,
        Reader::Fifo,
        Reader::Handler,
    ];

    /// The kind's name: `ordinary`, `blocked`, `daemon`, `fifo`, `handler`.
    pub fn name(self) -> &'static str {
        match self {
            Reader::Ordinary => "ordinary",
            Reader::Blocked => "blocked",
            Reader::Daemon => "daemon",
            Reader::Fifo => "fifo",
            Reader::Handler => "handler",
        }
    }

    /// The kind of that name.
    ///
    /// # Errors
    /// A name that is none of [`name`](Reader::name)'s, said in one line.
    pub fn of(name: &str) -> Result<Reader, String> {
        Reader::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Reader::ALL.iter().map(|kind| kind.name()).collect();
                format!("no reader kind {name:?} (one of {})", names.join(", "))
            })
    }

    /// Reads as this kind for `long`: the thread kinds call `batch` again
    /// and again on a thread of their own, then `finish` there, whose answer
    /// this returns; the handler's kind installs `handler` for SIGPROF, has
    /// the process signalled every millisecond of its CPU time for `long`
    /// (spinning, reading nothing), then calls `finish` here. `Ok(None)`
    /// where the kind cannot be had (SCHED_FIFO refused).
    ///
    /// # Errors
    /// The reader's thread panicked.
    pub fn read<T: Send + 'static>(
        self,
        long: Duration,
        mut batch: impl FnMut() + Send + 'static,
        finish: impl FnOnce() -> T + Send + 'static,
        handler: extern "C" fn(libc::c_int),
    ) -> Result<Option<T>, String> {
        if self == Reader::Handler {
            let start = kernel_now();
            profile_until(Duration::from_millis(1), handler, || {
                kernel_now() - start >= long.as_nanos() as u64
            })?;
            return Ok(Some(finish()));
        }
        if self == Reader::Daemon {
            handle(libc::SIGHUP, ignore);
            handle(libc::SIGTERM, ignore);
        }
        std::thread::spawn(move || {
            match self {
                Reader::Blocked => block(None),
                Reader::Daemon => block(Some(&[libc::SIGHUP, libc::SIGTERM])),
                Reader::Fifo => {
                    let _ = crate::os::pin_to_cpus(&[0]);
                    crate::os::set_scheduling(crate::os::Policy::Fifo, 80).ok()?;
                }
                _ => {}
            }
            let start = kernel_now();
            while kernel_now() - start < long.as_nanos() as u64 {
                batch();
                if self == Reader::Daemon {
                    let_handlers_in();
                }
            }
            Some(finish())
        })
        .join()
        .map_err(|_| format!("the {} reader panicked", self.name()))
    }
}

/// CLOCK_MONOTONIC in ns, from the kernel: the readers' own timing, which
/// no read of ours decides.
fn kernel_now() -> u64 {
    crate::os::kernel_nanos(crate::os::KernelClock::Monotonic).unwrap_or(0)
}

/// Blocks `signals` on the calling thread (every signal, for `None`).
fn block(signals: Option<&[libc::c_int]>) {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset and
    // sigfillset, which fill it; pthread_sigmask changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        match signals {
            None => {
                libc::sigfillset(&mut set);
            }
            Some(signals) => {
                libc::sigemptyset(&mut set);
                for &signal in signals {
                    libc::sigaddset(&mut set, signal);
                }
            }
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// A `ppoll` of no descriptors and no wait, with no signal blocked: where
/// a daemon's blocked handlers may run.
fn let_handlers_in() {
    let none = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset; a ppoll
    // of no descriptors only waits, here not at all.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::ppoll(std::ptr::null_mut(), 0, &none, &empty);
    }
}

/// Installs `handler` for `signal`, with an empty mask.
fn handle(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: a zeroed sigaction with this handler and an empty mask is
    // valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

extern "C" fn ignore(_: libc::c_int) {}

/// A profiler's SIGPROF: installs `handler` for it and has the process
/// signalled every `every` of its CPU time, by a POSIX timer on
/// CLOCK_PROCESS_CPUTIME_ID (as ITIMER_PROF counts), while the calling
/// thread spins, reading nothing, until `done` says so; then deletes the
/// timer. The handler's reader kind, and the bounds' test of a process
/// whose only reads are in a handler.
///
/// # Errors
/// The OS refused the timer, said in one line.
pub(crate) fn profile_until(
    every: Duration,
    handler: extern "C" fn(libc::c_int),
    mut done: impl FnMut() -> bool,
) -> Result<(), String> {
    handle(libc::SIGPROF, handler);
    let refused = || {
        format!(
            "no POSIX timer for SIGPROF: {}",
            std::io::Error::last_os_error()
        )
    };
    // SAFETY: a zeroed sigevent asking for SIGPROF is valid; the timer is
    // written by timer_create before it is armed.
    let timer = unsafe {
        let mut event: libc::sigevent = std::mem::zeroed();
        event.sigev_notify = libc::SIGEV_SIGNAL;
        event.sigev_signo = libc::SIGPROF;
        let mut timer: libc::timer_t = std::mem::zeroed();
        if libc::timer_create(libc::CLOCK_PROCESS_CPUTIME_ID, &mut event, &mut timer) != 0 {
            return Err(refused());
        }
        timer
    };
    let every = libc::timespec {
        tv_sec: every.as_secs() as _,
        tv_nsec: libc::c_long::from(every.subsec_nanos()),
    };
    let spec = libc::itimerspec {
        it_interval: every,
        it_value: every,
    };
    // SAFETY: arms the timer made above.
    let armed = unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } == 0;
    let result = if armed { Ok(()) } else { Err(refused()) };
    while armed && !done() {
        std::hint::spin_loop();
    }
    // SAFETY: deletes the timer made above, which nothing uses after.
    unsafe { libc::timer_delete(timer) };
    result
}
