//! Steps of Realtime, then a leap second inserted, and one deleted, by the
//! real kernel. Realtime stepped a second back and on: Monotonic reads
//! within its stated bound of CLOCK_MONOTONIC at every read, never back.
//! Then Realtime set five seconds before a midnight UTC, the leap announced with
//! `adjtimex(ADJ_STATUS)`, and every clock read through the midnight
//! against the kernel's. TAI never steps (nor does CLOCK_TAI: the kernel
//! moves Realtime and TAI − UTC together) and stays within its stated
//! bound of CLOCK_TAI; Realtime stays within its stated bound of
//! CLOCK_REALTIME at every read, and is back on it within some
//! microseconds of the kernel's step; Monotonic does not move.
//!
//! Root only (CI runs as root); elsewhere it says why it is skipped. A test
//! binary of its own, so that no other test of this crate runs while the
//! machine's Realtime is moved (cargo runs test binaries one at a time),
//! and under the lock the project's other tests that change the clock take
//! (`/run/lock/timehands-clock.lock`); Realtime, the kernel's status and
//! TAI − UTC are put back whatever happens.
#![cfg(target_os = "linux")]

use std::time::Duration;

mod machine_clock;

use machine_clock::{ClockLock, adjtimex, kernel, within};
use timehands::{ClockId, gettime};

/// Sets CLOCK_REALTIME to `ns`.
fn set_realtime(ns: i128) -> Result<(), String> {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as _,
        tv_nsec: (ns % 1_000_000_000) as _,
    };
    // SAFETY: sets the clock to a valid timespec (root only).
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &ts) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// What the test changes, as it was: put back when dropped.
struct Machine {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    realtime: i128,
    status: i32,
    tai: i32,
}

impl Machine {
    fn save() -> Result<Machine, String> {
        // SAFETY: a zeroed timex reads the state (modes 0).
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        adjtimex(&mut tx)?;
        Ok(Machine {
            realtime: kernel(libc::CLOCK_REALTIME) - kernel(libc::CLOCK_MONOTONIC),
            status: tx.status,
            tai: tx.tai,
        })
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // SAFETY: a zeroed timex with the modes set changes those alone.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        tx.modes = libc::ADJ_STATUS | libc::ADJ_TAI;
        tx.status = self.status;
        tx.constant = self.tai.into();
        let status = adjtimex(&mut tx);
        let realtime = set_realtime(kernel(libc::CLOCK_MONOTONIC) + self.realtime);
        println!("put back: the status and TAI − UTC {status:?}, Realtime {realtime:?}");
    }
}

/// One read of each clock against the kernel's around it: the first
/// failure, and how far Realtime is from CLOCK_REALTIME.
struct Reads {
    last_tai: u128,
    kernel_step_at: Option<i128>,
    back_within_1us_after: Option<i128>,
    initial_offset: i128,
}

/// Waits (a second at most) until Realtime is within a millisecond of
/// CLOCK_REALTIME again after a step the test made, which is not the
/// kernel's leap: the clock follows it at its next windup (or at once, by
/// its thread's notice of it).
fn follow_the_tests_step() -> Result<(), String> {
    let followed = kernel(libc::CLOCK_MONOTONIC) + 1_000_000_000;
    while (gettime(ClockId::Realtime).as_nanos() as i128 - kernel(libc::CLOCK_REALTIME)).abs()
        > 1_000_000
    {
        if kernel(libc::CLOCK_MONOTONIC) > followed {
            return Err("the clock did not follow the test's own step".to_string());
        }
    }
    Ok(())
}

impl Reads {
    fn check(&mut self) -> Result<(), String> {
        let (tai, ..) = within(ClockId::Tai, libc::CLOCK_TAI)?;
        if (tai as u128) < self.last_tai {
            return Err(format!("TAI stepped back from {} to {tai}", self.last_tai));
        }
        self.last_tai = tai as u128;
        within(ClockId::Monotonic, libc::CLOCK_MONOTONIC)?;
        let (ours, before, after) = within(ClockId::Realtime, libc::CLOCK_REALTIME)?;
        let monotonic = kernel(libc::CLOCK_MONOTONIC);
        let offset = after - monotonic;
        if self.kernel_step_at.is_none() && (offset - self.initial_offset).abs() > 500_000_000 {
            self.kernel_step_at = Some(monotonic);
        }
        if let (Some(step), None) = (self.kernel_step_at, self.back_within_1us_after) {
            if ours + 1_000 >= before && ours <= after + 1_000 {
                self.back_within_1us_after = Some(monotonic - step);
            }
        }
        Ok(())
    }
}

/// Announces a leap second (`STA_INS` or `STA_DEL`) some seconds before a
/// midnight, reads through it, and returns how long after
/// the kernel's step Realtime was back within 1 µs of CLOCK_REALTIME.
fn through_a_leap(flag: i32) -> Result<Duration, String> {
    let _machine = Machine::save()?;
    let now = kernel(libc::CLOCK_REALTIME);
    let day = 86_400 * 1_000_000_000i128;
    // Five seconds before. The kernel's leap state moves a step a second:
    // after the last leap it waits for a second with none announced, then
    // takes the announcement, then makes the leap.
    set_realtime((now / day + 1) * day - 5_000_000_000)?;
    std::thread::sleep(Duration::from_millis(1_200));
    // SAFETY: a zeroed timex with ADJ_STATUS sets the status alone.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    adjtimex(&mut tx)?;
    tx.modes = libc::ADJ_STATUS;
    tx.status = (tx.status & !(libc::STA_INS | libc::STA_DEL)) | flag;
    adjtimex(&mut tx)?;
    follow_the_tests_step()?;
    let monotonic = kernel(libc::CLOCK_MONOTONIC);
    let mut reads = Reads {
        last_tai: 0,
        kernel_step_at: None,
        back_within_1us_after: None,
        initial_offset: kernel(libc::CLOCK_REALTIME) - monotonic,
    };
    while kernel(libc::CLOCK_MONOTONIC) - monotonic < 6_000_000_000 {
        reads.check()?;
    }
    if reads.kernel_step_at.is_none() {
        return Err("the kernel made no leap".to_string());
    }
    let back = reads
        .back_within_1us_after
        .ok_or("Realtime never came back within 1 µs")?;
    Ok(Duration::from_nanos(back as u64))
}

/// Steps Realtime a second back and a second on, and reads Monotonic
/// through each for 200 ms against CLOCK_MONOTONIC: a step of the wall
/// clock is none of Monotonic's, nor of a counter's that follows the wall
/// clock (qemu-user's CNTVCT_EL0, forced with `TIMEHANDS_COUNTER=tsc`: it
/// goes back a second, and is retired for the kernel's clock, on which the
/// step on runs).
fn through_steps() -> Result<(), String> {
    let _machine = Machine::save()?;
    for step in [-1_000_000_000, 1_000_000_000] {
        println!(
            "Realtime stepped {step} ns on {:?}",
            timehands::info().counter
        );
        set_realtime(kernel(libc::CLOCK_REALTIME) + step)?;
        let start = kernel(libc::CLOCK_MONOTONIC);
        let mut last = 0;
        while kernel(libc::CLOCK_MONOTONIC) - start < 200_000_000 {
            let (ours, ..) = within(ClockId::Monotonic, libc::CLOCK_MONOTONIC)
                .map_err(|e| format!("Realtime stepped {step} ns: {e}"))?;
            if ours < last {
                return Err(format!("Monotonic stepped back from {last} to {ours}"));
            }
            last = ours;
        }
        follow_the_tests_step()?;
    }
    Ok(())
}

#[test]
#[cfg_attr(miri, ignore = "sets the machine's clock and the kernel's leap status")]
fn steps_and_leap_seconds_move_realtime_alone() {
    // SAFETY: geteuid only reads.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: setting the clock and the leap status needs root");
        return;
    }
    let _lock = ClockLock::take().unwrap_or_else(|e| panic!("{e}"));
    // The clock starts, and its thread chooses the counter, before the
    // steps: through them the counter is the chosen one.
    gettime(ClockId::Tai);
    println!("counter: {:?}", timehands::info().counter);
    if let Err(why) = through_steps() {
        panic!("{why}");
    }
    println!("Realtime stepped back and on: Monotonic within its bound at every read");
    for (flag, what) in [(libc::STA_INS, "inserted"), (libc::STA_DEL, "deleted")] {
        match through_a_leap(flag) {
            Ok(back) => println!(
                "a leap second {what}: Realtime back within 1 µs {back:?} after the kernel's step"
            ),
            Err(why) => panic!("a leap second {what}: {why}"),
        }
    }
}
