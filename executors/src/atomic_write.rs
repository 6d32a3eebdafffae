//! Replacing a file's content so that readers see the old file or the new one, never a
//! mix, and a failure (disk full, crash) leaves the old file intact.
//!
//! Write a temp file in the same directory, fsync it, rename it over the target, fsync the
//! directory. An existing file keeps its permission bits; a new file gets
//! [`NEW_FILE_MODE`]. A symlink is followed: its target is replaced, the link stays.

use std::fs::{self, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::ExecError;

/// Permission bits of files cmdr creates (what a 022 umask gives).
pub const NEW_FILE_MODE: u32 = 0o644;

/// Writes `content` to `path` atomically; creates missing parent directories when
/// `create_dirs`. Blocking: call from a blocking thread.
pub fn write_atomic(path: &Path, content: &[u8], create_dirs: bool) -> Result<(), ExecError> {
    let target = resolve_symlink(path);
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        if !create_dirs {
            return Err(ExecError::InvalidInput(format!(
                "parent directory {} does not exist (set create_dirs to create it)",
                parent.display()
            )));
        }
        fs::create_dir_all(&parent).map_err(|e| ExecError::io(&parent, e))?;
    }
    let existing = match fs::metadata(&target) {
        Ok(meta) if meta.is_dir() => {
            return Err(ExecError::InvalidInput(format!(
                "{} is a directory",
                target.display()
            )))
        }
        Ok(meta) => Some(meta.permissions()),
        Err(_) => None,
    };
    let io = |e| ExecError::io(&target, e);
    let mut tmp = tempfile::Builder::new()
        .prefix(".cmdr-write-")
        .tempfile_in(&parent)
        .map_err(|e| ExecError::io(&parent, e))?;
    tmp.write_all(content).map_err(io)?;
    let mode = existing.unwrap_or_else(|| Permissions::from_mode(NEW_FILE_MODE));
    tmp.as_file().set_permissions(mode).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(&target).map_err(|e| io(e.error))?;
    sync_dir(&parent);
    Ok(())
}

/// The path to write for `path`: a symlink's target (even a dangling one), else `path`.
fn resolve_symlink(path: &Path) -> PathBuf {
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return path.to_path_buf();
    }
    if let Ok(real) = fs::canonicalize(path) {
        return real;
    }
    match fs::read_link(path) {
        Ok(link) if link.is_absolute() => link,
        Ok(link) => path.parent().map(|p| p.join(&link)).unwrap_or(link),
        Err(_) => path.to_path_buf(),
    }
}

/// Makes the rename durable. Best effort: some filesystems refuse to fsync directories.
fn sync_dir(dir: &Path) {
    if let Err(e) = fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::debug!(dir = %dir.display(), "directory fsync failed: {e}");
    }
}
