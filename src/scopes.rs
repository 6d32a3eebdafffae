//! The process scopes of the front doors (docs/processes.md, "Scopes"): one name per
//! owner, so every front door that addresses the same owner's processes agrees on it.

use std::cell::RefCell;

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

/// A NATS producer's scope on a worker (`nats:<producer>`). The last one made on this
/// thread is given again to the same producer: a worker makes one per command, most of
/// them from the same producer, and a new one is two allocations (BENCHMARKS.md, N2b).
pub fn nats(producer: &str) -> Scope {
    thread_local! {
        static LAST: RefCell<Option<(Box<str>, Scope)>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((name, scope)) if **name == *producer => scope.clone(),
        _ => {
            let scope = Scope::new(format!("nats:{producer}"));
            *last = Some((producer.into(), scope.clone()));
            scope
        }
    })
}

/// A producer's client scope on a worker: `nats:<producer>.<client>` (the client's scope
/// on the producer, [`crate::nats::wire::SCOPE_HEADER`]), or the producer's own scope
/// ([`nats`]) when `client` is empty. A producer id holds no `.`, so no producer can name
/// a scope of another's.
pub fn nats_client(producer: &str, client: &str) -> Scope {
    if client.is_empty() {
        nats(producer)
    } else {
        Scope::new(format!("nats:{producer}.{client}"))
    }
}

/// The scope of a chat whose conversation is not saved (`cmdr chat --ephemeral`, or a
/// [`crate::agent::Session`] made without a conversation): `chat:<fresh uuid>`, a scope
/// of its own that nothing else can address.
pub fn unsaved_chat() -> Scope {
    Scope::new(format!("chat:{}", uuid::Uuid::new_v4().simple()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each producer gets its own scope, named after it, whatever was asked before.
    #[test]
    fn a_producers_scope_is_its_own_whatever_came_before() {
        for producer in ["a", "a", "b", "a", "ab", "a", "", "b", "b"] {
            assert_eq!(nats(producer).as_str(), format!("nats:{producer}"));
        }
        assert_ne!(nats("a"), nats("b"));
        assert_eq!(nats("a"), Scope::new("nats:a"));
    }

    /// A client's scope lies within its producer's and cannot be another producer's.
    #[test]
    fn a_client_scope_is_its_producers_alone() {
        assert_eq!(nats_client("a", ""), nats("a"));
        assert_eq!(nats_client("a", "mcp:1").as_str(), "nats:a.mcp:1");
        // `nats:a.b` could only be producer `a.b`'s own scope, and no producer id has a dot.
        assert!(!crate::nats::subjects::is_valid_id("a.b"));
        assert_ne!(nats_client("a", "b.c"), nats_client("b", "c"));
        assert_ne!(nats_client("a", "x"), nats_client("b", "x"));
    }
}
