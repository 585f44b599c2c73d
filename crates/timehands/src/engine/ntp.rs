//! `ntp_adjtime` for the engine: the kernel's NTP clock discipline (the
//! nanokernel of kern_ntptime.c) over a [`Timekeeper`], and the leap second.
//!
//! # The model
//!
//! An NTP client measures the clock's offset from its servers every poll
//! interval and hands it over ([`Timex::offset_ns`]). The offset becomes
//! the phase still to slew, of which `1 / 2^(4 + constant)` runs each
//! second; the frequency takes a share of it too: the PLL adds `offset ×
//! elapsed / 2^(2 × (6 + constant))` (a type-II loop), and at update
//! intervals of 256 s or more with [`Status::FLL`] (or over 2048 s
//! regardless) the FLL adds `offset / elapsed / 4`. The frequency is
//! bounded to ±500 ppm, and so is the slew: the phase runs through the
//! timekeeper's `adjtime`, what has not run is kept for the next second.
//!
//! Each second also grows the maximum error by 500 µs (what an unknown
//! frequency error of 500 ppm could add) up to 16 s, when the clock is
//! marked unsynchronized, and runs the leap-second state machine: with
//! [`Status::INS`] armed, realtime's step from 23:59:59 to 00:00:00 UTC is
//! undone (the second 23:59:59 runs twice; [`NtpTime::leap_second`] says the
//! second is 23:59:60, as `ntp_gettime` does with `TIME_OOP`); with
//! [`Status::DEL`], realtime jumps from 23:59:59 to 00:00:00. TAI − UTC
//! moves with it, so TAI never steps, and uptime is never touched.
//!
//! # Who calls what
//!
//! [`Ntp::adjtime`] when the client has a measurement (or a setting), and
//! [`Ntp::second`] at least once a second (at every windup is best: the
//! leap is taken at the first call after the second boundary, as the
//! kernel takes it at the first tick). Both act through the timekeeper's
//! writer, so readers stay lock-free and never see a step back; realtime
//! steps only at a leap.

use super::bintime::BinTime;
use super::counter::Counter;
use super::discipline::MAX_PPB;
use super::kalman::ONE;
use super::timekeeper::Timekeeper;
use crate::Error;

/// The PLL's loop gain (a shift), as the kernel's `SHIFT_PLL`.
const SHIFT_PLL: u32 = 4;
/// The FLL's loop gain (a shift), as the kernel's `SHIFT_FLL`.
const SHIFT_FLL: u32 = 2;
/// The shortest update interval for the FLL, s.
const MINSEC: i64 = 256;
/// The update interval past which the FLL runs regardless, s.
const MAXSEC: i64 = 2048;
/// The largest time constant.
const MAX_CONSTANT: u32 = 10;
/// The largest offset taken, ns: larger ones are clamped.
const MAX_PHASE: i128 = 500_000_000;
/// The maximum error's growth a second, and its limit, µs.
const MAX_ERROR_RATE: i64 = 500;
const PHASE_LIMIT: i64 = 16_000_000;
/// A day, s.
const DAY: i64 = 86_400;
/// More seconds than this at once are a step of realtime, not seconds that
/// ran: two of them are handled, as the kernel's windup does.
const LARGE_STEP: i64 = 200;

/// Status bits, as `struct timex`'s `status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status(pub u32);

impl Status {
    /// The PLL takes offsets.
    pub const PLL: Status = Status(0x0001);
    /// The FLL is used at long update intervals.
    pub const FLL: Status = Status(0x0008);
    /// A leap second is to be inserted at the end of the UTC day.
    pub const INS: Status = Status(0x0010);
    /// A leap second is to be deleted at the end of the UTC day.
    pub const DEL: Status = Status(0x0020);
    /// The clock is not synchronized.
    pub const UNSYNC: Status = Status(0x0040);
    /// Offsets do not change the frequency.
    pub const FREQHOLD: Status = Status(0x0080);
    /// Read only: the last update ran the FLL.
    pub const MODE: Status = Status(0x4000);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Status) -> bool {
        self.0 & other.0 == other.0
    }

    fn with(self, other: Status, on: bool) -> Status {
        if on {
            Status(self.0 | other.0)
        } else {
            Status(self.0 & !other.0)
        }
    }
}

/// The leap-second state, as `ntp_adjtime` returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeState {
    /// No leap second pending.
    Ok,
    /// A leap second will be inserted at the end of the day.
    Insert,
    /// A leap second will be deleted at the end of the day.
    Delete,
    /// The leap second is in progress (23:59:60).
    Oop,
    /// A leap second has occurred; [`Status::INS`] or [`Status::DEL`] is
    /// still set.
    Wait,
}

/// What to set, as `struct timex` with its `modes`: each field given is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timex {
    /// The clock's offset from the reference, ns: positive, the clock is
    /// behind. Taken by the PLL/FLL if [`Status::PLL`] is set; clamped to
    /// ±500 ms.
    pub offset_ns: Option<i64>,
    /// The frequency, ppb: positive runs the clock fast.
    pub frequency_ppb: Option<i64>,
    /// The maximum error, µs.
    pub maxerror_us: Option<i64>,
    /// The estimated error, µs.
    pub esterror_us: Option<i64>,
    /// The status bits (the read-only ones are ignored).
    pub status: Option<Status>,
    /// The PLL's time constant, 0 to 10.
    pub constant: Option<u32>,
    /// TAI − UTC, s.
    pub tai: Option<i32>,
}

/// The discipline's state, as `ntp_adjtime` returns it in `struct timex`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NtpState {
    /// The phase still to slew, ns.
    pub offset_ns: i64,
    /// The frequency, ppb.
    pub frequency_ppb: i64,
    /// The maximum error, µs.
    pub maxerror_us: i64,
    /// The estimated error, µs.
    pub esterror_us: i64,
    /// The status bits.
    pub status: Status,
    /// The time constant.
    pub constant: u32,
    /// TAI − UTC, s.
    pub tai: i32,
    /// The leap-second state.
    pub state: TimeState,
}

/// The time with its errors, as `ntp_gettime` returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NtpTime {
    /// Realtime (during an inserted leap second, 23:59:59 again).
    pub realtime: BinTime,
    /// TAI: realtime plus TAI − UTC, continuous through leap seconds.
    pub tai: BinTime,
    /// Whether this is an inserted leap second: realtime's second is 23:59:60.
    pub leap_second: bool,
    /// The maximum error, µs.
    pub maxerror_us: i64,
    /// The estimated error, µs.
    pub esterror_us: i64,
}

/// The kernel's NTP discipline over a timekeeper: see the module docs.
///
/// ```
/// use timehands::{BinTime, Ntp, NtpStatus, SimCounter, Timekeeper, Timex, TimeState};
///
/// let counter = SimCounter::new(1_000_000_000);
/// let tk = Timekeeper::new(counter.clone())?;
/// tk.set_realtime(BinTime::new(86_400 - 2, 0)); // 23:59:58 UTC
/// let mut ntp = Ntp::new();
/// let mut leap = Timex::default();
/// leap.status = Some(NtpStatus::INS);
/// leap.tai = Some(37);
/// assert_eq!(ntp.adjtime(&tk, &leap)?.state, TimeState::Insert);
/// let uptime = tk.uptime();
/// let tai = ntp.gettime(&tk).tai;
/// for _ in 0..2_500 {
///     counter.advance(1_000_000); // 2.5 s in milliseconds
///     tk.windup();
///     ntp.second(&tk);
/// }
/// // 00:00:00.5 would be past midnight: the leap second makes it 23:59:59.5.
/// assert_eq!(tk.realtime().to_timespec(), (86_399, 500_000_000));
/// let now = ntp.gettime(&tk);
/// assert!(now.leap_second);
/// // TAI ran on as uptime did, through the leap: no step.
/// assert_eq!(now.tai - tai, tk.uptime() - uptime);
/// assert_eq!((tk.uptime() - uptime).to_timespec(), (2, 500_000_000));
/// # Ok::<(), timehands::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Ntp {
    /// The phase still to slew, ns (32 fraction bits).
    offset: i128,
    /// The frequency, ppb (32 fraction bits).
    frequency: i128,
    constant: u32,
    status: Status,
    maxerror: i64,
    esterror: i64,
    /// The realtime second of the last offset.
    reftime: Option<i64>,
    /// The last realtime second [`second`](Ntp::second) handled.
    second: Option<i64>,
    state: TimeState,
    tai: i32,
}

impl Default for Ntp {
    fn default() -> Ntp {
        Ntp::new()
    }
}

impl Ntp {
    /// Unsynchronized, no offset, no frequency, time constant 0, the
    /// errors at their 16 s limit.
    pub fn new() -> Ntp {
        Ntp {
            offset: 0,
            frequency: 0,
            constant: 0,
            status: Status::UNSYNC,
            maxerror: PHASE_LIMIT,
            esterror: PHASE_LIMIT,
            reftime: None,
            second: None,
            state: TimeState::Ok,
            tai: 0,
        }
    }

    /// `ntp_adjtime`: sets what `timex` gives, then returns the state.
    ///
    /// # Errors
    /// [`Error::Timex`] for a time constant above 10 or a negative error,
    /// [`Error::FrequencyAdjustment`] for a frequency beyond ±500 ppm;
    /// nothing changes then.
    pub fn adjtime<C: Counter>(
        &mut self,
        tk: &Timekeeper<C>,
        timex: &Timex,
    ) -> Result<NtpState, Error> {
        let field = |field, value: i64| Error::Timex { field, value };
        if let Some(constant) = timex.constant.filter(|&c| c > MAX_CONSTANT) {
            return Err(field("constant", constant as i64));
        }
        if let Some(ppb) = timex.frequency_ppb.filter(|ppb| ppb.abs() > MAX_PPB) {
            return Err(Error::FrequencyAdjustment { ppb });
        }
        for (name, value) in [
            ("maxerror", timex.maxerror_us),
            ("esterror", timex.esterror_us),
        ] {
            if let Some(value) = value.filter(|&v| v < 0) {
                return Err(field(name, value));
            }
        }
        if let Some(status) = timex.status {
            self.status = Status(status.0 & !Status::MODE.0 | self.status.0 & Status::MODE.0);
            if self.state == TimeState::Ok {
                self.state = self.leap_armed().unwrap_or(TimeState::Ok);
            }
        }
        self.constant = timex.constant.unwrap_or(self.constant);
        self.tai = timex.tai.unwrap_or(self.tai);
        self.maxerror = timex.maxerror_us.unwrap_or(self.maxerror);
        self.esterror = timex.esterror_us.unwrap_or(self.esterror);
        if let Some(ppb) = timex.frequency_ppb {
            self.frequency = ppb as i128 * ONE;
        }
        if let Some(ns) = timex
            .offset_ns
            .filter(|_| self.status.contains(Status::PLL))
        {
            self.update(ns, tk.realtime().sec());
        }
        self.apply_frequency(tk);
        Ok(self.state())
    }

    /// The state, as [`adjtime`](Ntp::adjtime) with nothing to set returns it.
    pub fn state(&self) -> NtpState {
        NtpState {
            offset_ns: (self.offset / ONE) as i64,
            frequency_ppb: (self.frequency / ONE) as i64,
            maxerror_us: self.maxerror,
            esterror_us: self.esterror,
            status: self.status,
            constant: self.constant,
            tai: self.tai,
            state: self.state,
        }
    }

    /// `ntp_gettime`: realtime, TAI and the errors.
    pub fn gettime<C: Counter>(&self, tk: &Timekeeper<C>) -> NtpTime {
        let realtime = tk.realtime();
        NtpTime {
            realtime,
            tai: realtime.saturating_add(BinTime::new(self.tai as i64, 0)),
            leap_second: self.state == TimeState::Oop,
            maxerror_us: self.maxerror,
            esterror_us: self.esterror,
        }
    }

    /// The kernel's once a second: for each realtime second since the last
    /// call, the maximum error's growth, the leap-second state machine, and
    /// the phase's share for the second, slewed through `adjtime`.
    pub fn second<C: Counter>(&mut self, tk: &Timekeeper<C>) {
        let now = tk.realtime().sec();
        let Some(mut second) = self.second else {
            self.second = Some(now);
            return;
        };
        if second > now {
            // Realtime was stepped back: its seconds are counted from here.
            second = now;
        } else if now - second > LARGE_STEP {
            second = now - 2;
        }
        let mut adjust = 0;
        while second < now {
            second += 1;
            self.maxerror += MAX_ERROR_RATE;
            if self.maxerror > PHASE_LIMIT {
                self.maxerror = PHASE_LIMIT;
                self.status = self.status.with(Status::UNSYNC, true);
            }
            let step = self.leap(second);
            let part = self.offset >> (SHIFT_PLL + self.constant);
            self.offset -= part;
            adjust += part;
            if step != 0 {
                // Realtime steps by a second: the rest of the seconds are
                // counted again from where it is now.
                let boottime = tk.current(|slot| slot.boottime()).1;
                tk.set_boottime(boottime.saturating_add(BinTime::new(step, 0)));
                second = tk.realtime().sec();
                break;
            }
        }
        self.second = Some(second);
        if adjust != 0 {
            // What the last request had not run is still to run.
            let left = tk.adjtime((adjust / ONE) as i64);
            self.offset += adjust % ONE + left as i128 * ONE;
        }
    }

    /// The leap a pending state asks for, if any.
    fn leap_armed(&self) -> Option<TimeState> {
        if self.status.contains(Status::INS) {
            Some(TimeState::Insert)
        } else if self.status.contains(Status::DEL) {
            Some(TimeState::Delete)
        } else {
            None
        }
    }

    /// The leap-second state machine as realtime enters `second`; returns
    /// realtime's step, in seconds.
    fn leap(&mut self, second: i64) -> i64 {
        let (state, step) = match self.state {
            TimeState::Ok => (self.leap_armed().unwrap_or(TimeState::Ok), 0),
            TimeState::Insert if !self.status.contains(Status::INS) => (TimeState::Ok, 0),
            // Entering 00:00:00: 23:59:59 again, shown as 23:59:60.
            TimeState::Insert if second.rem_euclid(DAY) == 0 => (TimeState::Oop, -1),
            TimeState::Delete if !self.status.contains(Status::DEL) => (TimeState::Ok, 0),
            // Entering 23:59:59: 00:00:00 at once.
            TimeState::Delete if (second + 1).rem_euclid(DAY) == 0 => (TimeState::Wait, 1),
            TimeState::Oop => (TimeState::Wait, 0),
            TimeState::Wait if self.leap_armed().is_none() => (TimeState::Ok, 0),
            state => (state, 0),
        };
        self.state = state;
        self.tai -= step as i32;
        step
    }

    /// The kernel's `hardupdate`: the PLL (and the FLL) take `ns`, measured
    /// at realtime second `now`.
    fn update(&mut self, ns: i64, now: i64) {
        let offset = (ns as i128).clamp(-MAX_PHASE, MAX_PHASE) * ONE;
        self.offset = offset;
        let elapsed = match self.reftime {
            Some(reftime) if !self.status.contains(Status::FREQHOLD) => now - reftime,
            _ => 0,
        };
        self.frequency += (offset * elapsed as i128) >> (2 * (SHIFT_PLL + 2 + self.constant));
        let fll = elapsed >= MINSEC && (self.status.contains(Status::FLL) || elapsed > MAXSEC);
        if fll {
            self.frequency += (offset / elapsed as i128) >> SHIFT_FLL;
        }
        self.status = self.status.with(Status::MODE, fll);
        self.reftime = Some(now);
        let max = MAX_PPB as i128 * ONE;
        self.frequency = self.frequency.clamp(-max, max);
    }

    /// Runs the timekeeper at the frequency.
    fn apply_frequency<C: Counter>(&self, tk: &Timekeeper<C>) {
        // Within ±500 ppm: `update` clamps, `adjtime` checks.
        let _ = tk.set_frequency_adjustment((self.frequency / ONE) as i64);
    }
}
