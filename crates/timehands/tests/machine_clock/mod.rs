//! What the tests that change the machine's clock share: the kernel's
//! clocks and NTP state, the lock they take, and a read of ours checked
//! against the kernel's within the bound `getres` states.

use timehands::{ClockId, getres, gettime};

/// The kernel's clock `id` in ns.
pub fn kernel(id: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    assert_eq!(unsafe { libc::clock_gettime(id, &mut ts) }, 0);
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// The kernel's NTP state, read (modes 0) or changed.
pub fn adjtimex(tx: &mut libc::timex) -> Result<i32, String> {
    // SAFETY: `tx` is a valid timex; its modes say what it changes.
    match unsafe { libc::adjtimex(tx) } {
        -1 => Err(std::io::Error::last_os_error().to_string()),
        state => Ok(state),
    }
}

/// The lock every test that changes the machine's clock takes (`flock(1)`
/// on this file in the scripts), so that no two change it at once: held
/// until dropped.
pub struct ClockLock {
    /// The lock's file: the lock is let go when it closes.
    _held: std::fs::File,
}

impl ClockLock {
    pub fn take() -> Result<ClockLock, String> {
        const PATH: &str = "/run/lock/timehands-clock.lock";
        let file = std::fs::File::create(PATH).map_err(|e| format!("{PATH}: {e}"))?;
        // SAFETY: flock on a descriptor this process owns; it waits for
        // another holder, and the lock goes with the descriptor's close.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) } != 0 {
            return Err(format!("{PATH}: {}", std::io::Error::last_os_error()));
        }
        Ok(ClockLock { _held: file })
    }
}

/// One read of our clock `id` between two of the kernel's `kernel_id`,
/// within the bound `getres` stated before or after it: the three, or
/// what was wrong.
pub fn within(id: ClockId, kernel_id: libc::clockid_t) -> Result<(i128, i128, i128), String> {
    let bound = getres(id).accuracy.as_nanos() as i128;
    let before = kernel(kernel_id);
    let ours = gettime(id).as_nanos() as i128;
    let after = kernel(kernel_id);
    let bound = bound.max(getres(id).accuracy.as_nanos() as i128);
    if ours + bound < before || ours > after + bound {
        // SAFETY: a zeroed timex reads the state (modes 0).
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        let state = adjtimex(&mut tx);
        return Err(format!(
            "{id:?} read {ours} between the kernel's {before} and {after}, bound {bound} \
             ({} ns into the UTC day; the kernel's state {state:?}, TAI − UTC {}; {:?})",
            kernel(libc::CLOCK_REALTIME) % (86_400 * 1_000_000_000),
            tx.tai,
            timehands::info().counter
        ));
    }
    Ok((ours, before, after))
}
