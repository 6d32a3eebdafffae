//! The soak's book-keeping: per kind of request, how many were sent and how many got
//! their one terminal result (or, when abandoned on purpose, were seen stopped); and
//! every error, kept for the report.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Errors kept in full (later ones are only counted).
const KEPT_ERRORS: usize = 50;

/// Counts of one kind of request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Requests sent.
    pub sent: u64,
    /// Requests that ended properly.
    pub ended: u64,
}

/// Shared by every traffic lane.
#[derive(Debug, Default)]
pub struct Tally {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    counts: BTreeMap<String, Counts>,
    errors: Vec<String>,
    error_count: usize,
}

impl Tally {
    /// A request of `kind` goes out.
    pub fn sent(&self, kind: &str) {
        self.count(kind, |counts| counts.sent += 1);
    }

    /// A request of `kind` ended properly.
    pub fn ended(&self, kind: &str) {
        self.count(kind, |counts| counts.ended += 1);
    }

    fn count(&self, kind: &str, update: impl FnOnce(&mut Counts)) {
        let mut inner = self.inner.lock().unwrap();
        update(inner.counts.entry(kind.to_owned()).or_default());
    }

    /// Something went wrong.
    pub fn error(&self, error: String) {
        eprintln!("soak error: {error}");
        let mut inner = self.inner.lock().unwrap();
        inner.error_count += 1;
        if inner.errors.len() < KEPT_ERRORS {
            inner.errors.push(error);
        }
    }

    /// Requests that ended properly, all kinds together.
    pub fn total_ended(&self) -> u64 {
        self.inner
            .lock()
            .unwrap()
            .counts
            .values()
            .map(|c| c.ended)
            .sum()
    }

    /// How many errors so far.
    pub fn error_count(&self) -> usize {
        self.inner.lock().unwrap().error_count
    }

    /// The first errors.
    pub fn errors(&self) -> Vec<String> {
        self.inner.lock().unwrap().errors.clone()
    }

    /// Every kind's counts, by name.
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        self.inner.lock().unwrap().counts.clone()
    }
}
