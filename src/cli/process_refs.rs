//! Naming a process by the command that started it, within one `cmdr exec` (or
//! `cmdr submit`) run: a `process_id` equal to the `command_id` of an earlier `BASH_EXEC`
//! of the same input stands for the process that command started (docs/processes.md,
//! "`cmdr exec`"). The later line waits for that command's terminal result, so a file
//! can start a process and drive it even with `--jobs N`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::watch;

/// What a tracked `BASH_EXEC` turned out to start.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Started {
    /// No terminal result yet.
    Pending,
    /// It started this process.
    Process(String),
    /// It ended without starting one.
    Nothing,
}

/// The `BASH_EXEC` commands of a run that may have started a process, by `command_id`:
/// those still running and those that started one.
#[derive(Debug, Clone, Default)]
pub(super) struct ProcessRefs {
    starts: Arc<Mutex<HashMap<String, watch::Receiver<Started>>>>,
}

/// Reports the terminal result of one tracked command.
#[derive(Debug)]
pub(super) struct Tracker {
    refs: ProcessRefs,
    command_id: String,
    tx: watch::Sender<Started>,
}

impl Tracker {
    /// Records what the command started: the `process_id` of its terminal result.
    pub(super) fn finish(self, process_id: Option<String>) {
        let started = match process_id {
            Some(id) => Started::Process(id),
            None => {
                // Nothing to name: forget it (the map holds only processes).
                let mut starts = self.refs.lock();
                if starts
                    .get(&self.command_id)
                    .is_some_and(|rx| rx.same_channel(&self.tx.subscribe()))
                {
                    starts.remove(&self.command_id);
                }
                Started::Nothing
            }
        };
        self.tx.send_replace(started);
    }
}

impl ProcessRefs {
    /// Starts tracking command `command_id` of type `command_type` (only `BASH_EXEC`
    /// starts processes). A later command with the same id takes the name over.
    pub(super) fn track(&self, command_id: &str, command_type: &str) -> Option<Tracker> {
        if command_type != "BASH_EXEC" {
            return None;
        }
        let (tx, rx) = watch::channel(Started::Pending);
        self.lock().insert(command_id.to_owned(), rx);
        Some(Tracker {
            refs: self.clone(),
            command_id: command_id.to_owned(),
            tx,
        })
    }

    /// `json` with its `process_id` replaced by the process of the earlier command it
    /// names, once that command has ended; `None` when it names none (then `json` runs as
    /// written: an id the table does not hold is `PROCESS_NOT_FOUND`).
    pub(super) async fn resolve(&self, json: &str) -> Option<String> {
        if !json.contains("process_id") {
            return None;
        }
        let mut value: Value = serde_json::from_str(json).ok()?;
        let named = value.get("process_id")?.as_str()?;
        let mut rx = self.lock().get(named)?.clone();
        let started = rx.wait_for(|s| *s != Started::Pending).await.ok()?.clone();
        let Started::Process(id) = started else {
            return None;
        };
        value["process_id"] = Value::String(id);
        Some(value.to_string())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Receiver<Started>>> {
        self.starts.lock().unwrap_or_else(|e| e.into_inner())
    }
}
