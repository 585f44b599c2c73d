//! The facts about the system that a latency figure means nothing without:
//! the kernel and its preemption model, the clocksource, and whether a
//! hypervisor sits between the thread and the hardware.

use serde::Serialize;

/// What the system is, as JSON names it (cyclictest's `sysinfo` fields first).
#[derive(Clone, Debug, Serialize)]
pub struct SysInfo {
    /// `uname -s`.
    pub sysname: String,
    /// `uname -n`.
    pub nodename: String,
    /// `uname -r`, the kernel release.
    pub release: String,
    /// `uname -v`, which names the preemption model the kernel was built with.
    pub version: String,
    /// `uname -m`.
    pub machine: String,
    /// 1 on a PREEMPT_RT kernel (`/sys/kernel/realtime`), as cyclictest says.
    pub realtime: u8,
    /// The preemption model in force: `PREEMPT_RT`, `full`, `voluntary`,
    /// `none`, `lazy`, or what is known of it.
    pub preemption: String,
    /// The kernel's current clocksource, such as `tsc`.
    pub clocksource: Option<String>,
    /// A hypervisor is present.
    pub virtualized: bool,
    /// The hypervisor's name, when it gives one.
    pub hypervisor: Option<String>,
}

impl SysInfo {
    /// The facts of this machine now.
    pub fn gather() -> SysInfo {
        let uname = Uname::read();
        let realtime = read_trimmed("/sys/kernel/realtime").is_some_and(|v| v == "1");
        let preemption = preemption_model(
            realtime,
            &uname.version,
            read_trimmed("/sys/kernel/debug/sched/preempt").as_deref(),
            read_trimmed("/proc/cmdline").as_deref(),
        );
        let (virtualized, hypervisor) = hypervisor();
        SysInfo {
            sysname: uname.sysname,
            nodename: uname.nodename,
            release: uname.release,
            version: uname.version,
            machine: uname.machine,
            realtime: u8::from(realtime),
            preemption,
            clocksource: timehands::diagnostics::hw::kernel_clocksource(),
            virtualized,
            hypervisor,
        }
    }

    /// One line for people: kernel, preemption, clocksource, hypervisor.
    pub fn line(&self) -> String {
        let host = match (&self.virtualized, &self.hypervisor) {
            (false, _) => "bare metal".to_string(),
            (true, Some(name)) => format!("virtualized ({name})"),
            (true, None) => "virtualized".to_string(),
        };
        format!(
            "kernel {} preemption {} clocksource {} {host}",
            self.release,
            self.preemption,
            self.clocksource.as_deref().unwrap_or("unknown"),
        )
    }
}

struct Uname {
    sysname: String,
    nodename: String,
    release: String,
    version: String,
    machine: String,
}

impl Uname {
    fn read() -> Uname {
        // SAFETY: an all-zero utsname is valid (empty strings).
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid, writable utsname; uname cannot fail with one.
        unsafe { libc::uname(&mut u) };
        let field = |f: &[libc::c_char]| {
            let bytes: Vec<u8> = f
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        Uname {
            sysname: field(&u.sysname),
            nodename: field(&u.nodename),
            release: field(&u.release),
            version: field(&u.version),
            machine: field(&u.machine),
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The preemption model, from the most direct evidence to the least: the RT
/// flag, the dynamic model's debugfs switch (`none voluntary (full) lazy`), a
/// `preempt=` boot parameter, then what `uname -v` says the kernel was built
/// with.
fn preemption_model(
    realtime: bool,
    uname_version: &str,
    debugfs_preempt: Option<&str>,
    cmdline: Option<&str>,
) -> String {
    if realtime || uname_version.contains("PREEMPT_RT") {
        return "PREEMPT_RT".to_string();
    }
    let chosen = debugfs_preempt.and_then(|modes| {
        modes
            .split_whitespace()
            .find_map(|m| m.strip_prefix('(')?.strip_suffix(')'))
    });
    if let Some(mode) = chosen {
        return mode.to_string();
    }
    let dynamic = uname_version.contains("PREEMPT_DYNAMIC");
    let boot = cmdline.and_then(|c| {
        c.split_whitespace()
            .find_map(|p| p.strip_prefix("preempt="))
    });
    match (dynamic, boot) {
        (true, Some(mode)) => mode.to_string(),
        (true, None) => "dynamic (mode not visible without debugfs)".to_string(),
        (false, _) if uname_version.split_whitespace().any(|w| w == "PREEMPT") => {
            "full".to_string()
        }
        (false, _) => "none or voluntary".to_string(),
    }
}

/// Whether a hypervisor is present, and its name: CPUID's hypervisor bit and
/// vendor leaf on x86_64, else `/sys/hypervisor/type` (Xen) or the device
/// tree's hypervisor node (ARM).
fn hypervisor() -> (bool, Option<String>) {
    #[cfg(target_arch = "x86_64")]
    {
        let facts = timehands::diagnostics::hw::TscFacts::read();
        if facts.hypervisor {
            return (
                true,
                facts
                    .hypervisor_vendor
                    .filter(|v| !v.is_empty())
                    .map(|v| v.to_string()),
            );
        }
    }
    for path in [
        "/sys/hypervisor/type",
        "/sys/firmware/devicetree/base/hypervisor/compatible",
    ] {
        if let Some(name) = read_trimmed(path) {
            let name = name.trim_end_matches('\0').to_string();
            return (true, (!name.is_empty()).then_some(name));
        }
    }
    (false, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rt_flag_or_the_build_string_says_preempt_rt() {
        assert_eq!(preemption_model(true, "#1 SMP", None, None), "PREEMPT_RT");
        assert_eq!(
            preemption_model(false, "#1 SMP PREEMPT_RT Thu", None, None),
            "PREEMPT_RT"
        );
    }

    #[test]
    fn the_debugfs_switch_names_the_dynamic_model_in_force() {
        let model = preemption_model(
            false,
            "#1 SMP PREEMPT_DYNAMIC",
            Some("none voluntary (full) lazy"),
            Some("preempt=none"),
        );
        assert_eq!(model, "full");
    }

    #[test]
    fn without_debugfs_the_boot_parameter_then_the_build_decide() {
        let dynamic = "#1 SMP PREEMPT_DYNAMIC @0";
        assert_eq!(
            preemption_model(false, dynamic, None, Some("ro preempt=voluntary quiet")),
            "voluntary"
        );
        assert!(preemption_model(false, dynamic, None, Some("ro")).starts_with("dynamic"));
        assert_eq!(
            preemption_model(false, "#1 SMP PREEMPT Mon", None, None),
            "full"
        );
        assert_eq!(
            preemption_model(false, "#1 SMP Mon", None, None),
            "none or voluntary"
        );
    }

    #[test]
    fn this_machine_has_a_kernel_release_and_a_line() {
        let info = SysInfo::gather();
        assert!(!info.release.is_empty());
        assert!(info.line().contains(&info.release));
    }
}
