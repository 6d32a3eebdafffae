//! Who may answer a `REQUEST_USER_INPUT` question over HTTP: the person, never a command.
//!
//! A question is answered by whoever holds one of two keys, both random, both reaching
//! only a channel that a command cmdr runs cannot read:
//!
//! - the **requester key**: one per `POST /commands` stream, sent to that client only (the
//!   `Cmdr-Input-Key` response header), valid for that command's question;
//! - the **person key**: one per server start, printed by `cmdr serve` on its own output as
//!   the web UI's address (`…/#answer-key=<key>`), valid for every question.
//!
//! Neither is in the environment of a shell, a log line, `/health` or the question list, so a
//! shell that calls the loopback API (even on a server without a token) cannot answer a
//! question its own run asked. See docs/security.md.

use std::sync::Arc;

use dashmap::DashMap;

/// Length of a key in random bytes (hex-encoded on the wire).
const KEY_BYTES: usize = 32;

/// The answer keys of one server. Cheap to clone.
#[derive(Clone)]
pub struct InputKeys {
    person: Arc<str>,
    requesters: Arc<DashMap<String, Arc<str>>>,
}

impl std::fmt::Debug for InputKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a key.
        f.debug_struct("InputKeys")
            .field("requesters", &self.requesters.len())
            .finish_non_exhaustive()
    }
}

impl InputKeys {
    /// Fresh keys: a new person key, no requester yet.
    pub fn new() -> Result<Self, getrandom::Error> {
        Ok(Self {
            person: random_key()?.into(),
            requesters: Arc::default(),
        })
    }

    /// The person key (for the address `cmdr serve` prints; never log it).
    pub fn person_key(&self) -> &str {
        &self.person
    }

    /// Binds a new requester key to `command_id` for as long as the returned guard lives
    /// (the command's result stream). `None` if no key could be drawn: the question is then
    /// answerable with the person key only.
    pub fn bind(&self, command_id: &str) -> Option<RequesterKey> {
        let key: Arc<str> = random_key()
            .map_err(|e| tracing::warn!(error = %e, "no random requester key"))
            .ok()?
            .into();
        self.requesters.insert(command_id.to_owned(), key.clone());
        Some(RequesterKey {
            requesters: self.requesters.clone(),
            command_id: command_id.to_owned(),
            key,
        })
    }

    /// Whether `given` may answer the question of `command_id`.
    pub fn may_answer(&self, command_id: &str, given: &str) -> bool {
        if constant_time_eq(given.as_bytes(), self.person.as_bytes()) {
            return true;
        }
        self.requesters
            .get(command_id)
            .is_some_and(|key| constant_time_eq(given.as_bytes(), key.as_bytes()))
    }
}

/// A requester key bound to its command; unbound when dropped.
pub struct RequesterKey {
    requesters: Arc<DashMap<String, Arc<str>>>,
    command_id: String,
    key: Arc<str>,
}

impl RequesterKey {
    /// The key, for the requester's response header.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl Drop for RequesterKey {
    fn drop(&mut self) {
        // Only this binding's own key: a later command reusing the id keeps its own.
        self.requesters
            .remove_if(&self.command_id, |_, key| Arc::ptr_eq(key, &self.key));
    }
}

/// `KEY_BYTES` from the OS's random source, hex-encoded.
fn random_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares secrets without an early exit on the first differing byte.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requester_key_answers_its_own_question_only_while_bound() {
        let keys = InputKeys::new().unwrap();
        let a = keys.bind("a").unwrap();
        let b = keys.bind("b").unwrap();
        assert!(keys.may_answer("a", a.key()));
        assert!(!keys.may_answer("b", a.key()));
        assert!(!keys.may_answer("a", ""));
        assert!(keys.may_answer("anything", keys.person_key()));
        let key_a = a.key().to_owned();
        drop(a);
        assert!(!keys.may_answer("a", &key_a));
        assert!(keys.may_answer("b", b.key()));
    }

    #[test]
    fn a_dropped_binding_leaves_a_newer_one_for_the_same_id() {
        let keys = InputKeys::new().unwrap();
        let old = keys.bind("x").unwrap();
        let new = keys.bind("x").unwrap();
        drop(old);
        assert!(keys.may_answer("x", new.key()));
    }

    #[test]
    fn keys_are_long_random_and_never_printed() {
        let keys = InputKeys::new().unwrap();
        let other = InputKeys::new().unwrap();
        assert_eq!(keys.person_key().len(), KEY_BYTES * 2);
        assert_ne!(keys.person_key(), other.person_key());
        assert!(!format!("{keys:?}").contains(keys.person_key()));
    }
}
