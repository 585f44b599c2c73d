//! The page as processes meet it, each case with a real keeper: a process
//! of this test binary that keeps the clock with [`Keeper`] as `timehands
//! keeper` does ([`keeper_half`]), and readers, each a fresh process
//! ([`reader_half`]) whose first read finds the page (or not), that check
//! every read against CLOCK_MONOTONIC read around it with the bound
//! `getres` states, and that it never goes back, while the test kills,
//! stops, replaces or spoils the keeper's page.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Keeper, Refusal, published};
use crate::host::fork_points::signal::{SIGNAL, SIGNAL_AT};
use crate::host::process_tests::{
    Checker, PROCESS_CHILD, assert_half_passes, child_half, report, signals,
};
use crate::{ClockId, getres, gettime};

const KEEPER_HALF: &str = "host::page::tests::keeper_half";
const READER_HALF: &str = "host::page::tests::reader_half";
/// The page's path, for both halves.
const PAGE_PATH: &str = "TIMEHANDS_TEST_PAGE";

/// The keeper half: keeps the clock in the page `TIMEHANDS_TEST_PAGE`
/// names until it is killed.
#[test]
#[ignore = "the keeper half of the page tests, which run it"]
fn keeper_half() {
    let path = std::env::var(PAGE_PATH).expect("run by a page test");
    let keeper = Keeper::create(Path::new(&path)).expect("the page is made");
    let Ok(()) = keeper.keep(None, |_| Ok::<(), std::convert::Infallible>(()));
}

/// The reader half: `read:<ms>:<expect>[:fork]` reads for that long, every
/// read checked, and then expects its time from `page` or `own`; with
/// `fork`, a forked child does the same. `bounds` expects chronyd's bounds
/// from the page.
#[test]
#[ignore = "the reader half of the page tests, which run it"]
fn reader_half() {
    let plan = std::env::var("TIMEHANDS_TEST_PLAN").expect("run by a page test");
    if plan == "bounds" {
        return report(chronyd_s_bounds_from_the_page());
    }
    if plan == "held-up" {
        let handled = crate::host::process_tests::on_signal(SIGNAL, hold_up);
        return report(handled.and_then(|()| read_for(100, "page")).and_then(|()| {
            match HELD_UP.load(std::sync::atomic::Ordering::Relaxed) {
                0 => Err("the check was never held up: nothing was tested".to_string()),
                _ => Ok(()),
            }
        }));
    }
    let words: Vec<&str> = plan.split(':').collect();
    let ms: u64 = words[1].parse().expect("milliseconds");
    let expect = words[2];
    let result = if words.get(3) == Some(&"fork") {
        // The first read maps the page; the child inherits the mapping.
        crate::now();
        crate::host::process_tests::verdict(crate::host::process_tests::fork_and(|| {
            read_for(ms, expect)
        }))
    } else {
        read_for(ms, expect)
    };
    report(result);
}

/// Hold-ups [`hold_up`] made.
static HELD_UP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A handler that holds its thread up for 500 µs, as a preemption would.
extern "C" fn hold_up(_: libc::c_int) {
    HELD_UP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = || crate::os::kernel_nanos(crate::os::KernelClock::Monotonic).unwrap_or(0);
    let start = now();
    while now().saturating_sub(start) < 500_000 {}
}

/// Reads Monotonic, checked, for `ms` (and Realtime and Boottime against
/// the kernel's, with their bounds, now and then), then checks where the
/// time came from.
fn read_for(ms: u64, expect: &str) -> Result<(), String> {
    // SAFETY: alarm(2) only arms a timer; its SIGALRM ends a child that hangs.
    unsafe { libc::alarm(30) };
    let mut checker = Checker::new();
    let start = Instant::now();
    let mut reads = 0u64;
    let mut first = None;
    while start.elapsed() < Duration::from_millis(ms) {
        checker.read().map_err(|why| {
            let hands = super::reading().map(|page| {
                page.slots.each_ref().map(|slot| {
                    slot.hands().map(|h| {
                        (
                            h.segments.map(|s| (s.start, s.len)),
                            h.end_ns,
                            h.bound_ns,
                            h.bound_ppb,
                            h.bound_since,
                        )
                    })
                })
            });
            format!(
                "{why}; from {}; count {}; hands {hands:?}",
                super::describe(),
                crate::hw::rdtsc()
            )
        })?;
        first.get_or_insert_with(super::describe);
        reads += 1;
        if reads % 1000 == 0 {
            // A coarse read is never ahead of a precise one after it.
            let (coarse, precise) = (crate::now_coarse(), crate::now());
            if coarse > precise {
                return Err(format!(
                    "now_coarse() {coarse:?} ahead of now() {precise:?} after it"
                ));
            }
            check_against_kernel(ClockId::Realtime, crate::os::KernelClock::Realtime)?;
            check_against_kernel(ClockId::Boottime, crate::os::KernelClock::Boottime)?;
            // Readers that sleep between reads, as most do.
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let first = first.unwrap_or_default();
    let last = super::describe();
    println!("{reads} reads within the bound; first from {first}; last from {last}");
    let from = |description: &str| {
        if description.starts_with("the keeper's page") {
            "page"
        } else {
            "own"
        }
    };
    match expect {
        // Read the page from the first read to the last.
        "page" if from(&first) == "page" && from(&last) == "page" => Ok(()),
        // Read the page, then left it.
        "left" if from(&first) == "page" && last.contains("left") => Ok(()),
        // Never read the page, for the reason given (every reason names
        // the keeper's page: "page" is none).
        why if !["page", "left"].contains(&why)
            && from(&first) == "own"
            && from(&last) == "own"
            && first.contains(why) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "expected {expect}; time came from {first}, then {last}"
        )),
    }
}

/// chronyd's bounds, as the keeper asked for them: every read of them for
/// 100 ms from chronyd, around our Realtime, and the time from the page.
fn chronyd_s_bounds_from_the_page() -> Result<(), String> {
    let limit = Instant::now() + Duration::from_secs(5);
    loop {
        match crate::realtime_bounds() {
            Ok(bounds) if bounds.source == crate::BoundsSource::Chronyd => break,
            _ if Instant::now() > limit => {
                return Err(format!(
                    "no bound of chronyd's in 5 s: {:?}",
                    crate::realtime_bounds()
                ));
            }
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(100) {
        let bounds = crate::realtime_bounds().map_err(|e| {
            let page = super::reading()
                .map(|page| crate::host::bounds::state::Published::over(&page.bounds).load());
            format!(
                "no bound: {e}; time from {}; the page's bounds {page:?}",
                super::describe()
            )
        })?;
        if bounds.source != crate::BoundsSource::Chronyd
            || !(bounds.earliest <= bounds.realtime && bounds.realtime <= bounds.latest)
        {
            return Err(format!("not chronyd's bound around ours: {bounds:?}"));
        }
    }
    let from = super::describe();
    from.starts_with("the keeper's page")
        .then_some(())
        .ok_or_else(|| format!("time from {from}"))
}

/// `id`, read between two reads of the kernel's `kernel`, within the bound
/// `getres` states.
fn check_against_kernel(id: ClockId, kernel: crate::os::KernelClock) -> Result<(), String> {
    let bound = getres(id).accuracy.as_nanos() as u64;
    let before = crate::os::kernel_nanos(kernel).unwrap_or(0);
    let ours = gettime(id).as_nanos() as u64;
    let after = crate::os::kernel_nanos(kernel).unwrap_or(0);
    if ours + bound < before || ours > after + bound {
        return Err(format!(
            "{id:?} {ours} read between the kernel's {before} and {after}, bound {bound} ns"
        ));
    }
    Ok(())
}

/// A keeper process, killed when dropped.
struct KeeperProcess {
    child: Child,
}

impl KeeperProcess {
    /// Starts a keeper of the page at `path`, and waits for its first
    /// publish (its own: a dead keeper's page stays in the file's place
    /// until the new one renames its own over it).
    fn start(path: &Path) -> KeeperProcess {
        KeeperProcess::start_with(path, &[])
    }

    /// [`start`](KeeperProcess::start), with `env` too.
    fn start_with(path: &Path, env: &[(&str, &str)]) -> KeeperProcess {
        let page = path.to_string_lossy();
        let env: Vec<(&str, &str)> = [(PAGE_PATH, page.as_ref())]
            .into_iter()
            .chain(env.iter().copied())
            .collect();
        let child = child_half(KEEPER_HALF, "keep", &env)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the keeper half runs");
        let pid = child.id();
        let keeper = KeeperProcess { child };
        let limit = Instant::now() + Duration::from_secs(10);
        while !(published(path) && keeper_pid(path) == Some(pid)) {
            assert!(
                Instant::now() < limit,
                "the keeper published nothing in 10 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        keeper
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }
}

impl Drop for KeeperProcess {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pid of the keeper that wrote the page at `path`, read as bytes.
fn keeper_pid(path: &Path) -> Option<u32> {
    let at = std::mem::offset_of!(super::layout::Header, keeper_pid);
    let bytes = fs::read(path).ok()?;
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// A fresh directory for a page, removed when dropped.
struct PageDir(PathBuf);

impl PageDir {
    fn new(name: &str) -> PageDir {
        let dir =
            std::env::temp_dir().join(format!("timehands-page-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a temporary directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("its mode");
        PageDir(dir)
    }

    fn page(&self) -> PathBuf {
        self.0.join("page")
    }
}

impl Drop for PageDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A reader of the page at `path` that reads for `ms` and expects `expect`
/// (see [`reader_half`]), started.
fn reader(path: &Path, plan: &str) -> Child {
    reader_command(path, plan)
        .spawn()
        .expect("the reader half runs")
}

fn reader_command(path: &Path, plan: &str) -> Command {
    let mut command = child_half(
        READER_HALF,
        plan,
        &[("TIMEHANDS_PAGE", &path.to_string_lossy())],
    );
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// Waits for `reader` and asserts it passed.
fn assert_passes(reader: Child, what: &str) {
    let output = reader.wait_with_output().expect("the reader half ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("CHILD OK"),
        "{what}: {}\n{stdout}\n{stderr}",
        output.status
    );
    println!(
        "{what}: {}",
        stdout
            .lines()
            .find(|l| l.contains("reads"))
            .unwrap_or_default()
    );
}

#[test]
fn a_process_reads_the_keepers_page_and_so_does_its_forked_child() {
    let dir = PageDir::new("reads");
    let _keeper = KeeperProcess::start(&dir.page());
    assert_passes(reader(&dir.page(), "read:300:page"), "a reader");
    assert_passes(reader(&dir.page(), "read:300:page:fork"), "a forked child");
}

#[test]
fn readers_of_the_page_take_the_keepers_bounds_and_ask_chronyd_nothing() {
    let chronyd = crate::host::bounds::fake_chronyd::FakeChronyd::start();
    let address = chronyd.address.to_string();
    let dir = PageDir::new("bounds");
    let _keeper = KeeperProcess::start_with(&dir.page(), &[("TIMEHANDS_CHRONYD", &address)]);
    let readers: Vec<Child> = (0..3)
        .map(|_| {
            let mut reader = reader_command(&dir.page(), "bounds");
            reader.env("TIMEHANDS_CHRONYD", &address);
            reader.spawn().expect("the reader half runs")
        })
        .collect();
    for reader in readers {
        assert_passes(reader, "a reader of the keeper's bounds");
    }
    let peers = chronyd.peers();
    assert_eq!(
        peers.len(),
        1,
        "only the keeper asks chronyd, not its three readers: {peers:?}"
    );
}

#[test]
fn without_a_page_a_process_keeps_its_own_clock() {
    let dir = PageDir::new("none");
    assert_passes(reader(&dir.page(), "read:100:No such file"), "no page");
}

#[test]
fn readers_leave_a_killed_keepers_page_and_a_restarted_keeper_serves_new_ones() {
    let dir = PageDir::new("killed");
    let keeper = KeeperProcess::start(&dir.page());
    let during = reader(&dir.page(), "read:600:left");
    std::thread::sleep(Duration::from_millis(150));
    keeper.signal(libc::SIGKILL);
    assert_passes(during, "a reader across the keeper's SIGKILL");
    assert_passes(
        reader(&dir.page(), "read:100:stale"),
        "a reader of the dead keeper's page",
    );
    drop(keeper);
    let _restarted = KeeperProcess::start(&dir.page());
    assert_passes(
        reader(&dir.page(), "read:200:page"),
        "a reader of the restarted keeper",
    );
}

#[test]
fn readers_through_a_keeper_stopped_for_ten_seconds_leave_it_without_a_step_back() {
    let dir = PageDir::new("stopped");
    let keeper = KeeperProcess::start(&dir.page());
    let during = reader(&dir.page(), "read:10500:left");
    std::thread::sleep(Duration::from_millis(200));
    keeper.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(10));
    keeper.signal(libc::SIGCONT);
    assert_passes(during, "a reader across a 10 s SIGSTOP of the keeper");
    let limit = Instant::now() + Duration::from_secs(5);
    while !published(&dir.page()) && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_passes(
        reader(&dir.page(), "read:200:page"),
        "a reader after SIGCONT",
    );
}

/// A signal whose handler reads every clock, raised where a process's
/// first read maps the keeper's page, and where a read leaves the page of a
/// keeper stopped (its own clock taken over, the readers not yet moved):
/// every handler returns, and every read is within its stated bound and
/// never back (`process_tests/signals.rs`).
#[test]
#[cfg_attr(miri, ignore = "runs processes")]
fn a_signal_handler_reads_every_clock_where_a_reader_maps_the_page_and_where_it_leaves_it() {
    let dir = PageDir::new("signals");
    let keeper = KeeperProcess::start(&dir.page());
    let page = dir.page().to_string_lossy().into_owned();
    let [mapping, leaving] = signals::PAGE_POINTS;
    assert_half_passes(
        PROCESS_CHILD,
        "signal:page",
        &[(SIGNAL_AT, mapping), ("TIMEHANDS_PAGE", &page)],
    );
    let reading = child_half(
        PROCESS_CHILD,
        "signal:page",
        &[(SIGNAL_AT, leaving), ("TIMEHANDS_PAGE", &page)],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("the child half runs");
    // Stopped once the child has mapped the page (however slow its start),
    // so that it reads the page before it leaves it.
    let maps = format!("/proc/{}/maps", reading.id());
    let limit = Instant::now() + Duration::from_secs(10);
    while !fs::read_to_string(&maps).is_ok_and(|maps| maps.contains(page.as_str()))
        && Instant::now() < limit
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    keeper.signal(libc::SIGSTOP);
    assert_passes(
        reading,
        "a handler where a reader leaves a stopped keeper's page",
    );
}

/// A reader held up at its check of the page, between its counter read
/// and its second reads of the kernel's clocks, at every try (a handler
/// that spins 500 µs there, as a preemption under load would): both
/// brackets widen, and the page, which is good, is read. (Where Boottime
/// was read after the Monotonic bracket, a preemption between the two had
/// no bracket to widen: a test under load refused its keeper's page so,
/// at a point the check no longer has.)
#[test]
fn a_reader_held_up_in_its_check_of_the_page_reads_it() {
    let dir = PageDir::new("held-up");
    let _keeper = KeeperProcess::start(&dir.page());
    let mut command = child_half(
        READER_HALF,
        "held-up",
        &[
            ("TIMEHANDS_PAGE", &dir.page().to_string_lossy()),
            (
                SIGNAL_AT,
                "page: checked count read, the kernel's clocks not",
            ),
        ],
    );
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    assert_passes(
        command.spawn().expect("the reader half runs"),
        "a reader held up in its check",
    );
}

/// The keeper's page with its version changed, written whole under
/// another name and renamed over it, as a keeper of another version would.
fn replace_with_version(path: &Path, version: u32) {
    let mut bytes = fs::read(path).expect("the page reads");
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    let fresh = path.with_extension("other");
    fs::write(&fresh, &bytes).expect("the new page is written");
    fs::set_permissions(&fresh, fs::Permissions::from_mode(0o644)).expect("its mode");
    fs::rename(&fresh, path).expect("renamed over the page");
}

#[test]
fn a_keeper_of_a_newer_version_is_refused_and_readers_of_the_old_page_leave_it() {
    let dir = PageDir::new("version");
    let keeper = KeeperProcess::start(&dir.page());
    let during = reader(&dir.page(), "read:500:left");
    std::thread::sleep(Duration::from_millis(150));
    // The old keeper stops, and one of a newer layout takes the path.
    keeper.signal(libc::SIGKILL);
    replace_with_version(&dir.page(), super::layout::VERSION + 1);
    assert_passes(during, "a reader of the old page");
    let refusal = Refusal::Version(super::layout::VERSION + 1).to_string();
    assert_passes(
        reader(&dir.page(), &format!("read:100:{refusal}")),
        "a reader of the newer page",
    );
}

#[test]
fn a_truncated_page_or_one_writable_by_others_is_refused() {
    let dir = PageDir::new("spoiled");
    let keeper = KeeperProcess::start(&dir.page());
    fs::set_permissions(dir.page(), fs::Permissions::from_mode(0o666)).expect("chmod");
    assert_passes(
        reader(
            &dir.page(),
            &format!("read:50:{}", Refusal::WritableByOthers),
        ),
        "a page writable by others",
    );
    fs::set_permissions(dir.page(), fs::Permissions::from_mode(0o644)).expect("chmod");
    fs::set_permissions(&dir.0, fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_passes(
        reader(
            &dir.page(),
            &format!("read:50:{}", Refusal::DirectoryWritableByOthers),
        ),
        "a page in a directory writable by others",
    );
    fs::set_permissions(&dir.0, fs::Permissions::from_mode(0o755)).expect("chmod");
    // Truncated, as a new file renamed over it (one truncated in place
    // would fault its mappers: only the keeper's user can do that, as it
    // alone can write wrong time).
    drop(keeper);
    let short = dir.0.join("short");
    fs::write(&short, b"timehand").expect("a short page");
    fs::set_permissions(&short, fs::Permissions::from_mode(0o644)).expect("its mode");
    fs::rename(&short, dir.page()).expect("renamed over the page");
    assert_passes(
        reader(&dir.page(), &format!("read:50:{}", Refusal::Short(8))),
        "a truncated page",
    );
}

/// Whether this process may change owners and namespaces; else why the
/// test that needs it passes without it.
fn root() -> Result<(), String> {
    // SAFETY: geteuid only reads.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err("not root".to_string())
    }
}

#[test]
fn a_page_of_another_owner_is_refused_and_others_cannot_write_the_page() {
    if let Err(why) = root() {
        println!("skipped: {why}: chown and setuid need root");
        return;
    }
    let dir = PageDir::new("owner");
    let _keeper = KeeperProcess::start(&dir.page());
    // Another user cannot open the page to write it, nor make a file in its
    // directory.
    let page = std::ffi::CString::new(dir.page().to_string_lossy().as_bytes()).unwrap();
    let beside = std::ffi::CString::new(dir.0.join("beside").to_string_lossy().as_bytes()).unwrap();
    let nobody = crate::host::process_tests::fork_and(|| {
        // SAFETY: in the forked child only: drops to nobody, then tries.
        unsafe {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err("cannot become nobody".to_string());
            }
            if libc::open(page.as_ptr(), libc::O_RDWR) >= 0 {
                return Err("nobody opened the page for writing".to_string());
            }
            if libc::open(beside.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) >= 0 {
                return Err("nobody made a file beside the page".to_string());
            }
        }
        Ok(())
    });
    crate::host::process_tests::verdict(nobody).expect("nobody writes the page");
    // A page owned by neither its directory's owner nor root.
    std::os::unix::fs::chown(dir.page(), Some(65534), None).expect("chown");
    let refusal = Refusal::Owner {
        file: 65534,
        directory: 0,
    };
    assert_passes(
        reader(&dir.page(), &format!("read:50:{refusal}")),
        "a page of another owner",
    );
}

/// `command` run under `unshare` with `flags`, or why it cannot be here.
fn unshared(flags: &[&str], command: &Command) -> Result<Command, String> {
    root()?;
    let probe = Command::new("unshare")
        .args(flags)
        .arg("true")
        .status()
        .map_err(|e| format!("unshare: {e}"))?;
    if !probe.success() {
        return Err(format!("unshare {flags:?} is refused here ({probe})"));
    }
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(flags)
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    wrapped.stdout(Stdio::piped()).stderr(Stdio::piped());
    Ok(wrapped)
}

#[test]
fn a_process_in_a_time_namespace_keeps_its_own_clock() {
    let dir = PageDir::new("timens");
    let _keeper = KeeperProcess::start(&dir.page());
    let plan = "read:100:beyond its bound";
    let command = match unshared(
        &["--time", "--fork", "--monotonic=86400", "--boottime=86400"],
        &reader_command(&dir.page(), plan),
    ) {
        Ok(command) => command,
        Err(why) => return println!("skipped: {why}"),
    };
    let mut command = command;
    assert_passes(
        command.spawn().expect("unshare runs"),
        "a reader in a time namespace",
    );
}

#[test]
fn a_process_whose_page_directory_is_bind_mounted_read_only_reads_it() {
    let dir = PageDir::new("bind");
    let _keeper = KeeperProcess::start(&dir.page());
    let reader = reader_command(&dir.page(), "read:200:page");
    let d = dir.0.to_string_lossy();
    // In a mount namespace of its own, the directory bind-mounted onto
    // itself read-only, as a container mounts the host's.
    let mut script = Command::new("sh");
    script.arg("-c").arg(format!(
        "mount --bind -o ro '{d}' '{d}' && exec \"$0\" \"$@\""
    ));
    script.arg(reader.get_program()).args(reader.get_args());
    for (key, value) in reader.get_envs() {
        if let Some(value) = value {
            script.env(key, value);
        }
    }
    let mut command = match unshared(&["--mount", "--propagation", "private"], &script) {
        Ok(command) => command,
        Err(why) => return println!("skipped: {why}"),
    };
    assert_passes(
        command.spawn().expect("unshare runs"),
        "a reader behind a read-only bind mount",
    );
}

#[test]
fn a_second_keeper_of_a_directory_is_refused_with_the_reason() {
    let dir = PageDir::new("second");
    let _first = KeeperProcess::start(&dir.page());
    let second = Keeper::create(&dir.page())
        .err()
        .expect("a second keeper is refused");
    assert_eq!(second.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(
        second.to_string().contains("another keeper keeps"),
        "{second}"
    );
}
