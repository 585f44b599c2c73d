//! POSIX real-time scheduling (`pthread_setschedparam(3)`), for the unix
//! families that have it.

use std::io;

use super::Policy;

/// The policy's id for `pthread_setschedparam(3)`.
fn policy_id(policy: Policy) -> libc::c_int {
    match policy {
        Policy::Fifo => libc::SCHED_FIFO,
        Policy::RoundRobin => libc::SCHED_RR,
    }
}

/// An error naming a `priority` outside `policy`'s range, if it is.
pub(crate) fn check_priority(policy: Policy, priority: i32) -> io::Result<()> {
    // SAFETY: plain queries without pointers.
    let (min, max) = unsafe {
        (
            libc::sched_get_priority_min(policy_id(policy)),
            libc::sched_get_priority_max(policy_id(policy)),
        )
    };
    if (min..=max).contains(&priority) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} priority {priority} is outside {min}..={max}",
                policy.name()
            ),
        ))
    }
}

/// Makes the calling thread `policy` at `priority`: the OS's refusal as it
/// gave it.
pub(crate) fn apply_scheduling(policy: Policy, priority: i32) -> io::Result<()> {
    // sched_param has private fields on some OSes: zeroed, then set.
    // SAFETY: all zeros is a valid sched_param (integers).
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority;
    // SAFETY: `param` is valid for the call, and pthread_self names the
    // calling thread, which is alive. The call returns an error number.
    match unsafe { libc::pthread_setschedparam(libc::pthread_self(), policy_id(policy), &param) } {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// The one-line error for a `refused` scheduling change: where the refusal
/// was a matter of privilege, with the `limits` in force and the `remedy`.
pub(crate) fn scheduling_refused(
    policy: Policy,
    priority: i32,
    refused: io::Error,
    limits: &str,
    remedy: &str,
) -> io::Error {
    let name = policy.name();
    if refused.raw_os_error() == Some(libc::EPERM) {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{name} priority {priority} is not allowed here ({refused}{limits}): {remedy}"),
        )
    } else {
        io::Error::new(
            refused.kind(),
            format!("{name} priority {priority}: {refused}"),
        )
    }
}

/// `policy` at `priority` for the calling thread, as POSIX gives it: the
/// unix families without a limit to raise.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn set_scheduling(policy: Policy, priority: i32) -> io::Result<()> {
    check_priority(policy, priority)?;
    apply_scheduling(policy, priority)
        .map_err(|refused| scheduling_refused(policy, priority, refused, "", "run as root"))
}
