//! The operating system's plumbing that the library and its tools share:
//! reading a kernel clock, the CPUs a thread may run on, real-time
//! scheduling and timer slack. One implementation each, so that the library,
//! the timer service, the command, the benchmarks and the C library handle
//! overflow, large machines and refusals the same way.
//!
//! Errors are [`io::Error`]s whose message is one line that names the input
//! (the CPU, the priority) and, where there is one, the remedy.

use std::io;

/// Nanoseconds in a second.
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The largest CPU number a mask is built for: 2^16 CPUs, more than any
/// Linux machine has (the kernel's NR_CPUS is at most 8192).
const MAX_CPUS: usize = 1 << 16;

/// The kernel clock `id` as a `timespec` (`clock_gettime(2)`).
///
/// # Errors
/// The kernel's: EINVAL for an id it does not have.
#[inline]
pub fn clock_timespec(id: libc::clockid_t) -> io::Result<libc::timespec> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the kernel (or the vDSO) to write.
    if unsafe { libc::clock_gettime(id, &mut ts) } == 0 {
        Ok(ts)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `ts` in nanoseconds: 0 before the clock's origin, `u64::MAX` 584 years
/// after it.
#[inline]
pub fn timespec_nanos(ts: &libc::timespec) -> u64 {
    match u64::try_from(ts.tv_sec) {
        Ok(sec) => sec
            .saturating_mul(NANOS_PER_SEC)
            .saturating_add(ts.tv_nsec as u64),
        Err(_) => 0,
    }
}

/// The kernel clock `id` in nanoseconds since its origin (see
/// [`timespec_nanos`]).
///
/// ```
/// let before = timehands::sys::clock_nanos(libc::CLOCK_MONOTONIC)?;
/// let after = timehands::sys::clock_nanos(libc::CLOCK_MONOTONIC)?;
/// assert!(after >= before);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// The kernel's: EINVAL for an id it does not have.
#[inline]
pub fn clock_nanos(id: libc::clockid_t) -> io::Result<u64> {
    clock_timespec(id).map(|ts| timespec_nanos(&ts))
}

/// The CPUs the calling thread may run on, in increasing order.
///
/// # Errors
/// What `sched_getaffinity(2)` says.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    affinity_of(0)
}

/// The CPUs the process may run on (its first thread's affinity), in
/// increasing order: what a thread started from a pinned one can widen its
/// own to.
///
/// # Errors
/// What `sched_getaffinity(2)` says.
pub fn process_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: getpid takes nothing and cannot fail.
    affinity_of(unsafe { libc::getpid() })
}

/// The affinity of thread `tid` (0: the calling one), read into a mask as
/// large as the kernel's: glibc's `cpu_set_t` (1024 CPUs) to start with,
/// doubled while the kernel refuses a mask smaller than its own.
fn affinity_of(tid: libc::pid_t) -> io::Result<Vec<usize>> {
    let mut words = 16;
    loop {
        let mut mask = vec![0u64; words];
        // SAFETY: the kernel writes at most `words * 8` bytes, the size of
        // `mask`, which is ours to write. The pointer is only cast for the
        // signature: nothing reads it as a `cpu_set_t`.
        let status = unsafe {
            libc::sched_getaffinity(tid, words * 8, mask.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if status == 0 {
            return Ok(cpus_in(&mask));
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) || words * 64 >= MAX_CPUS {
            return Err(error);
        }
        words *= 2;
    }
}

/// The CPU numbers set in `mask`, in increasing order.
fn cpus_in(mask: &[u64]) -> Vec<usize> {
    mask.iter()
        .enumerate()
        .flat_map(|(i, &word)| {
            (0..64)
                .filter(move |bit| word & (1 << bit) != 0)
                .map(move |bit| i * 64 + bit)
        })
        .collect()
}

/// Keeps the calling thread (and the threads it starts) on `cpus`.
///
/// # Errors
/// An empty list, or a CPU numbered beyond any machine's, named in the
/// message; what `sched_setaffinity(2)` says otherwise (EINVAL when none of
/// `cpus` is online or allowed).
pub fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
    let Some(&highest) = cpus.iter().max() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no CPU to run on: give at least one",
        ));
    };
    if highest >= MAX_CPUS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {highest} does not exist: CPUs are numbered below {MAX_CPUS}"),
        ));
    }
    // A mask just large enough for the highest CPU: the kernel ignores CPUs
    // that do not exist, and refuses a mask with none it can use.
    let mut mask = vec![0u64; highest / 64 + 1];
    for &cpu in cpus {
        mask[cpu / 64] |= 1 << (cpu % 64);
    }
    // SAFETY: pid 0 is the calling thread; the kernel reads `mask.len() * 8`
    // bytes, the size of `mask`. The pointer is only cast for the signature.
    let status = unsafe {
        libc::sched_setaffinity(0, mask.len() * 8, mask.as_ptr().cast::<libc::cpu_set_t>())
    };
    if status == 0 {
        Ok(())
    } else {
        let error = io::Error::last_os_error();
        Err(io::Error::new(
            error.kind(),
            format!("cannot run on CPUs {cpus:?}: {error}"),
        ))
    }
}

/// Pins the calling thread to `cpu`; see [`pin_to_cpus`].
///
/// # Errors
/// As [`pin_to_cpus`].
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    pin_to_cpus(&[cpu])
}

/// A real-time scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Realtime {
    /// SCHED_FIFO: runs until it blocks or a higher priority comes.
    Fifo,
    /// SCHED_RR: SCHED_FIFO with a time slice among equal priorities.
    RoundRobin,
}

impl Realtime {
    /// The policy's name, as `chrt` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Realtime::Fifo => "SCHED_FIFO",
            Realtime::RoundRobin => "SCHED_RR",
        }
    }

    fn id(self) -> libc::c_int {
        match self {
            Realtime::Fifo => libc::SCHED_FIFO,
            Realtime::RoundRobin => libc::SCHED_RR,
        }
    }
}

/// Makes the calling thread `policy` at `priority`. As cyclictest does, a
/// refusal (EPERM) with a soft RLIMIT_RTPRIO below `priority` and a hard one
/// at or above it raises the soft limit and tries again.
///
/// # Errors
/// A priority outside the policy's range, or a refusal: the message names
/// the priority, the limits and the remedy (root or CAP_SYS_NICE, or
/// `ulimit -r`).
pub fn set_realtime(policy: Realtime, priority: i32) -> io::Result<()> {
    // SAFETY: plain queries without pointers.
    let (min, max) = unsafe {
        (
            libc::sched_get_priority_min(policy.id()),
            libc::sched_get_priority_max(policy.id()),
        )
    };
    let name = policy.name();
    if !(min..=max).contains(&priority) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} priority {priority} is outside {min}..={max}"),
        ));
    }
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is valid for the call, and pthread_self names the
    // calling thread, which is alive. The call returns an error number.
    let set = || unsafe { libc::pthread_setschedparam(libc::pthread_self(), policy.id(), &param) };
    let refused = match set() {
        0 => return Ok(()),
        code => io::Error::from_raw_os_error(code),
    };
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) };
    let wanted = priority as libc::rlim_t;
    if refused.raw_os_error() == Some(libc::EPERM)
        && limit.rlim_cur < wanted
        && wanted <= limit.rlim_max
    {
        let raised = libc::rlimit {
            rlim_cur: wanted,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit, within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &raised) } == 0 && set() == 0 {
            return Ok(());
        }
    }
    if refused.raw_os_error() != Some(libc::EPERM) {
        return Err(io::Error::new(
            refused.kind(),
            format!("{name} priority {priority}: {refused}"),
        ));
    }
    let one = |v: libc::rlim_t| match v {
        libc::RLIM_INFINITY => "unlimited".to_string(),
        v => v.to_string(),
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{name} priority {priority} is not allowed here ({refused}; RLIMIT_RTPRIO soft {}, hard {}): run as root or with CAP_SYS_NICE, or raise `ulimit -r`",
            one(limit.rlim_cur),
            one(limit.rlim_max)
        ),
    ))
}

/// Sets the calling thread's timer slack to 1 ns, so that the kernel does
/// not defer its wake-ups by the default 50 µs to batch them.
pub fn set_minimal_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and no pointers; it cannot
    // fail for a positive value.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "calls clock_gettime")]
    fn a_clock_reads_between_two_reads_of_it() {
        let before = clock_nanos(libc::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
        let ts = clock_timespec(libc::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
        let after = clock_nanos(libc::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
        assert!((before..=after).contains(&timespec_nanos(&ts)));
        let refused = clock_nanos(-1).expect_err("no clock has id -1");
        assert_eq!(refused.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn timespecs_beyond_a_u64_saturate() {
        let ts = |tv_sec, tv_nsec| libc::timespec { tv_sec, tv_nsec };
        assert_eq!(timespec_nanos(&ts(5, 7)), 5_000_000_007);
        assert_eq!(timespec_nanos(&ts(-1, 0)), 0);
        assert_eq!(timespec_nanos(&ts(libc::time_t::MAX, 0)), u64::MAX);
    }

    #[test]
    fn masks_name_their_cpus() {
        assert_eq!(cpus_in(&[0b101, 0, 1 << 63]), [0, 2, 191]);
        assert_eq!(cpus_in(&[]), Vec::<usize>::new());
    }

    /// Pinning to an allowed CPU runs there; a CPU no machine has is named
    /// in the error; the thread's affinity is put back.
    #[test]
    #[cfg_attr(miri, ignore = "calls sched_setaffinity")]
    fn pinning_runs_on_the_cpu_or_says_which_cpu_failed() {
        std::thread::spawn(|| {
            let allowed = allowed_cpus().expect("this thread's affinity");
            assert!(!allowed.is_empty());
            let last = *allowed.last().expect("a CPU");
            pin_to_cpu(last).expect("an allowed CPU");
            // SAFETY: sched_getcpu takes nothing.
            assert_eq!(unsafe { libc::sched_getcpu() }, last as i32);
            let error = pin_to_cpu(100_000).expect_err("no machine has CPU 100000");
            assert!(error.to_string().contains("CPU 100000"), "{error}");
            let error = pin_to_cpus(&[]).expect_err("an empty set");
            assert!(error.to_string().contains("no CPU"), "{error}");
            pin_to_cpus(&allowed).expect("the thread's own CPUs");
            assert_eq!(allowed_cpus().expect("the affinity"), allowed);
            assert!(
                process_cpus()
                    .expect("the process's affinity")
                    .contains(&last)
            );
        })
        .join()
        .expect("the pinned thread's checks held");
    }

    #[test]
    #[cfg_attr(miri, ignore = "calls sched_get_priority_max")]
    fn a_priority_out_of_range_is_named() {
        let error = set_realtime(Realtime::Fifo, 1_000).expect_err("no SCHED_FIFO priority 1000");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(
            error.to_string().contains("SCHED_FIFO priority 1000"),
            "{error}"
        );
    }
}
