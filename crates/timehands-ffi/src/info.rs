//! What the clock runs on, for C: `th_info` fills a `struct th_info` with the
//! counter, its frequency, the checks that chose it, and how far the clock is
//! from the kernel's.
//!
//! The texts (counter name, frequency source, verdicts, fallback) change
//! only a few times in a process's life: the cross-CPU verdict arrives once
//! it has been measured, on a thread of its own, and a failover to the
//! kernel's clock changes the counter and names its reason. So each distinct
//! text becomes a C string once, when first seen, and lives as long as the
//! process: C gets `const char *` that it never frees, and every call shows
//! the clock as it is then. In Rust they are `&'static c_char`, a reference
//! to a string's first character, which C sees as `const char *` and which,
//! unlike a raw pointer, may sit in a shared static.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use libc::{EFAULT, EIO, c_char, c_int};

use crate::boundary::{contain, fail};

/// One check that went into choosing the counter.
#[repr(C)]
pub struct th_verdict {
    /// What was checked, such as "kernel clocksource".
    pub check: &'static c_char,
    /// What was found, such as "tsc".
    pub detail: &'static c_char,
    /// Whether the counter passed the check.
    pub passed: bool,
}

/// What the clock runs on and how well it is doing, as th_info fills it. The
/// strings live as long as the process: do not free them.
#[repr(C)]
pub struct th_info {
    /// The counter's name: "TSC", "CNTVCT_EL0" or "CLOCK_MONOTONIC" (the
    /// kernel's clock, when no hardware counter may be used).
    pub counter: &'static c_char,
    /// The counter's frequency, as refined so far, in Hz.
    pub frequency_hz: u64,
    /// Where the first frequency came from.
    pub frequency_source: &'static c_char,
    /// How sure the frequency is, in parts per billion; -1 while it is only
    /// stated (by CPUID) and not yet measured.
    pub frequency_uncertainty_ppb: i64,
    /// How far the steering has moved the frequency from the first one, in
    /// parts per billion.
    pub frequency_correction_ppb: i64,
    /// The checks that chose the counter: an array of verdict_count.
    // A raw pointer: with no verdicts there is no first element to refer to.
    pub verdicts: *const th_verdict,
    /// How many verdicts there are.
    pub verdict_count: usize,
    /// Why the kernel's clock is used instead of a hardware counter; NULL when
    /// a hardware counter is used.
    pub fallback: Option<&'static c_char>,
    /// Timehands published so far.
    pub windups: u64,
    /// The last measured offset, CLOCK_MONOTONIC minus ours, in nanoseconds.
    pub offset_ns: i64,
    /// The current bound on the error against CLOCK_MONOTONIC, in nanoseconds.
    pub accuracy_ns: u64,
    /// Where the time comes from: "the keeper's page (keeper pid N)", where
    /// a keeper publishes one this process reads, or "its own clock: " and
    /// why not the keeper's page.
    pub time_from: &'static c_char,
}

/// `text` as a C string that lives as long as the process, by its first
/// character. A NUL inside would cut the text short in C, so it is dropped.
fn leak_c_string(text: &str) -> &'static c_char {
    let chars: Vec<c_char> = text
        .bytes()
        .filter(|&b| b != 0)
        .map(|b| b as c_char)
        .chain([0])
        .collect();
    &Box::leak(chars.into_boxed_slice())[0]
}

/// The C string of `text`, made the first time it is seen.
fn c_string(text: &str) -> &'static c_char {
    static SEEN: Mutex<Option<HashMap<String, &'static c_char>>> = Mutex::new(None);
    // A panic while the lock was held left the map whole (an insert either
    // happened or not), so a poisoned lock is taken as it is.
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = seen.get_or_insert_with(HashMap::new);
    if let Some(&known) = seen.get(text) {
        return known;
    }
    let made = leak_c_string(text);
    seen.insert(text.to_string(), made);
    made
}

/// The verdicts as a C array, made the first time this list is seen: the
/// same list gives the same array, so that repeated calls leak nothing.
fn c_verdicts(verdicts: &[timehands_rs::Verdict]) -> &'static [th_verdict] {
    /// A list by its texts' interned pointers and its passes.
    type Key = Vec<(usize, usize, bool)>;
    static SEEN: Mutex<Option<HashMap<Key, &'static [th_verdict]>>> = Mutex::new(None);
    let made: Vec<th_verdict> = verdicts
        .iter()
        .map(|v| th_verdict {
            check: c_string(v.check),
            detail: c_string(&v.detail),
            passed: v.passed,
        })
        .collect();
    let key: Key = made
        .iter()
        .map(|v| {
            let address = |text: &'static c_char| text as *const c_char as usize;
            (address(v.check), address(v.detail), v.passed)
        })
        .collect();
    // As in `c_string`: a poisoned lock holds a whole map.
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    let array: &mut &'static [th_verdict] = seen
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(|| Box::leak(made.into_boxed_slice()));
    array
}

/// The C view of `info`.
fn to_c(info: timehands_rs::Info) -> th_info {
    let verdicts = c_verdicts(&info.verdicts);
    th_info {
        counter: c_string(info.counter.name()),
        frequency_hz: info.frequency_hz,
        frequency_source: c_string(&info.frequency_source),
        frequency_uncertainty_ppb: info
            .frequency_uncertainty_ppb
            .map_or(-1, |ppb| i64::try_from(ppb).unwrap_or(i64::MAX)),
        frequency_correction_ppb: info.frequency_correction_ppb,
        verdicts: verdicts.as_ptr(),
        verdict_count: verdicts.len(),
        fallback: info.fallback.as_deref().map(c_string),
        windups: info.windups,
        offset_ns: info.offset_ns,
        accuracy_ns: u64::try_from(info.accuracy.as_nanos()).unwrap_or(u64::MAX),
        time_from: c_string(&info.keeper),
    }
}

/// Fills `*info` with what the clock runs on, why, and how far it is from the
/// kernel's clock.
///
/// Returns 0, or -1 with errno EFAULT if `info` is NULL.
///
/// Not async-signal-safe: it allocates (and may wait for the clock's start
/// or steering). The reads are.
///
/// # Safety
/// `info` is NULL or points to a writable `struct th_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn th_info(info: *mut th_info) -> c_int {
    if info.is_null() {
        return fail(EFAULT);
    }
    let Some(filled) = contain(|| Some(to_c(timehands_rs::info())), || None) else {
        return fail(EIO);
    };
    // SAFETY: `info` is not NULL, and the caller promises it is writable.
    unsafe { info.write(filled) };
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn texts_become_c_strings_without_inner_nuls() {
        let first = leak_c_string("TS\0C");
        // SAFETY: `leak_c_string` returns the first character of a
        // NUL-terminated string that is never freed.
        let text = unsafe { CStr::from_ptr(first) };
        assert_eq!(text.to_str(), Ok("TSC"));
    }
}
