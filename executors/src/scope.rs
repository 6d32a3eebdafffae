//! [`Scope`]: who a process belongs to (docs/processes.md, "Scopes").
//!
//! Every command runs in a scope ([`crate::Registry::execute_in`]); the processes and
//! shell sessions it starts belong to that scope, and only commands of the same scope see
//! them: to any other scope a process id is `PROCESS_NOT_FOUND`, exactly like an unknown
//! one. A scope has its own limit on running processes, and
//! [`crate::Registry::end_scope`] stops every process of one scope.
//!
//! The front doors name their scopes: `""` (the default: `cmdr exec`, and library callers
//! that do not care), `http`, `mcp:<session id>`, `conversation:<id>`, `nats:<producer>`.

use std::fmt;
use std::sync::Arc;

/// The owner of a set of processes. Cheap to clone; compared by name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scope(Arc<str>);

impl Scope {
    /// The scope called `name`.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }

    /// Its name (`""` for the default scope).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Scope {
    /// The registry's default scope, `""`.
    fn default() -> Self {
        Self(Arc::from(""))
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scope({:?})", self.as_str())
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(default)")
        } else {
            f.write_str(&self.0)
        }
    }
}
