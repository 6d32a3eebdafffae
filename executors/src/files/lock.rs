//! Mutations of one file are serialised inside a cmdr process: five `PATCH_FILE`s of the
//! same file at once apply one after the other, each to the result of the one before, so
//! no change is silently lost.
//!
//! A lock is keyed by the file's identity — its directory's device and inode, and its name
//! there — so two spellings of one path (relative and absolute, through a symlinked
//! directory) share it. Held by a blocking file task from before the file is read until
//! after it is replaced. The table only holds files being changed now: an entry goes when
//! its last holder does. (An actor per path would serialise the same way; a lock table
//! needs no task or mailbox per file, and the work already runs on a blocking thread.)

use std::ffi::OsString;
use std::sync::{Arc, LazyLock};

use dashmap::DashMap;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio_util::sync::CancellationToken;

use super::open::Target;
use crate::error::ExecError;

type Key = (u64, u64, OsString);

static LOCKS: LazyLock<DashMap<Key, Arc<Mutex<()>>>> = LazyLock::new(DashMap::new);

/// Holds a file's mutation lock; released (and the table entry removed if nobody else
/// waits) when dropped.
pub(crate) struct FileLock {
    key: Key,
    lock: Arc<Mutex<()>>,
    guard: Option<OwnedMutexGuard<()>>,
}

/// Waits for, then takes, the mutation lock of `target`'s file (first come, first
/// served); `CANCELLED` if the command ended while waiting. Blocking: call from a blocking
/// thread, never from async code.
pub(crate) fn lock(target: &Target, cancel: &CancellationToken) -> Result<FileLock, ExecError> {
    let dir =
        nix::sys::stat::fstat(&target.dir).map_err(|e| ExecError::io(&target.shown, e.into()))?;
    let key = (dir.st_dev, dir.st_ino, target.name.clone());
    let lock = LOCKS.entry(key.clone()).or_default().clone();
    let guard = lock.clone().blocking_lock_owned();
    let held = FileLock {
        key,
        lock,
        guard: Some(guard),
    };
    if cancel.is_cancelled() {
        return Err(ExecError::Cancelled);
    }
    Ok(held)
}

impl Drop for FileLock {
    fn drop(&mut self) {
        self.guard.take();
        // Two references: ours and the table's. Anyone else waiting holds a third.
        LOCKS.remove_if(&self.key, |_, lock| {
            Arc::ptr_eq(lock, &self.lock) && Arc::strong_count(lock) == 2
        });
    }
}

/// The number of files being changed now (for tests and diagnostics).
pub fn files_locked() -> usize {
    LOCKS.len()
}
