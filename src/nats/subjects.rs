//! Subject names of the bus (docs/contract.md §8).
//!
//! Every subject of a command names its producer, so that NATS permissions can say "this
//! producer may submit commands and read only its own results, cancel and answer only its
//! own commands" (docs/nats.md, "Permissions"):
//!
//! | subject | who publishes |
//! |---|---|
//! | `cmdr.commands.<producer>.<commandType>` | the producer |
//! | `cmdr.results.<producer>.<command_id>` | the worker running it |
//! | `cmdr.cancel.<producer>.<command_id>` | the producer |
//! | `cmdr.input.<producer>.<command_id>` | the worker (request; the producer replies) |
//! | `cmdr.alive.<worker>` | the producer (request; the worker replies) |
//!
//! Producer ids and command ids are single subject tokens: non-empty, no whitespace, no
//! `.`, `*` or `>`. Inside a worker a command runs under its *scoped* id
//! `<producer>.<command_id>` ([`scoped`]), so two producers may use the same command id.

/// What workers subscribe to (in their queue group).
pub const COMMANDS_ALL: &str = "cmdr.commands.>";
/// The queue group workers share by default.
pub const DEFAULT_QUEUE: &str = "cmdr-workers";
/// What workers subscribe to for cancellations (every worker hears every cancel; the one
/// running the command acts on it).
pub const CANCEL_ALL: &str = "cmdr.cancel.*.*";

/// `cmdr.commands.<producer>.<commandType>`.
pub fn command(producer: &str, command_type: &str) -> String {
    format!("cmdr.commands.{producer}.{command_type}")
}

/// `cmdr.results.<producer>.<command_id>`: every `OutputResult` of the command, in order.
pub fn results(producer: &str, command_id: &str) -> String {
    format!("cmdr.results.{producer}.{command_id}")
}

/// `cmdr.cancel.<producer>.<command_id>`.
pub fn cancel(producer: &str, command_id: &str) -> String {
    format!("cmdr.cancel.{producer}.{command_id}")
}

/// `cmdr.input.<producer>.<command_id>`: a worker's question to the producer.
pub fn input(producer: &str, command_id: &str) -> String {
    format!("cmdr.input.{producer}.{command_id}")
}

/// `cmdr.alive.<worker_id>`: a core-mode worker answers there whether it still has a
/// command (request/reply; the request's payload is the command's scoped id).
pub fn alive(worker_id: &str) -> String {
    format!("cmdr.alive.{worker_id}")
}

/// The producer named by a `cmdr.commands.<producer>.<type>` subject.
pub fn producer_of(subject: &str) -> Option<&str> {
    let mut tokens = subject.split('.');
    match (
        tokens.next(),
        tokens.next(),
        tokens.next(),
        tokens.next(),
        tokens.next(),
    ) {
        (Some("cmdr"), Some("commands"), Some(producer), Some(_), None)
            if is_valid_id(producer) =>
        {
            Some(producer)
        }
        _ => None,
    }
}

/// The scoped id named by a `cmdr.cancel.<producer>.<command_id>` subject.
pub fn cancelled(subject: &str) -> Option<String> {
    let rest = subject.strip_prefix("cmdr.cancel.")?;
    let (producer, id) = rest.split_once('.')?;
    (is_valid_id(producer) && is_valid_id(id)).then(|| scoped(producer, id))
}

/// The id a command runs under inside a worker: `<producer>.<command_id>`.
pub fn scoped(producer: &str, command_id: &str) -> String {
    format!("{producer}.{command_id}")
}

/// The producer and the command id of a scoped id.
pub fn unscoped(scoped: &str) -> Option<(&str, &str)> {
    scoped
        .split_once('.')
        .filter(|(producer, id)| is_valid_id(producer) && is_valid_id(id))
}

/// Whether `id` can be a subject token.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && !id
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '.' | '*' | '>'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_single_tokens() {
        assert!(is_valid_id("cmd-1-0"));
        assert!(is_valid_id("0b3f6c1e-5d6a-4a57-9f0b-3c1d2e4f5a6b"));
        for bad in ["", "a.b", "a b", "*", "a>", "tab\t"] {
            assert!(!is_valid_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn subjects_name_their_producer() {
        assert_eq!(producer_of("cmdr.commands.alice.BASH_EXEC"), Some("alice"));
        assert_eq!(producer_of("cmdr.commands.BASH_EXEC"), None);
        assert_eq!(producer_of("cmdr.commands.a.b.c"), None);
        assert_eq!(
            cancelled("cmdr.cancel.alice.x-1").as_deref(),
            Some("alice.x-1")
        );
        assert_eq!(cancelled("cmdr.cancel.x-1"), None);
        assert_eq!(unscoped("alice.x-1"), Some(("alice", "x-1")));
        assert_eq!(unscoped("x-1"), None);
        assert_eq!(results("alice", "x-1"), "cmdr.results.alice.x-1");
    }
}
