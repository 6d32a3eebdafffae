//! File kinds: file commands read and replace regular files only.
//!
//! A FIFO would block a read (or a write) forever, a device could do anything when opened
//! (a tape rewinds, a watchdog arms), a socket cannot be read as a file, and replacing any
//! of them with a regular file (as root, `/dev/null`) would break the system. So the kind
//! is checked from the directory entry (`fstatat`, not following links) *before* anything
//! is opened, and again on the opened file (`fstat`, same inode) to close the gap.

use std::path::Path;

use nix::sys::stat::{FileStat, SFlag};

use crate::error::ExecError;

/// What a mode's file type is, in words; `None` for a regular file.
pub(crate) fn not_regular(mode: u32) -> Option<&'static str> {
    let kind = SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits());
    match kind {
        SFlag::S_IFREG => None,
        SFlag::S_IFDIR => Some("a directory"),
        SFlag::S_IFIFO => Some("a FIFO (named pipe)"),
        SFlag::S_IFSOCK => Some("a socket"),
        SFlag::S_IFCHR => Some("a character device"),
        SFlag::S_IFBLK => Some("a block device"),
        SFlag::S_IFLNK => Some("a symbolic link"),
        _ => Some("not a regular file"),
    }
}

/// `NOT_A_FILE` unless `stat` is a regular file.
pub(crate) fn require_regular(stat: &FileStat, path: &Path) -> Result<(), ExecError> {
    match not_regular(stat.st_mode) {
        None => Ok(()),
        Some(kind) => Err(ExecError::NotAFile {
            path: path.to_path_buf(),
            kind,
            hint: if kind == "a directory" {
                "; use LIST_DIRECTORY"
            } else {
                ""
            },
        }),
    }
}

/// The identity of a file's content as seen at one moment: a later look that differs
/// means someone changed (or replaced) it in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    /// The identity in `stat`.
    pub(crate) fn of(stat: &FileStat) -> Self {
        Self {
            dev: stat.st_dev,
            ino: stat.st_ino,
            size: stat.st_size,
            mtime: (stat.st_mtime, stat.st_mtime_nsec),
            ctime: (stat.st_ctime, stat.st_ctime_nsec),
        }
    }

    /// Whether `stat` is the same inode (content not compared).
    pub(crate) fn same_inode(&self, stat: &FileStat) -> bool {
        self.dev == stat.st_dev && self.ino == stat.st_ino
    }

    /// What differs between `self` (before) and `now`, in words.
    pub(crate) fn change(&self, now: &Identity) -> Option<String> {
        if self.dev != now.dev || self.ino != now.ino {
            return Some("the file was replaced".to_owned());
        }
        if self.size != now.size {
            return Some(format!(
                "its size went from {} to {} bytes",
                self.size, now.size
            ));
        }
        if self.mtime != now.mtime || self.ctime != now.ctime {
            return Some("it was modified".to_owned());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_but_regular_is_named() {
        assert_eq!(not_regular(0o100644), None);
        assert_eq!(not_regular(0o040755), Some("a directory"));
        assert_eq!(not_regular(0o010644), Some("a FIFO (named pipe)"));
        assert_eq!(not_regular(0o020666), Some("a character device"));
        assert_eq!(not_regular(0o060660), Some("a block device"));
        assert_eq!(not_regular(0o140755), Some("a socket"));
        assert_eq!(not_regular(0o120777), Some("a symbolic link"));
    }
}
