//! The cross-process half of the conversation lock: an advisory `flock` on a file per
//! conversation, in a directory next to the database (`Store::lock_dir`), so that every
//! `cmdr` on the same database (`cmdr chat`, `cmdr commands run`, `cmdr serve`,
//! `cmdr mcp`) runs a conversation in one process at a time.
//!
//! - **The kernel releases it**: the lock belongs to the open file, which closes when
//!   the guard is dropped or the holder dies (SIGKILL, OOM), so a dead holder never
//!   holds a conversation. The file is opened close-on-exec, so the shells a run starts
//!   never inherit it (an orphaned `sleep` must not hold its conversation).
//! - **Taken without waiting** (`LOCK_EX | LOCK_NB`): a busy conversation is refused at
//!   once, never queued.
//! - **Named by a hash**: the file is the SHA-256 of the conversation id in hex, so no id
//!   (`../x`, `/`, a 128-character one) can name a path outside the directory.
//! - **Kept**: a lock file is never deleted (deleting a file another process may be
//!   about to lock is a race); it is empty, one per conversation ever run. Its second
//!   run needs no free space to take it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

/// The directory of a database's conversation lock files.
#[derive(Debug, Clone)]
pub struct LockDir {
    dir: PathBuf,
}

/// A conversation's lock file, locked: the lock lasts as long as this value (or the
/// process).
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl Drop for FileLock {
    /// Unlocks before closing. Closing alone is not enough: a child being spawned at
    /// that moment holds a copy of every descriptor until its `execve` (close-on-exec
    /// closes it only then), and a `flock` lives until the last copy closes — so the
    /// conversation would stay locked, for a moment or (a child slow to exec on a busy
    /// machine) longer, after its run said it was done. `LOCK_UN` releases the lock of
    /// the open file whatever copies exist.
    fn drop(&mut self) {
        if let Err(e) = flock(&self.file, FlockOperation::Unlock) {
            tracing::warn!("unlocking a conversation's lock file: {e}");
        }
    }
}

/// Why a conversation's lock file could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockFileError {
    /// Another open file holds the lock: another process (or another service of this
    /// one) runs the conversation.
    #[error("the conversation's lock is held")]
    Held,
    /// The directory or the file could not be made, opened or locked.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The lock file (or its directory).
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
}

impl LockDir {
    /// Lock files in `dir` (made, mode 0700, at the first lock).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The lock file of `conversation_id`.
    pub fn file_of(&self, conversation_id: &str) -> PathBuf {
        self.dir.join(file_name(conversation_id))
    }

    /// Locks `conversation_id`'s file now, or fails with [`LockFileError::Held`].
    /// Blocking (a directory and a file opened): call it off the async runtime.
    pub fn try_lock(&self, conversation_id: &str) -> Result<FileLock, LockFileError> {
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LockFileError::Io { path, source }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io_error(&self.dir))?;
        let path = self.file_of(conversation_id);
        // std opens close-on-exec: the run's shells do not inherit the lock.
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io_error(&path))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(FileLock { file }),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(LockFileError::Held),
            Err(errno) => Err(io_error(&path)(errno.into())),
        }
    }
}

/// The lock file's name: the conversation id's SHA-256, in hex, with `.lock`.
fn file_name(conversation_id: &str) -> String {
    use std::fmt::Write;
    let digest = ring::digest::digest(&ring::digest::SHA256, conversation_id.as_bytes());
    let mut name = String::with_capacity(digest.as_ref().len() * 2 + 5);
    for byte in digest.as_ref() {
        let _ = write!(name, "{byte:02x}");
    }
    name.push_str(".lock");
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the descriptor (what a child being spawned holds until its `execve`)
    /// does not keep the conversation locked once its guard is dropped.
    #[test]
    fn a_copy_of_the_descriptor_does_not_outlive_the_guard() {
        let dir = tempfile::tempdir().unwrap();
        let locks = LockDir::new(dir.path().join("db.locks"));
        let lock = locks.try_lock("c1").unwrap();
        let child_copy = lock.file.try_clone().unwrap();
        drop(lock);
        assert!(
            locks.try_lock("c1").is_ok(),
            "the copy of a dropped guard's descriptor still holds the lock"
        );
        drop(child_copy);
    }

    #[test]
    fn a_second_open_file_is_refused_until_the_first_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let locks = LockDir::new(dir.path().join("db.locks"));
        let first = locks.try_lock("c1").unwrap();
        assert!(matches!(locks.try_lock("c1"), Err(LockFileError::Held)));
        assert!(locks.try_lock("c2").is_ok(), "other conversations are free");
        drop(first);
        assert!(locks.try_lock("c1").is_ok());
    }

    #[test]
    fn file_names_are_hashes_inside_the_directory() {
        let dir = Path::new("/data/cmdr.sqlite3.locks");
        let locks = LockDir::new(dir.to_path_buf());
        for id in ["../../etc/passwd", "/", "a/b", "c1"] {
            let path = locks.file_of(id);
            assert_eq!(path.parent(), Some(dir), "{id}");
            let name = path.file_name().unwrap().to_str().unwrap();
            assert_eq!(name.len(), 64 + ".lock".len(), "{name}");
            assert!(name
                .trim_end_matches(".lock")
                .bytes()
                .all(|b| b.is_ascii_hexdigit()));
        }
        assert_ne!(locks.file_of("a"), locks.file_of("b"));
    }
}
