//! Files the tools write: checked before any measurement starts, so that a
//! path that cannot be written costs the user no wait, and named in the one
//! line of error when it fails.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

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
