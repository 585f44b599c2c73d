//! Linux (glibc and musl) and Android: the clocks of `clock_gettime`, the
//! NTP state of `adjtimex`, the CPU affinity of `sched_setaffinity`,
//! RLIMIT_RTPRIO, and the timer slack of `prctl`.

use std::io;

pub(crate) use super::cpu_mask::current_cpu;
use super::cpu_mask::{pin_affinity, read_affinity};
use super::posix;
use super::sched::{apply_scheduling, check_priority, scheduling_refused};
use super::{NtpState, Policy};
pub(crate) use posix::{clock_name, kernel_nanos, kernel_resolution, on_fork};

/// The kernel's clocks (`clock_gettime(2)`).
pub(super) const CLOCKS: posix::Clocks = posix::Clocks {
    ids: [
        (libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC"),
        (libc::CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW"),
        (libc::CLOCK_BOOTTIME, "CLOCK_BOOTTIME"),
        (libc::CLOCK_REALTIME, "CLOCK_REALTIME"),
        (libc::CLOCK_MONOTONIC_COARSE, "CLOCK_MONOTONIC_COARSE"),
        (libc::CLOCK_REALTIME_COARSE, "CLOCK_REALTIME_COARSE"),
    ],
};

/// The kernel's NTP state: `adjtimex(2)` with modes 0, which reads only
/// and needs no privilege.
#[cfg(target_os = "linux")]
pub(crate) fn ntp() -> io::Result<NtpState> {
    ntp_errno().map_err(|e| io::Error::new(e.kind(), format!("adjtimex: {e}")))
}

/// [`ntp`] with a bare errno on failure: no allocation on either path, so
/// safe in a signal handler.
#[cfg(target_os = "linux")]
pub(crate) fn ntp_errno() -> io::Result<NtpState> {
    // SAFETY: a zeroed timex is a valid argument (modes 0: read only).
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid timex to write; modes 0 changes nothing.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(NtpState {
        rate_ppb: Some(kernel_rate_ppb(tx.tick as i64, tx.freq as i64)),
        ..NtpState::from_kernel(
            state,
            tx.status,
            tx.maxerror as i64,
            tx.esterror as i64,
            tx.tai,
        )
    })
}

/// TAI − UTC in whole seconds as the kernel's clocks read it:
/// CLOCK_TAI less CLOCK_REALTIME, read between two reads of the latter and
/// kept only where both give the same second (a leap second moves the two
/// at once in the clocks' shared data, which `adjtimex`'s `tai` says some
/// milliseconds sooner: taken with a Realtime not yet moved, it stepped
/// TAI by the leap). `None` where the clocks do not say.
pub(crate) fn tai_minus_utc() -> Option<i32> {
    let read = |id| super::posix::clock_nanos(id).ok().map(i128::from);
    let before = read(libc::CLOCK_REALTIME)?;
    let tai = read(libc::CLOCK_TAI)?;
    let after = read(libc::CLOCK_REALTIME)?;
    let seconds = |realtime: i128| ((tai - realtime) as f64 / 1e9).round() as i32;
    (seconds(before) == seconds(after)).then(|| seconds(before))
}

/// The kernel clock's rate against its nominal one, in ppb, from
/// `adjtimex`'s `tick` and `freq`.
#[cfg(target_os = "linux")]
fn kernel_rate_ppb(tick_us: i64, freq: i64) -> i64 {
    super::KernelRate {
        tick_us,
        frequency: freq,
    }
    .rate_ppb()
}

/// The kernel clock's tick and frequency: `adjtimex(2)` with modes 0.
#[cfg(target_os = "linux")]
pub(crate) fn kernel_rate() -> io::Result<super::KernelRate> {
    // SAFETY: a zeroed timex is a valid argument (modes 0: read only).
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid timex to write; modes 0 changes nothing.
    if unsafe { libc::adjtimex(&mut tx) } < 0 {
        return Err(super::last_error("adjtimex"));
    }
    Ok(super::KernelRate {
        tick_us: tx.tick as i64,
        frequency: tx.freq as i64,
    })
}

/// Sets the kernel clock's tick and frequency (`adjtimex(2)` with ADJ_TICK
/// and ADJ_FREQUENCY): root's (CAP_SYS_TIME).
#[cfg(target_os = "linux")]
pub(crate) fn set_kernel_rate(rate: super::KernelRate) -> io::Result<()> {
    // SAFETY: a zeroed timex is a valid argument; the modes say which
    // fields are read.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    tx.modes = libc::ADJ_TICK | libc::ADJ_FREQUENCY;
    tx.tick = rate.tick_us as _;
    tx.freq = rate.frequency as _;
    // SAFETY: `tx` is a valid timex; the kernel checks the values.
    if unsafe { libc::adjtimex(&mut tx) } < 0 {
        let e = io::Error::last_os_error();
        let why = if e.kind() == io::ErrorKind::PermissionDenied {
            "it needs root (CAP_SYS_TIME)"
        } else {
            "the tick is 9000 to 11000 µs, the frequency within ±500 ppm"
        };
        return Err(io::Error::new(
            e.kind(),
            format!(
                "adjtimex to a tick of {} µs and a frequency of {} ppm: {e}; {why}",
                rate.tick_us,
                rate.frequency as f64 / 65_536.0
            ),
        ));
    }
    Ok(())
}

/// Android's libc crate binds no `struct timex` (see [`ntp`]).
#[cfg(target_os = "android")]
pub(crate) fn kernel_rate() -> io::Result<super::KernelRate> {
    Err(super::unsupported(
        "the kernel clock's tick and frequency (adjtimex)",
    ))
}

/// See [`kernel_rate`].
#[cfg(target_os = "android")]
pub(crate) fn set_kernel_rate(_rate: super::KernelRate) -> io::Result<()> {
    Err(super::unsupported(
        "setting the kernel clock's tick and frequency (adjtimex)",
    ))
}

/// Android's kernel keeps the NTP state, and bionic has `adjtimex` from
/// API 24, but the libc crate binds no `struct timex` for Android: not
/// read here.
#[cfg(target_os = "android")]
pub(crate) fn ntp() -> io::Result<NtpState> {
    Err(super::unsupported(
        "reading the kernel's NTP state (adjtimex)",
    ))
}

/// The CPUs the calling thread may run on, in increasing order.
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    affinity_of(0)
}

/// The CPUs the process may run on (its first thread's affinity).
pub(crate) fn process_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: getpid takes nothing and cannot fail.
    affinity_of(unsafe { libc::getpid() })
}

/// The affinity of thread `tid` (0: the calling one), read into a mask as
/// large as the kernel's (glibc's `cpu_set_t` holds 1024 CPUs; the kernel's
/// may hold more, and refuses a smaller one with EINVAL).
fn affinity_of(tid: libc::pid_t) -> io::Result<Vec<usize>> {
    read_affinity("sched_getaffinity", &[libc::EINVAL], |mask| {
        // SAFETY: the kernel writes at most the size of `mask`, which is
        // ours to write. The pointer is only cast for the signature:
        // nothing reads it as a `cpu_set_t`.
        unsafe {
            libc::sched_getaffinity(
                tid,
                std::mem::size_of_val(mask),
                mask.as_mut_ptr().cast::<libc::cpu_set_t>(),
            )
        }
    })
}

/// Keeps the calling thread (and the threads it starts) on `cpus`.
pub(crate) fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
    pin_affinity(cpus, |mask| {
        // SAFETY: pid 0 is the calling thread; the kernel reads the size of
        // `mask`. The pointer is only cast for the signature.
        unsafe {
            libc::sched_setaffinity(
                0,
                std::mem::size_of_val(mask),
                mask.as_ptr().cast::<libc::cpu_set_t>(),
            )
        }
    })
}

/// `policy` at `priority` for the calling thread. As cyclictest does, a
/// refusal (EPERM) with a soft RLIMIT_RTPRIO below `priority` and a hard one
/// at or above it raises the soft limit and tries again.
pub(crate) fn set_scheduling(policy: Policy, priority: i32) -> io::Result<()> {
    check_priority(policy, priority)?;
    let refused = match apply_scheduling(policy, priority) {
        Ok(()) => return Ok(()),
        Err(refused) => refused,
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
        if unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &raised) } == 0
            && apply_scheduling(policy, priority).is_ok()
        {
            return Ok(());
        }
    }
    let one = |v: libc::rlim_t| match v {
        libc::RLIM_INFINITY => "unlimited".to_string(),
        v => v.to_string(),
    };
    let limits = format!(
        "; RLIMIT_RTPRIO soft {}, hard {}",
        one(limit.rlim_cur),
        one(limit.rlim_max)
    );
    Err(scheduling_refused(
        policy,
        priority,
        refused,
        &limits,
        "run as root or with CAP_SYS_NICE, or raise `ulimit -r`",
    ))
}

/// Sets the calling thread's timer slack to 1 ns, so that the kernel does
/// not defer its wake-ups by the default 50 µs to batch them.
pub(crate) fn set_minimal_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and no pointers; it cannot
    // fail for a positive value.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Refuses this process new threads (`clone3` says it does not exist,
/// `clone` is not permitted) and `adjtimex`, as a container's seccomp
/// profile may: a filter of the system calls, for good.
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
pub(crate) fn refuse_threads_and_ntp() -> io::Result<()> {
    use libc::{sock_filter, sock_fprog};
    const ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
    const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const IF: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | e as u32;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let filter = [
        op(LOAD, 0, 0, 4), // seccomp_data.arch
        op(IF, 0, 8, ARCH),
        op(LOAD, 0, 0, 0), // seccomp_data.nr
        op(IF, 4, 0, libc::SYS_clone3 as u32),
        op(IF, 4, 0, libc::SYS_clone as u32),
        op(IF, 3, 0, libc::SYS_adjtimex as u32),
        op(IF, 2, 0, libc::SYS_clock_adjtime as u32),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
        op(RETURN, 0, 0, errno(libc::ENOSYS)),
        op(RETURN, 0, 0, errno(libc::EPERM)),
        op(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let program = sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut sock_filter,
    };
    // SAFETY: no_new_privs and a filter that only makes four calls fail;
    // `program` outlives the call, which copies it.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const sock_fprog,
            ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::kernel_rate_ppb;
    use crate::os::KernelRate;

    /// The tick's share and the frequency's add, as Linux adds them to a
    /// second's length: chrony's slew (tick 10 833 µs), ntpd's 500 ppm,
    /// both, and the nominal rate; and a rate in ppb is made of both.
    #[test]
    fn the_kernel_rate_is_the_tick_times_the_frequency() {
        assert_eq!(kernel_rate_ppb(10_000, 0), 0);
        assert_eq!(kernel_rate_ppb(10_833, 0), 83_300_000);
        assert_eq!(kernel_rate_ppb(9_000, 0), -100_000_000);
        assert_eq!(kernel_rate_ppb(10_000, 500 * 65_536), 500_000);
        assert_eq!(kernel_rate_ppb(10_000, -500 * 65_536), -500_000);
        assert_eq!(kernel_rate_ppb(11_000, 500 * 65_536), 100_500_000);
        for ppb in [0, 83_333_333, -100_000_000, 500_000, -499_999, 1_234_567] {
            let rate = KernelRate::of_ppb(ppb);
            assert!((rate.rate_ppb() - ppb).abs() <= 1, "{ppb}: {rate:?}");
            assert!(rate.frequency.abs() <= 100 * 65_536, "{ppb}: {rate:?}");
        }
        assert_eq!(KernelRate::NOMINAL.rate_ppb(), 0);
    }
}
