//! What `latency` hands out while it runs: `-v`'s values (with `-o`'s
//! reduction), and `-F`'s named pipe, which gives each reader the threads'
//! lines as they stand.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;

use super::measure::Sample;

/// cyclictest's `-v` lines, `%8d:%8lu:%8ld` (thread, cycle, value, and with
/// `--smi` the period's SMIs), one per `reduction` wakeups of a thread: the
/// largest of them and its cycle (`-o`).
pub struct VerbosePrinter {
    reduction: u64,
    smi: bool,
    /// Per thread: wakeups since the last line, the largest value, its cycle.
    pending: Vec<(u64, u64, u64)>,
}

impl VerbosePrinter {
    /// A printer for `threads` threads.
    pub fn new(threads: usize, reduction: u64, smi: bool) -> VerbosePrinter {
        VerbosePrinter {
            reduction,
            smi,
            pending: vec![(0, 0, 0); threads],
        }
    }

    /// The lines `samples` make.
    pub fn lines(&mut self, samples: impl Iterator<Item = Sample>) -> String {
        let mut text = String::new();
        for s in samples {
            let (count, max, cycle_of_max) = &mut self.pending[s.thread];
            if s.value > *max {
                *max = s.value;
                *cycle_of_max = s.cycle;
            }
            *count += 1;
            if *count == self.reduction {
                text.push_str(&format!("{:8}:{:8}:{:8}", s.thread, cycle_of_max, max));
                if self.smi {
                    text.push_str(&format!("{:8}", s.smis));
                }
                text.push('\n');
                (*count, *max) = (0, 0);
            }
        }
        text
    }
}

/// `-F`: a named pipe, created before the run and removed after it.
pub struct Fifo {
    path: PathBuf,
}

/// How long the server waits for a reader before it looks again.
const READER_POLL: Duration = Duration::from_millis(50);

impl Fifo {
    /// Creates the named pipe at `path` (replacing a file there), or says
    /// why not.
    pub fn create(path: &Path) -> anyhow::Result<Fifo> {
        let fail = || format!("-F {}: cannot create the named pipe", path.display());
        let _ = std::fs::remove_file(path);
        let name = CString::new(path.as_os_str().as_bytes()).with_context(fail)?;
        // SAFETY: `name` is a valid NUL-terminated path.
        if unsafe { libc::mkfifo(name.as_ptr(), 0o666) } != 0 {
            return Err(std::io::Error::last_os_error()).with_context(fail);
        }
        Ok(Fifo {
            path: path.to_path_buf(),
        })
    }

    /// Until `stop`, writes `lines()` to each reader that opens the pipe.
    pub fn serve(&self, stop: &AtomicBool, lines: impl Fn() -> String) {
        while !stop.load(Ordering::Relaxed) {
            // Without a reader the open fails at once (ENXIO).
            match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.path)
            {
                Ok(mut reader) => {
                    // A reader that left early is no error of the run.
                    let _ = reader.write_all(lines().as_bytes());
                    std::thread::sleep(Duration::from_micros(250));
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => std::thread::sleep(READER_POLL),
            }
        }
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(thread: usize, cycle: u64, value: u64) -> Sample {
        Sample {
            thread,
            cycle,
            value,
            smis: 0,
        }
    }

    #[test]
    fn each_value_is_a_line_in_cyclictests_format() {
        let mut printer = VerbosePrinter::new(2, 1, false);
        let text = printer.lines([sample(0, 0, 73), sample(1, 0, 5)].into_iter());
        assert_eq!(
            text,
            "       0:       0:      73\n       1:       0:       5\n"
        );
    }

    #[test]
    fn a_reduction_prints_the_largest_of_each_run_with_its_cycle() {
        let mut printer = VerbosePrinter::new(1, 3, true);
        let samples = [4, 9, 2, 1, 1, 7].iter().enumerate();
        let text = printer.lines(samples.map(|(cycle, &v)| sample(0, cycle as u64, v)));
        assert_eq!(
            text,
            "       0:       1:       9       0\n       0:       5:       7       0\n"
        );
    }
}
