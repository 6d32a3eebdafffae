//! [`Session`]: a conversation as the loop needs it — its messages, the shell's working
//! directory, the process scope its commands run in, and where the model stopped reading
//! each of its processes ([`ReadPositions`]).

use std::collections::HashMap;
use std::path::PathBuf;

use cmdr_executors::Scope;

use super::Message;

/// A conversation as the loop needs it. The working directory carries over from one
/// command to the next, like a terminal; the processes its commands start belong to
/// `scope` and outlive the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Every message so far, oldest first.
    pub messages: Vec<Message>,
    /// Where the next command starts.
    pub cwd: PathBuf,
    /// The scope every command of the loop runs in (docs/processes.md, "Scopes"):
    /// `conversation:<id>` for a saved conversation, a chat's own scope otherwise.
    pub scope: Scope,
    /// Where the model stopped reading each process.
    pub reads: ReadPositions,
}

impl Session {
    /// An empty conversation whose commands start in `cwd`, in a scope of its own
    /// ([`crate::scopes::unsaved_chat`]).
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            messages: Vec::new(),
            cwd: cwd.into(),
            scope: crate::scopes::unsaved_chat(),
            reads: ReadPositions::default(),
        }
    }

    /// The same session with its commands run in `scope`.
    #[must_use]
    pub fn in_scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }
}

/// The model's own read position in each process's output (docs/contract.md §10: an `offset` left
/// out means "where this reader last stopped" — the loop is a reader of its own, so a
/// person reading or typing into the same process in the web UI never hides output from
/// the model). Keyed by process id; a process the model never read starts at 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadPositions(HashMap<String, u64>);

impl ReadPositions {
    /// The offset of the first byte of `process_id`'s output the model has not seen.
    pub fn get(&self, process_id: &str) -> u64 {
        self.0.get(process_id).copied().unwrap_or(0)
    }

    /// The model has now seen `process_id`'s output up to `next_offset`.
    pub fn set(&mut self, process_id: &str, next_offset: u64) {
        self.0.insert(process_id.to_owned(), next_offset);
    }

    /// `process_id` is gone (`PROCESS_NOT_FOUND`): nothing to remember.
    pub fn forget(&mut self, process_id: &str) {
        self.0.remove(process_id);
    }

    /// Nothing remembered.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
