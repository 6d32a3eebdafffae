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
//! | `cmdr.alive.<worker>.<producer>` | the producer (request; the worker replies) |
//! | `cmdr.worker.<worker>.commands.<producer>.<commandType>` | the producer: a command for that worker alone (its processes and sessions) |
//! | `cmdr.workers.<producer>` | the producer (request; every worker replies: discovery) |
//!
//! A worker's process ids are `<worker>-p<N>` ([`process_id_prefix`]): the id names the
//! worker holding the process ([`worker_of_process`]), so the producer sends the commands
//! about it to that worker's own subject.
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

/// What every worker subscribes to (no queue group) for discovery.
pub const WORKERS_ALL: &str = "cmdr.workers.*";

/// Between a worker's id and the local part (`p<N>`) of its process ids: valid in a subject
/// token and in a URL path segment, and never in the local part, so an id splits at its
/// last `-`.
pub const PROCESS_ID_SEPARATOR: char = '-';

/// `cmdr.commands.<producer>.<commandType>`.
pub fn command(producer: &str, command_type: &str) -> String {
    join(&["cmdr.commands.", producer, ".", command_type])
}

/// `cmdr.results.<producer>.<command_id>`: every `OutputResult` of the command, in order.
pub fn results(producer: &str, command_id: &str) -> String {
    join(&["cmdr.results.", producer, ".", command_id])
}

/// `cmdr.cancel.<producer>.<command_id>`.
pub fn cancel(producer: &str, command_id: &str) -> String {
    join(&["cmdr.cancel.", producer, ".", command_id])
}

/// `cmdr.input.<producer>.<command_id>`: a worker's question to the producer.
pub fn input(producer: &str, command_id: &str) -> String {
    join(&["cmdr.input.", producer, ".", command_id])
}

/// `cmdr.alive.<worker_id>.<producer>`: a worker answers there whether it still has one
/// of that producer's commands (request/reply; the payload is the command's scoped id,
/// `<producer>.<command_id>`: another producer's is answered "not running"). Under the
/// producer, so that permissions confine each producer to asking about its own.
pub fn alive(worker_id: &str, producer: &str) -> String {
    join(&["cmdr.alive.", worker_id, ".", producer])
}

/// `cmdr.alive.<worker_id>.*`: every producer's liveness checks of one worker.
pub fn alive_all(worker_id: &str) -> String {
    join(&["cmdr.alive.", worker_id, ".*"])
}

/// `cmdr.worker.<worker>.commands.<producer>.<commandType>`: a command for one worker.
pub fn worker_command(worker: &str, producer: &str, command_type: &str) -> String {
    join(&[
        "cmdr.worker.",
        worker,
        ".commands.",
        producer,
        ".",
        command_type,
    ])
}

/// What a worker subscribes to (no queue group) for the commands addressed to it.
pub fn worker_commands_all(worker: &str) -> String {
    format!("cmdr.worker.{worker}.commands.>")
}

/// `cmdr.workers.<producer>`: a producer asks which workers are there (each replies).
pub fn workers(producer: &str) -> String {
    format!("cmdr.workers.{producer}")
}

/// The producer named by a `cmdr.workers.<producer>` subject.
pub fn producer_of_discovery(subject: &str) -> Option<&str> {
    subject
        .strip_prefix("cmdr.workers.")
        .filter(|producer| is_valid_id(producer))
}

/// The producer named by a command subject: `cmdr.commands.<producer>.<type>` or
/// `cmdr.worker.<worker>.commands.<producer>.<type>`.
pub fn producer_of(subject: &str) -> Option<&str> {
    let rest = match subject.strip_prefix("cmdr.commands.") {
        Some(rest) => rest,
        None => {
            let (_worker, rest) = subject.strip_prefix("cmdr.worker.")?.split_once('.')?;
            rest.strip_prefix("commands.")?
        }
    };
    let (producer, command_type) = rest.split_once('.')?;
    (!command_type.contains('.') && is_valid_id(producer)).then_some(producer)
}

/// What the process ids of worker `worker` start with: `<worker>-`.
pub fn process_id_prefix(worker: &str) -> String {
    format!("{worker}{PROCESS_ID_SEPARATOR}")
}

/// The worker a process id names (`<worker>-p<N>`), if it names one.
pub fn worker_of_process(process_id: &str) -> Option<&str> {
    let (worker, local) = process_id.rsplit_once(PROCESS_ID_SEPARATOR)?;
    let local_ok = cmdr_executors::local_number(local).is_some();
    (local_ok && is_valid_id(worker)).then_some(worker)
}

/// The scoped id named by a `cmdr.cancel.<producer>.<command_id>` subject.
pub fn cancelled(subject: &str) -> Option<String> {
    let rest = subject.strip_prefix("cmdr.cancel.")?;
    let (producer, id) = rest.split_once('.')?;
    (is_valid_id(producer) && is_valid_id(id)).then(|| scoped(producer, id))
}

/// `parts` end to end in one allocation of the right size (subjects are built several
/// times per command: `format!` cost more than the work around it).
fn join(parts: &[&str]) -> String {
    let mut joined = String::with_capacity(parts.iter().map(|part| part.len()).sum());
    for part in parts {
        joined.push_str(part);
    }
    joined
}

/// The id a command runs under inside a worker: `<producer>.<command_id>`.
pub fn scoped(producer: &str, command_id: &str) -> String {
    join(&[producer, ".", command_id])
}

/// The producer and the command id of a scoped id.
pub fn unscoped(scoped: &str) -> Option<(&str, &str)> {
    scoped
        .split_once('.')
        .filter(|(producer, id)| is_valid_id(producer) && is_valid_id(id))
}

/// The ASCII bytes that cannot be part of a subject token, as a bit set: whitespace as
/// `char::is_whitespace` has it (`\t` `\n` `\v` `\f` `\r` and space), `.`, `*`, `>`.
const ASCII_SEPARATORS: u128 = {
    let mut set = 0u128;
    let mut b = b'\t';
    while b <= b'\r' {
        set |= 1 << b;
        b += 1;
    }
    set | 1 << b' ' | 1 << b'.' | 1 << b'*' | 1 << b'>'
};

/// Whether `id` can be a subject token. Ids are nearly always ASCII and this runs several
/// times per command, so each byte is one bit test; an id with any other byte (or a
/// separator) is judged again character by character.
pub fn is_valid_id(id: &str) -> bool {
    let plain = |b: &u8| *b < 0x80 && ASCII_SEPARATORS >> *b & 1 == 0;
    if id.as_bytes().iter().all(plain) {
        return !id.is_empty();
    }
    !id.is_empty() && !id.chars().any(is_separator)
}

/// Whitespace (Unicode's), `.`, `*` or `>`: what cannot be part of a subject token.
fn is_separator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '.' | '*' | '>')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_other_characters_are_judged_by_unicode_whitespace() {
        assert!(is_valid_id("é-ü"));
        assert!(!is_valid_id("a\u{2003}b"), "an em space separates");
        assert!(!is_valid_id("a\u{85}b"), "so does NEL");
        assert!(!is_valid_id("é.b"));
        assert!(!is_valid_id(""));
    }

    #[test]
    fn the_ascii_check_agrees_with_the_char_check() {
        for b in 0u8..128 {
            let id = format!("a{}b", char::from(b));
            assert_eq!(
                is_valid_id(&id),
                !id.chars().any(is_separator),
                "byte {b:#x}"
            );
        }
    }

    #[test]
    fn ids_are_single_tokens() {
        assert!(is_valid_id("cmd-1-0"));
        assert!(is_valid_id("0b3f6c1e-5d6a-4a57-9f0b-3c1d2e4f5a6b"));
        for bad in [
            "",
            "a.b",
            "a b",
            "*",
            "a>",
            "tab\t",
            "vt\u{b}",
            "é.",
            "nb\u{2003}sp",
        ] {
            assert!(!is_valid_id(bad), "{bad:?}");
        }
    }

    /// Every subject of up to seven tokens drawn from a small alphabet (empty tokens
    /// included) names the producer that matching its tokens as a whole names.
    #[test]
    fn the_producer_of_a_subject_is_what_its_tokens_say() {
        fn by_tokens(subject: &str) -> Option<&str> {
            let tokens: Vec<&str> = subject.split('.').collect();
            let producer = match tokens.as_slice() {
                ["cmdr", "commands", producer, _] => producer,
                ["cmdr", "worker", _, "commands", producer, _] => producer,
                _ => return None,
            };
            is_valid_id(producer).then_some(*producer)
        }
        let alphabet = ["cmdr", "commands", "worker", "p", "", "a b"];
        let mut level: Vec<String> = alphabet.iter().map(|t| t.to_string()).collect();
        let mut checked = 0;
        for _ in 0..7 {
            for subject in &level {
                assert_eq!(producer_of(subject), by_tokens(subject), "{subject:?}");
                checked += 1;
            }
            level = level
                .iter()
                .flat_map(|s| alphabet.iter().map(move |t| format!("{s}.{t}")))
                .collect();
        }
        assert!(checked > 300_000, "{checked}");
    }

    #[test]
    fn subjects_name_their_producer() {
        assert_eq!(producer_of("cmdr.commands.alice.BASH_EXEC"), Some("alice"));
        assert_eq!(producer_of("cmdr.commands.BASH_EXEC"), None);
        assert_eq!(producer_of("cmdr.commands.a.b.c"), None);
        assert_eq!(
            producer_of(&worker_command("w-1", "alice", "PROCESS_KILL")),
            Some("alice")
        );
        assert_eq!(producer_of("cmdr.worker.w.commands.alice"), None);
        assert_eq!(producer_of_discovery(&workers("bob")), Some("bob"));
        assert_eq!(producer_of_discovery("cmdr.workers.a.b"), None);
        assert_eq!(
            cancelled("cmdr.cancel.alice.x-1").as_deref(),
            Some("alice.x-1")
        );
        assert_eq!(cancelled("cmdr.cancel.x-1"), None);
        assert_eq!(unscoped("alice.x-1"), Some(("alice", "x-1")));
        assert_eq!(unscoped("x-1"), None);
        assert_eq!(results("alice", "x-1"), "cmdr.results.alice.x-1");
    }

    #[test]
    fn process_ids_name_their_worker() {
        let id = format!("{}p12", process_id_prefix("host-a"));
        assert_eq!(id, "host-a-p12");
        assert_eq!(worker_of_process(&id), Some("host-a"));
        // `w-p01` is no process id anywhere (issue 35.3: the table refused it, routing took it).
        for unroutable in [
            "p1", "-p1", "w-p", "w-px", "w-1", "a.b-p1", "w-p1 ", "w-p01",
        ] {
            assert_eq!(worker_of_process(unroutable), None, "{unroutable:?}");
        }
    }
}
