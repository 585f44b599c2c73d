//! The keeper section's processes on Linux x86_64: the keeper, the readers
//! with and without its page, and what the machine spent on each.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{KEEPER_ENV, Outcome, READER_ENV, Row};
use crate::child_line::field;

/// Reading processes at once.
const PROCESSES: [usize; 3] = [1, 10, 100];

/// Runs the section (`quick`: 1 and 10 readers, short windows); `None`
/// where it cannot run.
pub fn run(quick: bool, fresh_processes: u64) -> Option<Outcome> {
    let exe = std::env::current_exe().ok()?;
    let dir = std::env::temp_dir().join(format!("peer-bench-keeper-{}", std::process::id()));
    let page = dir.join("page");
    let mut keeper = Keeper::start(&exe, &page)?;
    let window_ms = if quick { 300 } else { 2000 };
    let counts: &[usize] = if quick { &PROCESSES[..2] } else { &PROCESSES };
    let page_env = page.to_string_lossy().into_owned();
    let rows = counts
        .iter()
        .map(|&processes| {
            eprintln!("keeper: {processes} readers, own clocks, then the page");
            let own = readers(&exe, processes, window_ms, "/nonexistent/timehands/page");
            let before = keeper.sample();
            let on_page = readers(&exe, processes, window_ms, &page_env);
            let after = keeper.sample();
            let seconds = after.at.duration_since(before.at).as_secs_f64();
            Row {
                processes,
                own_cpu_ms: own.iter().map(|r| r.cpu_ms).sum(),
                page_cpu_ms: on_page.iter().map(|r| r.cpu_ms).sum(),
                keeper_cpu_ms: (after.cpu_ns - before.cpu_ns) as f64 / 1e6 / seconds,
                keeper_wakeups: (after.wakeups - before.wakeups) as f64 / seconds,
                on_page: on_page.iter().filter(|r| r.on_page).count(),
                own_now_ns: median(own.iter().map(|r| r.now_ns)),
                page_now_ns: median(on_page.iter().map(|r| r.now_ns)),
            }
        })
        .collect();
    let env = [("TIMEHANDS_PAGE", page_env.as_str())];
    let first_now_ns = exe
        .parent()
        .and_then(|dir| crate::first_call::measure(dir, "timehands", 7, &env).ok())
        .map(|row| row.first_call_ns);
    let fresh = crate::fresh::run(fresh_processes, &env);
    keeper.stop();
    let _ = std::fs::remove_dir_all(&dir);
    Some(Outcome {
        rows,
        first_now_ns,
        fresh,
    })
}

/// What one reader said.
struct Reader {
    cpu_ms: f64,
    now_ns: f64,
    on_page: bool,
}

/// `processes` readers of the page `page` at once, each for `window_ms`.
fn readers(exe: &Path, processes: usize, window_ms: u64, page: &str) -> Vec<Reader> {
    let children: Vec<Child> = (0..processes)
        .filter_map(|_| {
            Command::new(exe)
                .env(READER_ENV, window_ms.to_string())
                .env("TIMEHANDS_PAGE", page)
                .stdout(Stdio::piped())
                .spawn()
                .ok()
        })
        .collect();
    children
        .into_iter()
        .filter_map(|child| {
            let output = child.wait_with_output().ok()?;
            let line = String::from_utf8_lossy(&output.stdout);
            Some(Reader {
                cpu_ms: field(&line, "cpu_ms")?,
                now_ns: field(&line, "now_ns")?,
                on_page: field::<u8>(&line, "on_page")? == 1,
            })
        })
        .collect()
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The keeper child, killed when dropped.
struct Keeper {
    child: Child,
}

/// A moment of the keeper's: its CPU and its wakeups so far.
struct KeeperSample {
    at: Instant,
    cpu_ns: u64,
    wakeups: u64,
}

impl Keeper {
    /// Starts one, and waits for its first publish.
    fn start(exe: &Path, page: &Path) -> Option<Keeper> {
        let child = Command::new(exe)
            .env(KEEPER_ENV, page)
            .env_remove(READER_ENV)
            .spawn()
            .ok()?;
        let keeper = Keeper { child };
        let limit = Instant::now() + Duration::from_secs(10);
        while !timehands::keeper::published(page) {
            if Instant::now() > limit {
                eprintln!("keeper: the keeper published nothing in 10 s: skipped");
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(keeper)
    }

    fn sample(&self) -> KeeperSample {
        let proc = PathBuf::from(format!("/proc/{}", self.child.id()));
        let cpu_ns = std::fs::read_to_string(proc.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let wakeups = std::fs::read_to_string(proc.join("status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find(|l| l.starts_with("voluntary_ctxt_switches"))?
                    .split_whitespace()
                    .last()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        KeeperSample {
            at: Instant::now(),
            cpu_ns,
            wakeups,
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The keeper child: keeps the clock in the page at `path` until killed.
pub fn keeper_child(path: &str) -> ! {
    let keeper = match timehands::keeper::Keeper::create(Path::new(path)) {
        Ok(keeper) => keeper,
        Err(e) => {
            eprintln!("keeper: cannot make the page {path}: {e}");
            std::process::exit(2);
        }
    };
    let told = |keeping: &timehands::keeper::Keeping| {
        if *keeping != timehands::keeper::Keeping::Publishing {
            eprintln!("keeper: {keeping}");
        }
        Ok::<(), std::convert::Infallible>(())
    };
    let Ok(()) = keeper.keep(None, told);
    std::process::exit(0)
}
