//! A checked run holding its conversation's lock, and running it: one instruction, or
//! the steps of an agent command in order, every message persisted as it is appended.

use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::{
    AgentEvent, CommandMeta, Message, RecordFuture, Recorder, RunOptions, RunOutcome, Session,
};
use crate::agents::AgentCommand;
use crate::store::Store;
use cmdr_executors::ErrorCode;

use super::locks::RunGuard;
use super::AgentService;

/// What a started run is: the answer of `POST /agents/:agentName/run` and friends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunInfo {
    /// The agent.
    #[serde(rename = "agentName")]
    pub agent_name: String,
    /// The agent command, for command runs.
    #[serde(rename = "commandName", skip_serializing_if = "Option::is_none")]
    pub command_name: Option<String>,
    /// The conversation (given, or generated before anything ran).
    #[serde(rename = "conversationId")]
    pub conversation_id: String,
    /// The model asked.
    #[serde(rename = "modelId")]
    pub model_id: String,
}

/// What a run does.
#[derive(Debug, Clone)]
pub(super) enum Steps {
    /// One user turn.
    Instruction(String),
    /// Each item of the command, in order.
    Command(AgentCommand),
}

/// Events queued between a run and the forwarder that holds back its final event.
const FINAL_HELD_BACK_QUEUE: usize = 64;

/// A run that passed every check and holds its conversation's lock until it ends (or is
/// dropped without running).
pub struct PreparedRun {
    service: AgentService,
    guard: RunGuard,
    info: RunInfo,
    session: Session,
    options: RunOptions,
    steps: Steps,
}

impl std::fmt::Debug for PreparedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedRun")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl PreparedRun {
    pub(super) fn new(
        service: AgentService,
        guard: RunGuard,
        info: RunInfo,
        session: Session,
        options: RunOptions,
        steps: Steps,
    ) -> Self {
        Self {
            service,
            guard,
            info,
            session,
            options,
            steps,
        }
    }

    /// The run's agent, conversation and model.
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// Runs to the end, streaming events to `events` (opened by a `conversation` event,
    /// ended by exactly one `done` or `error`), stopping promptly when `cancel` fires.
    ///
    /// The final event is sent only once the conversation's lock is released (and the run
    /// unmarked), so `done` means the conversation is free: a client may send its next
    /// message the moment it reads it, on every transport. The run is marked in the store
    /// while it lasts (`Store::begin_run`), so that a crash in the middle is closed with a
    /// `stopped` turn when the database is next opened.
    pub async fn run(
        mut self,
        events: mpsc::Sender<AgentEvent>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let (inner, mut inner_events) = mpsc::channel(FINAL_HELD_BACK_QUEUE);
        let mut final_event = None;
        let locked = self.run_locked(inner, cancel);
        let forward = async {
            while let Some(event) = inner_events.recv().await {
                if event.is_final() {
                    final_event = Some(event);
                } else {
                    let _ = events.send(event).await;
                }
            }
        };
        let (outcome, ()) = tokio::join!(locked, forward);
        drop(self); // releases the lock
                    // The outcome may have been changed after its event was sent (turns not saved).
        if final_event.is_some() {
            let _ = events.send(outcome.final_event()).await;
        }
        outcome
    }

    /// The run itself, under the lock; its final event is held back by [`Self::run`].
    async fn run_locked(
        &mut self,
        events: mpsc::Sender<AgentEvent>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let conversation_id = self.guard.conversation_id().to_owned();
        let _ = events
            .send(AgentEvent::Conversation {
                conversation_id: conversation_id.clone(),
            })
            .await;
        let store = self.service.store();
        if let Err(e) = store.begin_run(&conversation_id).await {
            tracing::warn!(conversation_id, error = %e, "could not mark the run in progress");
        }
        let recorder = StoreRecorder::new(store.clone(), conversation_id.clone());
        let steps = std::mem::replace(&mut self.steps, Steps::Instruction(String::new()));
        let outcome = match steps {
            Steps::Instruction(instruction) => {
                self.service
                    .agent_loop()
                    .run_turn_recorded(
                        &mut self.session,
                        instruction,
                        &self.options,
                        &events,
                        &cancel,
                        &recorder,
                    )
                    .await
            }
            Steps::Command(command) => self.run_steps(&command, &events, &cancel, &recorder).await,
        };
        self.save_cwd(&conversation_id).await;
        self.keep_processes(&conversation_id).await;
        if let Err(e) = store.end_run(&conversation_id).await {
            tracing::warn!(conversation_id, error = %e, "could not unmark the ended run");
        }
        recorder.verdict(outcome)
    }

    /// The command's steps in order; stops after a stopped or failed step.
    async fn run_steps(
        &mut self,
        command: &AgentCommand,
        events: &mpsc::Sender<AgentEvent>,
        cancel: &CancellationToken,
        recorder: &StoreRecorder,
    ) -> RunOutcome {
        let total = u32::try_from(command.items.len()).unwrap_or(u32::MAX);
        let mut outcome = RunOutcome::Completed;
        for (index, item) in command.items.iter().enumerate() {
            if cancel.is_cancelled() {
                outcome = RunOutcome::Stopped;
                break;
            }
            let meta = CommandMeta {
                name: command.name.clone(),
                step_index: u32::try_from(index + 1).unwrap_or(u32::MAX),
                total_steps: total,
            };
            outcome = self
                .run_step(meta, item.instruction(), events, cancel, recorder)
                .await;
            if matches!(outcome, RunOutcome::Stopped | RunOutcome::Failed { .. }) {
                break;
            }
        }
        let _ = events.send(outcome.final_event()).await;
        outcome
    }

    /// One step: a user turn tagged with `meta`. Its events are forwarded but for its
    /// final one: a command run ends with one `done` or `error`, after its last step.
    async fn run_step(
        &mut self,
        meta: CommandMeta,
        instruction: String,
        events: &mpsc::Sender<AgentEvent>,
        cancel: &CancellationToken,
        recorder: &StoreRecorder,
    ) -> RunOutcome {
        let _ = events
            .send(AgentEvent::CommandStep {
                name: meta.name.clone(),
                step_index: meta.step_index,
                total_steps: meta.total_steps,
                instruction: instruction.clone(),
            })
            .await;
        self.options.command = Some(meta);
        let (tx, mut rx) = mpsc::channel(64);
        let agent_loop = self.service.agent_loop().clone();
        let (session, options) = (&mut self.session, &self.options);
        let step = async move {
            let tx = tx;
            agent_loop
                .run_turn_recorded(session, instruction, options, &tx, cancel, recorder)
                .await
        };
        let forward = async {
            while let Some(event) = rx.recv().await {
                if !event.is_final() {
                    let _ = events.send(event).await;
                }
            }
        };
        let (outcome, ()) = tokio::join!(step, forward);
        outcome
    }

    /// Keeps the model's read positions for the next run; when the conversation was
    /// archived while this run went on, stops what it started meanwhile instead.
    async fn keep_processes(&self, conversation_id: &str) {
        let archived = match self.service.store().conversation(conversation_id).await {
            Ok(conversation) => conversation.is_some_and(|c| c.archived),
            Err(e) => {
                tracing::warn!(conversation_id, error = %e, "could not read the conversation");
                false
            }
        };
        if archived {
            self.service.end_processes(conversation_id).await;
        } else {
            let reads = self.session.reads.clone();
            self.service.reads().save(conversation_id, reads);
        }
    }

    async fn save_cwd(&self, conversation_id: &str) {
        let cwd = self.session.cwd.to_string_lossy();
        if let Err(e) = self.service.store().set_cwd(conversation_id, &cwd).await {
            tracing::warn!(conversation_id, error = %e, "could not save the working directory");
        }
    }
}

/// Persists every message of a run the moment it is appended (also `cmdr chat`'s), and
/// remembers the turns it could not save, so that such a run does not say `completed`.
pub struct StoreRecorder {
    store: std::sync::Arc<dyn Store>,
    conversation_id: String,
    lost: std::sync::Mutex<LostTurns>,
}

/// The turns a [`StoreRecorder`] could not save.
#[derive(Debug, Default)]
struct LostTurns {
    count: u32,
    first_error: Option<String>,
}

impl StoreRecorder {
    /// A recorder appending to `conversation_id` in `store`.
    pub fn new(store: std::sync::Arc<dyn Store>, conversation_id: String) -> Self {
        Self {
            store,
            conversation_id,
            lost: std::sync::Mutex::default(),
        }
    }

    /// `outcome`, unless turns were not saved: then the run failed with `STORE_ERROR`
    /// (a run that already failed keeps its own reason).
    pub fn verdict(&self, outcome: RunOutcome) -> RunOutcome {
        let lost = match self.lost.lock() {
            Ok(lost) => (lost.count, lost.first_error.clone()),
            Err(poisoned) => {
                let lost = poisoned.into_inner();
                (lost.count, lost.first_error.clone())
            }
        };
        match (lost, &outcome) {
            ((0, _), _) | (_, RunOutcome::Failed { .. }) => outcome,
            ((count, error), _) => RunOutcome::Failed {
                code: ErrorCode::StoreError.into(),
                message: format!(
                    "{count} turn(s) of this run were not saved (the run itself ended {}): {}",
                    outcome.status_name(),
                    error.unwrap_or_default()
                ),
            },
        }
    }

    fn note_lost(&self, error: String) {
        let mut lost = match self.lost.lock() {
            Ok(lost) => lost,
            Err(poisoned) => poisoned.into_inner(),
        };
        lost.count = lost.count.saturating_add(1);
        lost.first_error.get_or_insert(error);
    }
}

impl Recorder for StoreRecorder {
    fn record<'a>(&'a self, message: &'a Message) -> RecordFuture<'a> {
        Box::pin(async move {
            if let Err(e) = self.store.append_turn(&self.conversation_id, message).await {
                tracing::error!(
                    conversation_id = %self.conversation_id,
                    error = %e,
                    "could not persist a turn"
                );
                self.note_lost(e.to_string());
            }
        })
    }
}
