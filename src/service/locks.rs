//! The per-conversation run lock: one run at a time per conversation, never blocking
//! other conversations. Two halves: a map in memory (this service's runs), and, for a
//! store other processes can open, a lock file per conversation (`super::lock_file`)
//! that holds across every process on the same database and dies with its holder.

use std::path::PathBuf;
use std::sync::Arc;

use dashmap::DashMap;

use super::lock_file::{FileLock, LockDir, LockFileError};

/// The conversations with a run in progress.
#[derive(Debug, Clone, Default)]
pub struct RunLocks {
    busy: Arc<DashMap<String, ()>>,
    /// Where the cross-process locks live; `None`: this process alone uses the store.
    files: Option<LockDir>,
}

/// `conversation_id` already has a run in progress (here or in another process).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a run is already in progress on conversation '{0}'")]
pub struct Busy(pub String);

/// Why a conversation's lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another run holds it.
    #[error(transparent)]
    Busy(#[from] Busy),
    /// Its lock file could not be made or locked (`STORE_ERROR`).
    #[error("conversation '{conversation_id}': {source}")]
    File {
        /// The conversation.
        conversation_id: String,
        /// What went wrong.
        source: LockFileError,
    },
}

/// Holds a conversation's lock; dropping it (on every path: success, error, abort,
/// panic unwinding) releases it.
#[derive(Debug)]
pub struct RunGuard {
    busy: Arc<DashMap<String, ()>>,
    conversation_id: String,
    /// The cross-process half, released with the guard (or by the kernel, at death).
    file: Option<FileLock>,
}

impl RunLocks {
    /// No conversation is busy; locks hold in this process only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Locks that also hold across processes, through lock files in `dir`.
    pub fn across_processes(dir: PathBuf) -> Self {
        Self {
            busy: Arc::default(),
            files: Some(LockDir::new(dir)),
        }
    }

    /// Takes the lock of `conversation_id` at once, or fails with [`LockError::Busy`]
    /// when a run holds it, in this process or (with a lock directory) another. Blocking
    /// when there is a lock directory (a file is opened): call it off the runtime.
    pub fn try_lock(&self, conversation_id: &str) -> Result<RunGuard, LockError> {
        use dashmap::mapref::entry::Entry;
        let busy = || LockError::Busy(Busy(conversation_id.to_owned()));
        match self.busy.entry(conversation_id.to_owned()) {
            Entry::Occupied(_) => return Err(busy()),
            Entry::Vacant(slot) => {
                slot.insert(());
            }
        }
        // Held in memory from here; dropped on a refusal below, which releases it.
        let mut guard = RunGuard {
            busy: Arc::clone(&self.busy),
            conversation_id: conversation_id.to_owned(),
            file: None,
        };
        if let Some(files) = &self.files {
            guard.file = Some(files.try_lock(conversation_id).map_err(|e| match e {
                LockFileError::Held => busy(),
                source => LockError::File {
                    conversation_id: conversation_id.to_owned(),
                    source,
                },
            })?);
        }
        Ok(guard)
    }

    /// Whether `conversation_id` has a run in progress in this process.
    pub fn is_busy(&self, conversation_id: &str) -> bool {
        self.busy.contains_key(conversation_id)
    }
}

impl RunGuard {
    /// The locked conversation.
    pub fn conversation_id(&self) -> &str {
        &self.conversation_id
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        // The file first: once the map says free, the file is free too.
        drop(self.file.take());
        self.busy.remove(&self.conversation_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_per_conversation_and_released_on_drop() {
        let locks = RunLocks::new();
        let guard = locks.try_lock("a").ok();
        assert!(guard.is_some());
        assert!(matches!(locks.try_lock("a"), Err(LockError::Busy(Busy(id))) if id == "a"));
        assert!(locks.try_lock("b").is_ok(), "other conversations are free");
        drop(guard);
        assert!(!locks.is_busy("a"));
        assert!(locks.try_lock("a").is_ok());
    }

    #[test]
    fn released_when_a_panic_unwinds() {
        let locks = RunLocks::new();
        let inner = locks.clone();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _guard = inner.try_lock("p");
            panic!("step failed");
        }));
        assert!(result.is_err());
        assert!(!locks.is_busy("p"));
    }

    #[test]
    fn across_processes_a_held_file_refuses_another_service() {
        let dir = tempfile::tempdir().unwrap();
        let (one, other) = (
            RunLocks::across_processes(dir.path().to_path_buf()),
            RunLocks::across_processes(dir.path().to_path_buf()),
        );
        let guard = one.try_lock("c").unwrap();
        assert!(matches!(other.try_lock("c"), Err(LockError::Busy(_))));
        assert!(!other.is_busy("c"), "a refused lock leaves no trace");
        drop(guard);
        assert!(other.try_lock("c").is_ok());
    }
}
