//! The table of commands in flight, shared by every actor of a registry, so that
//! `cancel(command_id)` works from anywhere without knowing which actor runs the command.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio_util::sync::CancellationToken;

use crate::error::ExecError;

/// Why a command was told to stop. The first reason given wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Someone called cancel.
    Cancelled,
    /// The command ran past its deadline.
    TimedOut(Duration),
    /// The registry is shutting down.
    ShuttingDown,
    /// The result stream was dropped before the end.
    ReceiverGone,
}

impl From<StopReason> for ExecError {
    fn from(reason: StopReason) -> Self {
        match reason {
            StopReason::Cancelled => ExecError::Cancelled,
            StopReason::TimedOut(after) => ExecError::TimedOut(after),
            StopReason::ShuttingDown => ExecError::ShuttingDown,
            StopReason::ReceiverGone => ExecError::ReceiverGone,
        }
    }
}

/// A command's cancellation token plus the reason it fired.
#[derive(Debug, Default)]
pub(crate) struct StopSignal {
    token: CancellationToken,
    reason: OnceLock<StopReason>,
}

impl StopSignal {
    /// Records `reason` (unless one is recorded already) and fires the token.
    pub(crate) fn stop(&self, reason: StopReason) {
        let _ = self.reason.set(reason);
        self.token.cancel();
    }

    pub(crate) fn reason(&self) -> Option<StopReason> {
        self.reason.get().copied()
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

/// Command ids currently accepted and not yet finished.
#[derive(Debug, Default)]
pub(crate) struct Inflight {
    map: DashMap<String, Arc<StopSignal>>,
}

impl Inflight {
    /// Claims `id`; fails when a command with that id is still in flight.
    pub(crate) fn claim(&self, id: &str) -> Option<Arc<StopSignal>> {
        match self.map.entry(id.to_owned()) {
            Entry::Occupied(_) => None,
            Entry::Vacant(v) => {
                let signal = Arc::new(StopSignal::default());
                v.insert(signal.clone());
                Some(signal)
            }
        }
    }

    pub(crate) fn release(&self, id: &str) {
        self.map.remove(id);
    }

    /// Stops the command `id`; false when no such command is in flight.
    pub(crate) fn stop(&self, id: &str, reason: StopReason) -> bool {
        match self.map.get(id) {
            Some(signal) => {
                signal.stop(reason);
                true
            }
            None => false,
        }
    }

    pub(crate) fn stop_all(&self, reason: StopReason) {
        for entry in self.map.iter() {
            entry.value().stop(reason);
        }
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.map.iter().map(|e| e.key().clone()).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Releases a claimed id if the submission is abandoned before the actor takes it over
/// (e.g. the submitting future is dropped while the mailbox is full).
pub(crate) struct Claim<'a> {
    pub(crate) inflight: &'a Inflight,
    pub(crate) id: &'a str,
    pub(crate) armed: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inflight.release(self.id);
        }
    }
}
