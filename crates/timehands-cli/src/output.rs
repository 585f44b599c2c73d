//! Where the tools write: standard output, and files checked before any
//! measurement starts, so that a path that cannot be written costs the user
//! no wait, and named in the one line of error when it fails.

use std::fs;
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

/// A file to be written at the end of a run, created (empty) now.
pub struct OutFile {
    path: PathBuf,
}

impl OutFile {
    /// Creates `path` (truncating it), or says why it cannot be written.
    pub fn create(path: &Path) -> anyhow::Result<OutFile> {
        fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(OutFile {
            path: path.to_path_buf(),
        })
    }

    /// Writes the file's contents.
    pub fn write(&self, contents: &str) -> anyhow::Result<()> {
        fs::write(&self.path, contents)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// A directory to write into, created now (with its parents) if missing.
pub fn create_dir(dir: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the directory {}", dir.display()))
}

/// Writes `text` to standard output. A reader that stopped early (`| head`)
/// is not an error: the rest of the output is dropped, as a C tool killed by
/// SIGPIPE drops it. Any other failure (a full disk) is, with the reason,
/// where `print!` would panic.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        written => written.context("cannot write to standard output"),
    }
}

/// Prints `document` as one JSON document when `json` is set, else the text
/// that `text` makes of it.
pub fn print_json_or_text<T: Serialize>(
    json: bool,
    document: &T,
    text: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    if json {
        print(&format!("{}\n", serde_json::to_string_pretty(document)?))
    } else {
        print(&text(document))
    }
}
