//! The process scopes of the front doors (docs/processes.md, "Scopes"): one name per
//! owner, so every front door that addresses the same owner's processes agrees on it.

use cmdr_executors::Scope;

/// The REST API's scope (`http`): one for the token holder.
pub fn http() -> Scope {
    Scope::new("http")
}

/// A conversation's scope (`conversation:<id>`): its agent runs, and REST with
/// `?conversation=<id>`.
pub fn conversation(id: &str) -> Scope {
    Scope::new(format!("conversation:{id}"))
}

/// An MCP session's scope (`mcp:<session id>`); ends when the session does.
pub fn mcp(session: &str) -> Scope {
    Scope::new(format!("mcp:{session}"))
}

/// A NATS producer's scope on a worker (`nats:<producer>`).
pub fn nats(producer: &str) -> Scope {
    Scope::new(format!("nats:{producer}"))
}

/// The scope of a chat whose conversation is not saved (`cmdr chat --ephemeral`, or a
/// [`crate::agent::Session`] made without a conversation): `chat:<fresh uuid>`, a scope
/// of its own that nothing else can address.
pub fn unsaved_chat() -> Scope {
    Scope::new(format!("chat:{}", uuid::Uuid::new_v4().simple()))
}
