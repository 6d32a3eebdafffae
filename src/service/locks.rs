//! The per-conversation run lock: one run at a time per conversation, never blocking
//! other conversations. In memory, per process.

use std::sync::Arc;

use dashmap::DashMap;

/// The conversations with a run in progress.
#[derive(Debug, Clone, Default)]
pub struct RunLocks {
    busy: Arc<DashMap<String, ()>>,
}

/// `conversation_id` already has a run in progress.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a run is already in progress on conversation '{0}'")]
pub struct Busy(pub String);

/// Holds a conversation's lock; dropping it (on every path: success, error, abort,
/// panic unwinding) releases it.
#[derive(Debug)]
pub struct RunGuard {
    busy: Arc<DashMap<String, ()>>,
    conversation_id: String,
}

impl RunLocks {
    /// No conversation is busy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the lock of `conversation_id` at once, or fails with [`Busy`].
    pub fn try_lock(&self, conversation_id: &str) -> Result<RunGuard, Busy> {
        use dashmap::mapref::entry::Entry;
        match self.busy.entry(conversation_id.to_owned()) {
            Entry::Occupied(_) => Err(Busy(conversation_id.to_owned())),
            Entry::Vacant(slot) => {
                slot.insert(());
                Ok(RunGuard {
                    busy: Arc::clone(&self.busy),
                    conversation_id: conversation_id.to_owned(),
                })
            }
        }
    }

    /// Whether `conversation_id` has a run in progress.
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
        assert_eq!(locks.try_lock("a").err(), Some(Busy("a".to_owned())));
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
}
