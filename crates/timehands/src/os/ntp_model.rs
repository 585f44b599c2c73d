//! The kernel NTP model (RFC 1589, Mills' "kernel model for precision
//! timekeeping"): its clock states, numbered alike on every OS that has it
//! (the status bits are the engine's own [`NtpStatus`]), and the state they
//! give.

use super::{LeapSecond, NtpState};
use crate::NtpStatus;

/// The clock state: a leap second will be inserted.
const TIME_INS: i32 = 1;
/// The clock state: a leap second will be deleted.
const TIME_DEL: i32 = 2;
/// The clock state: a leap second is being inserted.
const TIME_OOP: i32 = 3;
/// The clock state: not synchronized.
const TIME_ERROR: i32 = 5;

impl NtpState {
    /// The state from the kernel's clock `state` and its `status` bits
    /// (`adjtimex`), or 0 where only the state is given (`ntp_gettime`).
    pub(crate) fn from_kernel(
        state: i32,
        status: i32,
        maxerror: i64,
        esterror: i64,
        tai: i32,
    ) -> Self {
        let status = NtpStatus(status as u32);
        let leap = match state {
            TIME_OOP => LeapSecond::InProgress,
            _ if state == TIME_INS || status.contains(NtpStatus::INS) => LeapSecond::Insert,
            _ if state == TIME_DEL || status.contains(NtpStatus::DEL) => LeapSecond::Delete,
            _ => LeapSecond::None,
        };
        NtpState {
            synchronized: !status.contains(NtpStatus::UNSYNC) && state != TIME_ERROR,
            maxerror_us: maxerror.max(0) as u64,
            esterror_us: esterror.max(0) as u64,
            tai_offset_s: tai,
            leap,
            rate_ppb: None,
        }
    }
}

/// The kernel's NTP state from `ntp_gettime(2)`, which reads only: Apple's
/// OSes, FreeBSD, NetBSD, DragonFly (the same `struct ntptimeval` on each).
#[cfg(not(any(target_os = "linux", target_os = "illumos", target_os = "solaris")))]
pub(crate) fn ntp_gettime() -> std::io::Result<NtpState> {
    // SAFETY: all zeros is a valid ntptimeval (integers) for the OS to fill.
    let mut tv: libc::ntptimeval = unsafe { std::mem::zeroed() };
    // SAFETY: `tv` is a valid ntptimeval to write.
    let state = unsafe { libc::ntp_gettime(&mut tv) };
    if state < 0 {
        return Err(super::last_error("ntp_gettime"));
    }
    // `long`s: 64 bits on the 64-bit targets, 32 on the others.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Ok(NtpState::from_kernel(
        state,
        0,
        i64::from(tv.maxerror),
        i64::from(tv.esterror),
        tv.tai as i32,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STA_INS: i32 = NtpStatus::INS.0 as i32;
    const STA_DEL: i32 = NtpStatus::DEL.0 as i32;
    const STA_UNSYNC: i32 = NtpStatus::UNSYNC.0 as i32;

    #[test]
    fn ntp_states() {
        const TIME_OK: i32 = 0;
        let ok = NtpState::from_kernel(TIME_OK, 0, 5_000, 100, 37);
        assert!(ok.synchronized);
        assert_eq!(
            (ok.maxerror_us, ok.esterror_us, ok.tai_offset_s),
            (5_000, 100, 37)
        );
        assert_eq!(ok.leap, LeapSecond::None);
        assert!(!NtpState::from_kernel(TIME_OK, STA_UNSYNC, 0, 0, 0).synchronized);
        assert!(!NtpState::from_kernel(TIME_ERROR, 0, 0, 0, 0).synchronized);
        // adjtimex gives the status bits; ntp_gettime only the state.
        for (state, status) in [(TIME_INS, STA_INS), (TIME_INS, 0), (TIME_OK, STA_INS)] {
            assert_eq!(
                NtpState::from_kernel(state, status, 0, 0, 0).leap,
                LeapSecond::Insert
            );
        }
        for (state, status) in [(TIME_DEL, STA_DEL), (TIME_DEL, 0)] {
            assert_eq!(
                NtpState::from_kernel(state, status, 0, 0, 0).leap,
                LeapSecond::Delete
            );
        }
        assert_eq!(
            NtpState::from_kernel(TIME_OOP, STA_INS, 0, 0, 0).leap,
            LeapSecond::InProgress
        );
    }

    /// The model's numbers are the OS's own, where the libc crate has them.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn the_numbers_are_the_kernels() {
        assert_eq!(
            (TIME_INS, TIME_DEL, TIME_OOP, TIME_ERROR),
            (
                libc::TIME_INS,
                libc::TIME_DEL,
                libc::TIME_OOP,
                libc::TIME_ERROR
            )
        );
        assert_eq!(
            (STA_INS, STA_DEL, STA_UNSYNC),
            (libc::STA_INS, libc::STA_DEL, libc::STA_UNSYNC)
        );
    }
}
