//! ptp4l as programs meet it: a real master and slave (linuxptp's
//! `ptp4l`, software timestamps) on a veth pair between two network
//! namespaces, and a reader in the slave's namespace whose bounds come
//! from the slave's management socket. Both ptp4ls timestamp with this
//! machine's CLOCK_REALTIME, so the truth is CLOCK_REALTIME itself; both
//! are free-running (they measure and leave the clock alone, which other
//! tests share: ptp4l would otherwise write its frequency back at start). Root only, and where ptp4l and ip(8) are: skipped
//! elsewhere with the reason.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::readers::{CHILD, GUARD};
use super::{BoundsSource, realtime_bounds};
use crate::host::process_tests::assert_half_passes;
use crate::os::KernelClock;

/// Why the test cannot run here, if it cannot.
fn missing() -> Option<String> {
    // SAFETY: geteuid takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces, ptp4l)".to_string());
    }
    for (tool, flag) in [("ptp4l", "-v"), ("ip", "-V")] {
        let ran = Command::new(tool)
            .arg(flag)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !ran.is_ok_and(|s| s.success()) {
            return Some(format!(
                "no {tool} here (apt-get install linuxptp iproute2)"
            ));
        }
    }
    None
}

/// `ip` with `args`, which must succeed.
fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("ip runs");
    assert!(status.success(), "ip {args:?}: {status}");
}

/// The two namespaces and the pair between them, deleted on drop (with
/// the ptp4ls, which end first).
struct Network {
    master: String,
    slave: String,
    dir: std::path::PathBuf,
    ptp4ls: Vec<Child>,
}

impl Network {
    fn new() -> Network {
        let id = std::process::id();
        let (master, slave) = (format!("thm{id}"), format!("ths{id}"));
        let (master_link, slave_link) = (format!("thm{id}"), format!("ths{id}"));
        ip(&["netns", "add", &master]);
        ip(&["netns", "add", &slave]);
        let dir = std::env::temp_dir().join(format!("timehands-ptp-{id}"));
        std::fs::create_dir_all(&dir).expect("a directory");
        let network = Network {
            master,
            slave,
            dir,
            ptp4ls: Vec::new(),
        };
        ip(&[
            "link",
            "add",
            &master_link,
            "type",
            "veth",
            "peer",
            "name",
            &slave_link,
        ]);
        for (ns, link, address) in [
            (&network.master, &master_link, "10.233.0.1/24"),
            (&network.slave, &slave_link, "10.233.0.2/24"),
        ] {
            ip(&["link", "set", link, "netns", ns]);
            ip(&["-n", ns, "addr", "add", address, "dev", link]);
            ip(&["-n", ns, "link", "set", link, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        network
    }

    /// Starts ptp4l in namespace `ns` on `link` with `options` (lines of
    /// its configuration); its management socket is the returned path.
    fn ptp4l(&mut self, ns: &str, link: &str, options: &str) -> String {
        let socket = self.dir.join(format!("{ns}.socket"));
        let config = self.dir.join(format!("{ns}.cfg"));
        let text = format!(
            "[global]\nuds_address {}\nlogSyncInterval -4\nlogMinDelayReqInterval -4\nlogAnnounceInterval -3\n{options}",
            socket.display()
        );
        std::fs::write(&config, text).expect("a configuration");
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "ptp4l", "-S", "-i", link, "-f"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ptp4l starts");
        self.ptp4ls.push(child);
        socket.display().to_string()
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for child in &mut self.ptp4ls {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The pair goes with its namespaces.
        for ns in [&self.master, &self.slave] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The child half: enters the slave's namespace `ns` (ptp4l answers an
/// address of this namespace's), waits for ptp4l's first bound, then holds
/// 100 reads, 20 ms apart, against CLOCK_REALTIME: each has a bound from
/// ptp4l, and each is true.
pub(crate) fn reads_in_the_slave_s_namespace(ns: &str) -> Result<(), String> {
    let path = std::ffi::CString::new(format!("/var/run/netns/{ns}")).map_err(|e| e.to_string())?;
    // SAFETY: opens a NUL-terminated path; setns moves this thread (the
    // reader's) into the namespace, then the descriptor is closed.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 || libc::setns(fd, libc::CLONE_NEWNET) != 0 {
            return Err(format!("setns {ns}: {}", std::io::Error::last_os_error()));
        }
        libc::close(fd);
    }
    let from_ptp4l = || realtime_bounds().is_ok_and(|b| b.source == BoundsSource::Ptp4l);
    let limit = Instant::now() + GUARD;
    while !from_ptp4l() {
        if Instant::now() > limit {
            return Err(format!("no bound from ptp4l: {:?}", realtime_bounds()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let kernel = || crate::os::kernel_nanos(KernelClock::Realtime).unwrap_or(0);
    let (mut false_bounds, mut without, mut halves) = (0, 0, Vec::new());
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(20));
        let before = kernel();
        let bounds = realtime_bounds();
        let after = kernel();
        match bounds {
            Ok(b) if b.source == BoundsSource::Ptp4l => {
                halves.push(b.half_width().as_nanos());
                // The read's moment is between the two: the interval must
                // meet that span.
                if b.earliest.as_nanos() > u128::from(after)
                    || b.latest.as_nanos() < u128::from(before)
                {
                    false_bounds += 1;
                }
            }
            _ => without += 1,
        }
    }
    halves.sort_unstable();
    println!(
        "100 reads: {} from ptp4l, {false_bounds} false, {without} without; half-width median {} ns",
        halves.len(),
        halves.get(halves.len() / 2).copied().unwrap_or(0)
    );
    if false_bounds > 0 || without > 0 {
        return Err(format!(
            "{false_bounds} false bounds, {without} reads without one"
        ));
    }
    Ok(())
}

/// A real ptp4l master and slave over a veth pair: every read after the
/// first bound has one from ptp4l, and none is false.
#[test]
#[cfg_attr(miri, ignore = "runs ptp4l")]
fn ptp4l_s_bounds_over_a_veth_pair_are_true() {
    if let Some(why) = missing() {
        println!("skipped: {why}");
        return;
    }
    let mut network = Network::new();
    let id = std::process::id();
    let (master, slave) = (network.master.clone(), network.slave.clone());
    network.ptp4l(
        &master,
        &format!("thm{id}"),
        "masterOnly 1\nfree_running 1\nclockAccuracy 0x22\n",
    );
    let socket = network.ptp4l(&slave, &format!("ths{id}"), "slaveOnly 1\nfree_running 1\n");
    assert_half_passes(
        CHILD,
        &format!("ptp:{slave}"),
        &[("TIMEHANDS_PTP4L", &socket)],
    );
}
