//! # libtimehands_lttng
//!
//! An LTTng-UST clock plugin: the events of a traced program timestamped by
//! [`timehands::now`] instead of LTTng's own `clock_gettime(CLOCK_MONOTONIC)`.
//!
//! LTTng-UST loads the library named by `LTTNG_UST_CLOCK_PLUGIN` and calls its
//! `lttng_ust_clock_plugin_init`. Two processes need it: the traced program,
//! which timestamps its events, and `lttng-sessiond`, which writes the trace's
//! clock block (name, UUID, description, frequency, and the offset to Unix time
//! it measures by reading the clock):
//!
//! ```sh
//! export LTTNG_UST_CLOCK_PLUGIN=/usr/local/lib/libtimehands_lttng.so
//! lttng-sessiond --daemonize
//! lttng create demo && lttng enable-event -u 'my_app:*' && lttng start
//! ./my_app
//! lttng destroy && babeltrace2 ~/lttng-traces/demo*
//! ```
//!
//! The clock it declares:
//!
//! - **read64**: [`timehands::now`] in nanoseconds, CLOCK_MONOTONIC's origin
//!   and rate. The ordered read, not [`timehands::now_unordered`]: LTTng keeps
//!   one buffer per CPU and babeltrace2 merges them by timestamp, so an event
//!   that happened after another on a second CPU must not get an earlier
//!   timestamp. The unordered read lets the counter read run ahead of the
//!   loads before it, and its timestamps did go back across a hand-off
//!   between CPUs; the ordered one never did (figures in the README).
//! - **freq**: 1 GHz.
//! - **uuid**: the kernel's boot id, as LTTng's own clock has: the clock is
//!   CLOCK_MONOTONIC, one clock for every process of this boot, so that the
//!   traces of all of them share it.
//! - **name**: that of [`timehands::clock_description`], `timehands_monotonic`.
//! - **description**: what the clock runs on: the counter, its frequency, and
//!   the cross-CPU check's bound (see [`timehands::info`]).
//!
//! If LTTng's setters cannot be found (the library was loaded by something
//! other than LTTng-UST) or refuse a callback, the plugin says so on stderr and
//! LTTng keeps its own clock.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The length of a UUID's text with its NUL, `LTTNG_UST_UUID_STR_LEN`.
const UUID_LEN: usize = 37;

/// How long the description waits for the cross-CPU check to report.
const CROSS_CPU_WAIT: Duration = Duration::from_secs(2);

/// The clock's texts and frequency, as the metadata gives them.
struct Described {
    name: CString,
    description: CString,
    frequency: u64,
}

/// The clock's texts, made at the first call that needs them: for the cross-CPU
/// bound, after the check has run (it runs on a thread of the clock's own,
/// started by its first windup).
fn described() -> &'static Described {
    static DESCRIBED: OnceLock<Described> = OnceLock::new();
    DESCRIBED.get_or_init(|| {
        let clock = timehands::clock_description();
        let info = cross_cpu_checked();
        let cross_cpu = info
            .verdicts
            .iter()
            .find(|verdict| verdict.check.starts_with("cross-CPU"))
            .map_or_else(
                || "no cross-CPU check (not a TSC)".to_string(),
                |verdict| format!("{}: {}", verdict.check, verdict.detail),
            );
        let text = format!(
            "{} at {} Hz; {cross_cpu}",
            clock.description, info.frequency_hz
        );
        Described {
            name: metadata_string(&clock.name),
            description: metadata_string(&text),
            frequency: clock.frequency,
        }
    })
}

/// [`timehands::info`] once the cross-CPU check has reported, or
/// [`CROSS_CPU_WAIT`] has passed, or the counter is not one it checks. The
/// reads wind the clock up, which starts the check.
fn cross_cpu_checked() -> timehands::Info {
    let start = Instant::now();
    loop {
        timehands::now();
        let info = timehands::info();
        let checked = info
            .verdicts
            .iter()
            .any(|verdict| verdict.check.starts_with("cross-CPU"));
        if checked
            || info.counter != timehands::CounterKind::Tsc
            || start.elapsed() > CROSS_CPU_WAIT
        {
            return info;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `text` as a string of a CTF metadata block: sessiond writes it between
/// double quotes and does not escape, so quotes and backslashes become
/// apostrophes, and a NUL ends it.
fn metadata_string(text: &str) -> CString {
    let text: String = text
        .chars()
        .take_while(|&c| c != '\0')
        .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
        .collect();
    CString::new(text).unwrap_or_default()
}

/// The kernel's boot id with its NUL, if it reads as a UUID.
fn boot_id() -> Option<[u8; UUID_LEN]> {
    static BOOT_ID: OnceLock<Option<[u8; UUID_LEN]>> = OnceLock::new();
    *BOOT_ID.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let text = text.trim();
        let uuid_shaped =
            text.len() == UUID_LEN - 1 && text.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if !uuid_shaped {
            return None;
        }
        let mut uuid = [0; UUID_LEN];
        uuid[..UUID_LEN - 1].copy_from_slice(text.as_bytes());
        Some(uuid)
    })
}

extern "C" fn read64() -> u64 {
    timehands::now().as_nanos()
}

extern "C" fn freq() -> u64 {
    described().frequency
}

/// Writes the boot id and its NUL into `uuid`; -1 where there is none, and
/// LTTng leaves the UUID out.
///
/// # Safety
/// `uuid` points to `LTTNG_UST_UUID_STR_LEN` writable bytes, as LTTng's caller
/// promises.
unsafe extern "C" fn uuid(uuid: *mut c_char) -> c_int {
    match boot_id() {
        Some(id) => {
            // SAFETY: the caller gives LTTNG_UST_UUID_STR_LEN bytes at `uuid`,
            // which cannot overlap our static.
            unsafe { std::ptr::copy_nonoverlapping(id.as_ptr().cast(), uuid, UUID_LEN) };
            0
        }
        None => -1,
    }
}

extern "C" fn name() -> *const c_char {
    described().name.as_ptr()
}

extern "C" fn description() -> *const c_char {
    described().description.as_ptr()
}

/// The address of LTTng-UST's function `name` in this process.
fn lttng_function(name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: dlsym only looks `name`, a NUL-terminated string, up in the
    // objects loaded so far.
    let address = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if address.is_null() {
        Err(format!(
            "{} is not in this process (LTTNG_UST_CLOCK_PLUGIN is for programs \
             linked with liblttng-ust and for lttng-sessiond)",
            name.to_string_lossy()
        ))
    } else {
        Ok(address)
    }
}

/// What an LTTng function's negative errno return means.
fn lttng_result(name: &CStr, ret: c_int) -> Result<(), String> {
    match ret {
        0 => Ok(()),
        _ => Err(format!(
            "{} failed: {}",
            name.to_string_lossy(),
            std::io::Error::from_raw_os_error(ret.saturating_neg())
        )),
    }
}

/// Hands `callback` to LTTng's `lttng_ust_trace_clock_set_*_cb` setter `name`.
fn set_callback(name: &CStr, callback: *const c_void) -> Result<(), String> {
    let address = lttng_function(name)?;
    // SAFETY: lttng/ust-clock.h declares every setter `int (*)(callback)`, with
    // a function pointer as its one argument, which the C ABI passes as a
    // pointer.
    let setter: unsafe extern "C" fn(*const c_void) -> c_int =
        unsafe { std::mem::transmute(address) };
    // SAFETY: `callback` is one of this file's functions, of the type the
    // setter `name` takes (see `install`), and lives as long as the process.
    lttng_result(name, unsafe { setter(callback) })
}

/// Sets every callback, then turns the override on.
fn install() -> Result<(), String> {
    type Read64 = extern "C" fn() -> u64;
    type Uuid = unsafe extern "C" fn(*mut c_char) -> c_int;
    type Text = extern "C" fn() -> *const c_char;
    let callbacks: [(&CStr, *const c_void); 5] = [
        (
            c"lttng_ust_trace_clock_set_read64_cb",
            read64 as Read64 as *const c_void,
        ),
        (
            c"lttng_ust_trace_clock_set_freq_cb",
            freq as Read64 as *const c_void,
        ),
        (
            c"lttng_ust_trace_clock_set_uuid_cb",
            uuid as Uuid as *const c_void,
        ),
        (
            c"lttng_ust_trace_clock_set_name_cb",
            name as Text as *const c_void,
        ),
        (
            c"lttng_ust_trace_clock_set_description_cb",
            description as Text as *const c_void,
        ),
    ];
    for (setter, callback) in callbacks {
        set_callback(setter, callback)?;
    }
    let enable = c"lttng_ust_enable_trace_clock_override";
    let address = lttng_function(enable)?;
    // SAFETY: lttng/ust-clock.h declares it `int (*)(void)`.
    let enable_override: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(address) };
    // SAFETY: LTTng's function, called once, from its plugin loader.
    lttng_result(enable, unsafe { enable_override() })
}

/// The plugin's entry point, which LTTng-UST finds with dlsym and calls once
/// it has loaded the library named by `LTTNG_UST_CLOCK_PLUGIN`: sets the clock
/// callbacks and turns the override on, then starts the clock, so that the
/// first event does not pay for the start (CPUID, the frequency) and no event
/// runs it.
#[unsafe(no_mangle)]
pub extern "C" fn lttng_ust_clock_plugin_init() {
    match install() {
        Ok(()) => {
            timehands::now();
        }
        Err(why) => {
            let _ = writeln!(
                std::io::stderr(),
                "libtimehands_lttng: {why}; LTTng keeps its own clock"
            );
        }
    }
}
