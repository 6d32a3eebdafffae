//! Subject names of the bus (docs/contract.md §8).
//!
//! A command id becomes the last token of its subjects, so it must be one subject token:
//! non-empty, no whitespace, no `.`, `*` or `>`. Generated ids (UUID v4) always are.

/// Where producers publish commands: `cmdr.commands.<commandType>`.
pub const COMMANDS: &str = "cmdr.commands";
/// What workers subscribe to.
pub const COMMANDS_ALL: &str = "cmdr.commands.>";
/// The queue group workers share by default.
pub const DEFAULT_QUEUE: &str = "cmdr-workers";
/// What workers subscribe to for cancellations (every worker hears every cancel; the one
/// running the command acts on it).
pub const CANCEL_ALL: &str = "cmdr.cancel.*";

/// `cmdr.commands.<commandType>`.
pub fn command(command_type: &str) -> String {
    format!("{COMMANDS}.{command_type}")
}

/// `cmdr.results.<command_id>`: every `OutputResult` of the command, in order.
pub fn results(command_id: &str) -> String {
    format!("cmdr.results.{command_id}")
}

/// `cmdr.cancel.<command_id>`.
pub fn cancel(command_id: &str) -> String {
    format!("cmdr.cancel.{command_id}")
}

/// `cmdr.input.<command_id>`: a worker's question to the producer (request/reply).
pub fn input(command_id: &str) -> String {
    format!("cmdr.input.{command_id}")
}

/// `cmdr.alive.<worker_id>`: a core-mode worker answers there whether it still has a
/// command (request/reply; the request's payload is the command id).
pub fn alive(worker_id: &str) -> String {
    format!("cmdr.alive.{worker_id}")
}

/// The command id at the end of a `cmdr.cancel.<id>` (or any `prefix.<id>`) subject.
pub fn id_of(subject: &str) -> Option<&str> {
    subject
        .rsplit_once('.')
        .map(|(_, id)| id)
        .filter(|id| is_valid_id(id))
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
        assert_eq!(id_of("cmdr.cancel.abc"), Some("abc"));
        assert_eq!(id_of("cmdr.cancel.*"), None);
    }
}
