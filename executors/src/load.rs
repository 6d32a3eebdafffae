//! How busy an executor actor is — its concurrency limit, the commands running, the
//! commands queued for a slot ([`ActorLoad`], what `/health` shows) — and the `RUNNING`
//! notes that tell a queued command's reader where it stands (docs/contract.md §3,
//! "Queueing").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;

use crate::executor::running_result;
use crate::outcome::human_duration;
use crate::protocol::{CommandType, OutputResult, QueueNote, QueueState};

/// One actor's load at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ActorLoad {
    /// Commands of this type that run at once ([`crate::ActorConfig::max_concurrent`]).
    pub limit: usize,
    /// Commands holding a slot (running, or winding down after a stop).
    pub running: usize,
    /// Commands told they are queued and still waiting for a slot.
    pub queued: usize,
}

/// The counters of one actor, shared by its loop, its command tasks and the registry.
#[derive(Debug)]
pub(crate) struct Gauge {
    limit: usize,
    /// One permit per command running at once.
    pub(crate) slots: Arc<Semaphore>,
    /// One permit per command accepted and not yet running: `execute` waits for one
    /// (back-pressure), the command gives it back when it starts or ends.
    pub(crate) waiting_room: Arc<Semaphore>,
    queued: AtomicUsize,
}

impl Gauge {
    /// `limit` commands at once, `room` accepted commands waiting at most.
    pub(crate) fn new(limit: usize, room: usize) -> Self {
        Self {
            limit,
            slots: Arc::new(Semaphore::new(limit)),
            waiting_room: Arc::new(Semaphore::new(room)),
            queued: AtomicUsize::new(0),
        }
    }

    /// The limit of commands running at once.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Counts one more queued command; its place in line (1: next).
    pub(crate) fn enqueue(&self) -> usize {
        self.queued.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Counts one queued command less (it started, or stopped while waiting).
    pub(crate) fn dequeue(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }

    /// The load now.
    pub(crate) fn load(&self) -> ActorLoad {
        ActorLoad {
            limit: self.limit,
            running: self.limit.saturating_sub(self.slots.available_permits()),
            queued: self.queued.load(Ordering::Acquire),
        }
    }
}

/// The note sent at once to a command that must wait: every slot of its type is busy.
pub(crate) fn queued_note(
    command_id: &str,
    command_type: CommandType,
    position: usize,
    limit: usize,
) -> OutputResult {
    let message =
        format!("Queued: all {limit} {command_type} slots are busy; number {position} in line.");
    let note = QueueNote {
        state: QueueState::Queued,
        position: Some(position as u64),
        limit: Some(limit as u64),
        waited_ms: None,
    };
    running_note(command_id, command_type, message, note)
}

/// The note sent to a queued command when it gets its slot, before any output.
pub(crate) fn started_note(
    command_id: &str,
    command_type: CommandType,
    waited: Duration,
) -> OutputResult {
    let message = format!("Started after {} in the queue.", human_duration(waited));
    let note = QueueNote {
        state: QueueState::Started,
        position: None,
        limit: None,
        waited_ms: Some(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX)),
    };
    running_note(command_id, command_type, message, note)
}

fn running_note(
    command_id: &str,
    command_type: CommandType,
    message: String,
    note: QueueNote,
) -> OutputResult {
    OutputResult {
        queue: Some(note),
        ..running_result(command_id, command_type, message, String::new())
    }
}
