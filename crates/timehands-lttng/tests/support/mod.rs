//! An LTTng session of its own for the test and the benchmark: the tools
//! probed, `lttng-sessiond --no-kernel` started as a child with the plugin,
//! under an `LTTNG_HOME` in a temporary directory (so it uses its own sockets
//! and shared memory, and clashes with no other session daemon), the traced C
//! programs of `tests/c` built there with their tracepoint from `lttng-gen-tp`.
//!
//! A session daemon run by root is the system's (its sockets are under
//! /var/run/lttng whatever `LTTNG_HOME` says), so under root every LTTng
//! process started here runs as `nobody` instead.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The tools a session needs, on PATH.
const TOOLS: [&str; 4] = ["lttng-sessiond", "lttng", "lttng-gen-tp", "babeltrace2"];

/// The user and group that LTTng's processes run as when this one is root.
const NOBODY: u32 = 65534;

/// How long the session daemon has to answer `lttng list`.
const SESSIOND_START: Duration = Duration::from_secs(20);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Why LTTng cannot be run here, if it cannot: a tool missing from PATH, or a
/// C compiler that finds no `<lttng/tracepoint.h>`.
pub fn missing_tools() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let missing: Vec<&str> = TOOLS
        .into_iter()
        .filter(|tool| !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} not on PATH (apt-get install lttng-tools liblttng-ust-dev babeltrace2)",
            missing.join(", ")
        ));
    }
    let probe = Command::new(c_compiler())
        .args(["-x", "c", "-E", "-o", "/dev/null", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut cc| {
            use std::io::Write as _;
            let mut stdin = cc.stdin.take().expect("stdin is piped");
            stdin.write_all(b"#include <lttng/tracepoint.h>\n")?;
            drop(stdin);
            cc.wait()
        });
    match probe {
        Ok(status) if status.success() => None,
        Ok(_) => Some("the C compiler finds no <lttng/tracepoint.h> (liblttng-ust-dev)".into()),
        Err(e) => Some(format!("no C compiler ({:?}): {e}", c_compiler())),
    }
}

/// `$CC`, or `cc`.
fn c_compiler() -> OsString {
    std::env::var_os("CC").unwrap_or_else(|| OsString::from("cc"))
}

/// The plugin cargo built beside the running executable: a test's
/// (`target/<profile>/deps`) or an example's (`target/<profile>/examples`).
pub fn plugin() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("no executable path: {e}"))?;
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("libtimehands_lttng.so"))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            format!(
                "libtimehands_lttng.so is not beside {}: cargo builds it with this crate",
                exe.display()
            )
        })
}

/// A running session daemon of its own, stopped when dropped.
pub struct Lttng {
    home: TempDir,
    plugin: PathBuf,
    sessiond: Child,
}

impl Lttng {
    /// Starts `lttng-sessiond --no-kernel` with `plugin` as its clock, and
    /// waits until it answers.
    pub fn start(plugin: &Path) -> Result<Lttng, String> {
        let home = tempfile::Builder::new()
            .prefix("timehands-lttng-")
            .tempdir()
            .map_err(|e| format!("no temporary directory: {e}"))?;
        if running_as_root() {
            std::os::unix::fs::chown(home.path(), Some(NOBODY), Some(NOBODY))
                .map_err(|e| format!("cannot give {} to nobody: {e}", home.path().display()))?;
        }
        // A copy that the daemon's user can read, wherever the build is.
        let copy = home.path().join("libtimehands_lttng.so");
        std::fs::copy(plugin, &copy)
            .map_err(|e| format!("cannot copy {}: {e}", plugin.display()))?;
        let log = std::fs::File::create(home.path().join("sessiond.log"))
            .map_err(|e| format!("cannot create the daemon's log: {e}"))?;
        let mut lttng = Lttng {
            sessiond: Command::new("lttng-sessiond")
                .arg("--no-kernel")
                .lttng_process(home.path(), Some(&copy))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("lttng-sessiond could not be started: {e}"))?,
            home,
            plugin: copy,
        };
        let start = Instant::now();
        while lttng.lttng(&["list"]).is_err() {
            if let Ok(Some(status)) = lttng.sessiond.try_wait() {
                return Err(format!("lttng-sessiond exited ({status}): {}", lttng.log()));
            }
            if start.elapsed() > SESSIOND_START {
                return Err(format!(
                    "lttng-sessiond did not answer in {SESSIOND_START:?}: {}",
                    lttng.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(lttng)
    }

    /// The daemon's stderr so far.
    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("sessiond.log")).unwrap_or_default()
    }

    /// The private directory: `LTTNG_HOME`, the programs, the traces.
    pub fn dir(&self) -> &Path {
        self.home.path()
    }

    /// Destroys `session`, which stops it and waits for its trace to be
    /// written. The client's own wait sometimes fails ("Failed to wait for
    /// the completion of the destruction", once in a CI run) while the
    /// session daemon goes on to finish it: then the session's end is
    /// waited for here, until `lttng list` no longer knows it (5 s at most).
    pub fn destroy(&self, session: &str) -> Result<(), String> {
        let Err(why) = self.lttng(&["destroy", session]) else {
            return Ok(());
        };
        if !why.contains("Failed to wait for the completion") {
            return Err(why);
        }
        let limit = Instant::now() + Duration::from_secs(5);
        while self.lttng(&["list", session]).is_ok() {
            if Instant::now() > limit {
                return Err(format!("{why}; the session was still there 5 s on"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Runs `lttng ARGS`, which must succeed.
    pub fn lttng(&self, args: &[&str]) -> Result<String, String> {
        succeed(
            Command::new("lttng")
                .args(args)
                .lttng_process(self.dir(), None),
        )
    }

    /// Builds `tests/c/SOURCE` with the tracepoint of `tests/c/tp.tp`, into
    /// this session's directory; returns the program.
    pub fn build(&self, source: &str) -> Result<PathBuf, String> {
        let dir = self.dir();
        let c = crate_dir().join("tests/c");
        for file in [source, "tp.tp"] {
            std::fs::copy(c.join(file), dir.join(file))
                .map_err(|e| format!("cannot copy {file}: {e}"))?;
        }
        succeed(
            Command::new("lttng-gen-tp")
                .args(["tp.tp", "-o", "tp.h", "-o", "tp.c"])
                .current_dir(dir),
        )?;
        let program = dir.join(source.trim_end_matches(".c"));
        succeed(
            Command::new(c_compiler())
                .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I."])
                .args([source, "tp.c", "-o"])
                .arg(&program)
                .args(["-llttng-ust", "-ldl", "-lpthread"])
                .current_dir(dir),
        )?;
        Ok(program)
    }

    /// Runs `program ARGS` as a traced program, with the plugin or with
    /// LTTng's own clock; returns its stdout.
    pub fn trace(&self, program: &Path, args: &[&str], plugin: bool) -> Result<String, String> {
        succeed(
            Command::new(program)
                .args(args)
                .lttng_process(self.dir(), plugin.then_some(&self.plugin)),
        )
    }
}

impl Drop for Lttng {
    fn drop(&mut self) {
        // SIGTERM, which the daemon answers by stopping its consumer daemons
        // too; the pid is that of our own child, not yet waited for.
        let pid = self.sessiond.id() as libc::pid_t;
        // SAFETY: kill(2) has no memory effects.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let _ = self.sessiond.wait();
    }
}

/// Runs `babeltrace2 ARGS`; returns its stdout.
pub fn babeltrace2<A: AsRef<OsStr>>(args: impl IntoIterator<Item = A>) -> Result<String, String> {
    succeed(Command::new("babeltrace2").args(args))
}

/// Runs `command`, which must succeed; returns its stdout.
fn succeed(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("{command:?} could not be run: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{command:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn running_as_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and has no memory effects.
    unsafe { libc::geteuid() == 0 }
}

trait LttngProcess {
    /// Makes the command one of this session's: `LTTNG_HOME` its directory,
    /// `LTTNG_UST_CLOCK_PLUGIN` the plugin or unset (whatever this process's
    /// environment says), and run as `nobody` when this process is root (see
    /// the module).
    fn lttng_process(&mut self, home: &Path, plugin: Option<&PathBuf>) -> &mut Self;
}

impl LttngProcess for Command {
    fn lttng_process(&mut self, home: &Path, plugin: Option<&PathBuf>) -> &mut Self {
        self.env("LTTNG_HOME", home);
        match plugin {
            Some(plugin) => self.env("LTTNG_UST_CLOCK_PLUGIN", plugin),
            None => self.env_remove("LTTNG_UST_CLOCK_PLUGIN"),
        };
        if running_as_root() {
            self.uid(NOBODY).gid(NOBODY);
        }
        self
    }
}
