//! [`ConversationReads`]: where the model of each conversation stopped reading its
//! processes, kept between runs. In memory only, like the processes themselves: both are
//! gone when cmdr stops, and a conversation's are dropped when it is archived.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::agent::ReadPositions;

/// The model's read positions of every conversation that has processes.
#[derive(Debug, Default)]
pub struct ConversationReads(Mutex<HashMap<String, ReadPositions>>);

impl ConversationReads {
    /// The positions of `conversation_id` (empty when none are kept).
    pub fn load(&self, conversation_id: &str) -> ReadPositions {
        self.map().get(conversation_id).cloned().unwrap_or_default()
    }

    /// Keeps `reads` for the next run of `conversation_id`.
    pub fn save(&self, conversation_id: &str, reads: ReadPositions) {
        let mut map = self.map();
        if reads.is_empty() {
            map.remove(conversation_id);
        } else {
            map.insert(conversation_id.to_owned(), reads);
        }
    }

    /// Drops the positions of `conversation_id` (its processes are gone).
    pub fn forget(&self, conversation_id: &str) {
        self.map().remove(conversation_id);
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, ReadPositions>> {
        // Every update is a single insert or remove: a panic elsewhere cannot leave the
        // map half-written.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
