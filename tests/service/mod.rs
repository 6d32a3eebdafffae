//! The agent service end to end: real agent folders, a real SQLite file, the fake LLM
//! server over HTTP, real commands.

mod cli;
use cmdr_test_support::fake_llm;

use cmdr::executors::ErrorCode;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cmdr::agent::{AgentEvent, AgentLoop, CommandMeta, DoneReason, Role, RunOutcome, TurnStatus};
use cmdr::agents::AgentCatalog;
use cmdr::executors::Registry;
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use cmdr::service::{AgentService, RunTarget, ServiceError};
use cmdr::store::{SqliteStore, Store, StoredTurn};
use fake_llm::{FakeLlm, Reply};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

/// A temp world: agents folder, database file, working folder.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let world = World {
            dir: tempfile::tempdir().unwrap(),
        };
        world.command("helper", "three", &three_steps());
        std::fs::create_dir_all(world.agents().join("other")).unwrap();
        std::fs::create_dir_all(world.work()).unwrap();
        world
    }

    fn agents(&self) -> PathBuf {
        self.dir.path().join("agents")
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("data/cmdr.sqlite3")
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn command(&self, agent: &str, name: &str, json: &str) {
        let dir = self.agents().join(agent).join("commands");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.json")), json).unwrap();
    }

    fn service(&self, llm: Option<&FakeLlm>) -> (AgentService, Arc<dyn Store>) {
        let client = llm.map(|llm| {
            Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap())
                as Arc<dyn LlmClient>
        });
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&self.db()).unwrap());
        let service = AgentService::new(
            AgentCatalog::new(self.agents()),
            Arc::clone(&store),
            AgentLoop::new(client, Registry::with_defaults()),
            self.work(),
        );
        (service, store)
    }

    fn target(&self, conversation_id: Option<&str>) -> RunTarget {
        RunTarget {
            agent: "helper".to_owned(),
            conversation_id: conversation_id.map(str::to_owned),
            working_folder: None,
        }
    }
}

fn three_steps() -> String {
    serde_json::json!({
        "Description": "Three steps",
        "items": [
            {"type": "message", "role": "user", "content": ["Step one", "  second line  "]},
            {"type": "message", "role": "user", "content": ["Step two"]},
            {"type": "message", "role": "user", "content": ["Step three"]}
        ]
    })
    .to_string()
}

/// A channel whose events are collected in the background.
fn collector() -> (
    mpsc::Sender<AgentEvent>,
    tokio::task::JoinHandle<Vec<AgentEvent>>,
) {
    let (tx, mut rx) = mpsc::channel(64);
    let task = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        events
    });
    (tx, task)
}

async fn run_command(
    service: &AgentService,
    target: RunTarget,
    name: &str,
) -> Result<(String, RunOutcome, Vec<AgentEvent>), ServiceError> {
    let (tx, events) = collector();
    let (info, outcome) = service
        .run_command(target, name, tx, CancellationToken::new())
        .await?;
    Ok((info.conversation_id, outcome, events.await.unwrap()))
}

fn code(result: Result<impl std::fmt::Debug, ServiceError>) -> ErrorCode {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e.code()
        }
    }
}

fn meta(step: u32, total: u32) -> Option<CommandMeta> {
    Some(CommandMeta {
        name: "three".to_owned(),
        step_index: step,
        total_steps: total,
    })
}

fn summary(turns: &[StoredTurn]) -> Vec<(Role, String, TurnStatus, Option<u32>)> {
    turns
        .iter()
        .map(|t| {
            (
                t.role,
                t.content.clone(),
                t.status,
                t.command.as_ref().map(|c| c.step_index),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_three_step_command_runs_each_step_in_one_conversation_with_metadata() {
    let world = World::new();
    let llm = FakeLlm::start(vec![
        Reply::text("one"),
        Reply::text("two"),
        Reply::text("three"),
    ])
    .await;
    let (service, store) = world.service(Some(&llm));
    let (id, outcome, events) = run_command(&service, world.target(None), "three")
        .await
        .unwrap();
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(
        events.first(),
        Some(&AgentEvent::Conversation {
            conversation_id: id.clone()
        }),
        "the conversation id opens the stream"
    );
    assert_eq!(
        events.iter().filter(|e| e.is_final()).count(),
        1,
        "one final event for the whole command run"
    );
    assert_eq!(
        events.last(),
        Some(&AgentEvent::Done {
            reason: DoneReason::Completed
        })
    );
    let steps: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::CommandStep {
                step_index,
                total_steps,
                instruction,
                ..
            } => Some((*step_index, *total_steps, instruction.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        [
            (1, 3, "Step one\nsecond line".to_owned()),
            (2, 3, "Step two".to_owned()),
            (3, 3, "Step three".to_owned())
        ]
    );
    let turns = store.turns(&id).await.unwrap();
    assert_eq!(turns.len(), 6);
    for (i, turn) in turns.iter().enumerate() {
        let step = u32::try_from(i / 2 + 1).unwrap();
        assert_eq!(turn.command, meta(step, 3), "turn {i}");
    }
    assert_eq!(turns[0].content, "Step one\nsecond line");
    assert_eq!(turns[5].content, "three");
    // Each step's request carries the earlier steps' turns.
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2]["messages"].as_array().unwrap().len(), 1 + 5);
    assert!(!service.locks().is_busy(&id));
}

#[tokio::test]
async fn abort_during_step_one_records_it_stopped_and_runs_nothing_more() {
    let world = World::new();
    let llm = FakeLlm::start(vec![Reply::Hang(vec!["thinking".into()])]).await;
    let (service, store) = world.service(Some(&llm));
    let run = service
        .prepare_command(world.target(None), "three")
        .await
        .unwrap();
    let id = run.info().conversation_id.clone();
    let (tx, mut rx) = mpsc::channel(64);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(run.run(tx, cancel.clone()));
    let mut seen = Vec::new();
    while let Some(event) = rx.recv().await {
        let is_text = matches!(event, AgentEvent::Text { .. });
        seen.push(event);
        if is_text {
            break;
        }
    }
    cancel.cancel();
    while let Some(event) = rx.recv().await {
        seen.push(event);
    }
    assert_eq!(task.await.unwrap(), RunOutcome::Stopped);
    assert_eq!(
        seen.last(),
        Some(&AgentEvent::Done {
            reason: DoneReason::Stopped
        })
    );
    llm.wait_disconnects(1).await;
    assert_eq!(llm.request_count(), 1, "steps 2 and 3 never ran");
    let turns = store.turns(&id).await.unwrap();
    assert_eq!(
        summary(&turns),
        [
            (
                Role::User,
                "Step one\nsecond line".to_owned(),
                TurnStatus::Ok,
                Some(1)
            ),
            (
                Role::Assistant,
                "thinking".to_owned(),
                TurnStatus::Stopped,
                Some(1)
            ),
        ]
    );
    assert!(!service.locks().is_busy(&id), "the lock is released");
}

#[tokio::test]
async fn a_busy_conversation_refuses_a_second_run_while_others_proceed() {
    let world = World::new();
    let gate = Arc::new(Notify::new());
    let llm = FakeLlm::start(vec![Reply::text("first")]).await;
    let (service, _store) = world.service(Some(&llm));
    // Create a conversation, then hold it busy with a gated reply.
    let (id, ..) = run_command(&service, world.target(None), "three")
        .await
        .unwrap();
    llm.push([
        Reply::text("a"),
        Reply::text("b"),
        Reply::Gated(vec!["held".into()], Arc::clone(&gate), vec![" done".into()]),
    ]);
    // Reply order: the first three went to the first run; the gated one is the third of
    // the next run. Start the next run and wait until it reaches the gate.
    let busy = service
        .prepare_command(world.target(Some(&id)), "three")
        .await
        .unwrap();
    let (tx, events) = collector();
    let held = tokio::spawn(busy.run(tx, CancellationToken::new()));
    llm.wait_requests(6).await;
    assert!(service.locks().is_busy(&id));
    assert_eq!(
        code(
            service
                .prepare_instruction(world.target(Some(&id)), "hi".into())
                .await
        ),
        ErrorCode::RunInProgress
    );
    assert_eq!(
        code(
            service
                .prepare_command(world.target(Some(&id)), "three")
                .await
        ),
        ErrorCode::RunInProgress
    );
    // Another conversation is not blocked.
    let (tx2, other_events) = collector();
    let (_, other) = service
        .run_instruction(
            world.target(None),
            "hello".into(),
            tx2,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(other, RunOutcome::Completed);
    assert!(!other_events.await.unwrap().is_empty());
    gate.notify_one();
    assert_eq!(held.await.unwrap(), RunOutcome::Completed);
    assert!(events.await.unwrap().last().unwrap().is_final());
    assert!(!service.locks().is_busy(&id));
}

#[tokio::test]
async fn a_failing_step_stops_the_run_and_frees_the_lock() {
    let world = World::new();
    let llm = FakeLlm::start(vec![
        Reply::text("one"),
        Reply::Status(500, r#"{"error":{"message":"boom"}}"#.into()),
    ])
    .await;
    let (service, store) = world.service(Some(&llm));
    let (id, outcome, events) = run_command(&service, world.target(None), "three")
        .await
        .unwrap();
    assert!(
        matches!(&outcome, RunOutcome::Failed { code, .. } if code == "LLM_HTTP_ERROR"),
        "{outcome:?}"
    );
    assert!(
        matches!(events.last(), Some(AgentEvent::Error { code, .. }) if code == "LLM_HTTP_ERROR")
    );
    assert_eq!(llm.request_count(), 2, "step 3 never ran");
    let turns = store.turns(&id).await.unwrap();
    assert_eq!(turns.len(), 4, "{:?}", summary(&turns));
    assert_eq!(turns[3].status, TurnStatus::Failed);
    assert_eq!(turns[3].command, meta(2, 3));
    assert!(!service.locks().is_busy(&id));
    let (again, ..) = run_command(&service, world.target(Some(&id)), "three")
        .await
        .unwrap();
    assert_eq!(again, id, "a given id is returned unchanged");
}

#[tokio::test]
async fn bad_names_and_files_are_refused_before_anything_runs() {
    let world = World::new();
    world.command("helper", "broken", r#"{"Description":"x","items":[]}"#);
    let llm = FakeLlm::start(vec![]).await;
    let (service, store) = world.service(Some(&llm));
    for name in ["../bad", "a/b", "a\\b", ".."] {
        assert_eq!(
            code(service.prepare_command(world.target(None), name).await),
            ErrorCode::CommandInvalid,
            "{name}"
        );
    }
    assert_eq!(
        code(service.prepare_command(world.target(None), "broken").await),
        ErrorCode::CommandInvalid
    );
    assert_eq!(
        code(service.prepare_command(world.target(None), "missing").await),
        ErrorCode::CommandNotFound
    );
    let mut nobody = world.target(None);
    nobody.agent = "nobody".into();
    assert_eq!(
        code(service.prepare_command(nobody.clone(), "three").await),
        ErrorCode::AgentNotFound
    );
    assert_eq!(
        code(service.prepare_instruction(nobody, "hi".into()).await),
        ErrorCode::AgentNotFound
    );
    assert_eq!(
        code(
            service
                .prepare_instruction(world.target(None), "  ".into())
                .await
        ),
        ErrorCode::InvalidRequest
    );
    assert_eq!(llm.request_count(), 0);
    assert!(
        store.conversations(None).await.unwrap().is_empty(),
        "a refused run leaves no conversation behind"
    );
}

#[tokio::test]
async fn working_folder_rules() {
    let world = World::new();
    let llm = FakeLlm::start(vec![Reply::text("<shell>pwd</shell>"), Reply::text("ok")]).await;
    let (service, store) = world.service(Some(&llm));
    let mut target = world.target(None);
    target.working_folder = Some("relative/dir".into());
    assert_eq!(
        code(service.prepare_command(target.clone(), "three").await),
        ErrorCode::WorkingFolderInvalid
    );
    target.working_folder = Some(world.dir.path().join("missing").display().to_string());
    assert_eq!(
        code(
            service
                .prepare_instruction(target.clone(), "hi".into())
                .await
        ),
        ErrorCode::WorkingFolderNotFound
    );
    let folder = world.dir.path().join("chosen");
    std::fs::create_dir(&folder).unwrap();
    target.working_folder = Some(folder.display().to_string());
    let (tx, events) = collector();
    let (info, _) = service
        .run_instruction(target, "where?".into(), tx, CancellationToken::new())
        .await
        .unwrap();
    let events = events.await.unwrap();
    let result = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolResult { result, .. } => Some(result.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(result, format!("{}\n", folder.display()));
    let conversation = store
        .conversation(&info.conversation_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        conversation.cwd.as_deref(),
        Some(&*folder.display().to_string())
    );
}

#[tokio::test]
async fn conversations_belong_to_one_agent_and_archived_ones_refuse_runs() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    let (service, _store) = world.service(Some(&llm));
    assert_eq!(
        code(
            service
                .prepare_instruction(world.target(Some("no-such-id")), "hi".into())
                .await
        ),
        ErrorCode::ConversationNotFound
    );
    let (tx, _events) = collector();
    let (info, _) = service
        .run_instruction(
            world.target(None),
            "hi".into(),
            tx,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let id = info.conversation_id;
    let mut other = world.target(Some(&id));
    other.agent = "other".into();
    assert_eq!(
        code(service.prepare_instruction(other, "hi".into()).await),
        ErrorCode::AgentMismatch
    );
    service.set_archived(&id, true).await.unwrap();
    assert_eq!(
        code(
            service
                .prepare_instruction(world.target(Some(&id)), "hi".into())
                .await
        ),
        ErrorCode::ConversationArchived
    );
    assert_eq!(
        code(service.set_archived("no-such-id", true).await),
        ErrorCode::ConversationNotFound
    );
}

#[tokio::test]
async fn without_a_model_runs_are_refused_with_llm_unavailable() {
    let world = World::new();
    let (service, store) = world.service(None);
    assert_eq!(
        code(service.prepare_command(world.target(None), "three").await),
        ErrorCode::LlmUnavailable
    );
    assert!(store.conversations(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_database_survives_a_restart_and_the_conversation_continues() {
    let world = World::new();
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>echo persisted</shell>"),
        Reply::text("noted"),
        Reply::text("again"),
    ])
    .await;
    let (service, store) = world.service(Some(&llm));
    let (tx, _events) = collector();
    let (info, _) = service
        .run_instruction(
            world.target(None),
            "remember".into(),
            tx,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let before = store.turns(&info.conversation_id).await.unwrap();
    assert_eq!(before.len(), 4);
    drop(service);
    drop(store);

    let (service, store) = world.service(Some(&llm));
    let after = store.turns(&info.conversation_id).await.unwrap();
    assert_eq!(after, before, "every turn intact after a restart");
    let (tx, _events) = collector();
    service
        .run_instruction(
            world.target(Some(&info.conversation_id)),
            "more".into(),
            tx,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let raw = llm.raw_requests();
    let (second, third) = (&raw[1], &raw[2]);
    let settings: &[u8] =
        b"],\"stream\":true,\"max_tokens\":4096,\"stop\":[\"\\n<tool_results>\",\"\\n[exit status\"]}";
    assert!(second.ends_with(settings));
    let prefix = &second[..second.len() - settings.len()];
    assert!(
        third.starts_with(prefix),
        "the history reloaded from the database is sent byte for byte as before"
    );
    assert_eq!(store.turns(&info.conversation_id).await.unwrap().len(), 6);
}

#[tokio::test]
async fn many_conversations_run_at_once() {
    let world = World::new();
    let llm = FakeLlm::start(vec![]).await;
    let (service, store) = world.service(Some(&llm));
    let runs = (0..8).map(|i| {
        let service = service.clone();
        let target = world.target(None);
        tokio::spawn(async move {
            let (tx, _events) = collector();
            service
                .run_instruction(target, format!("hi {i}"), tx, CancellationToken::new())
                .await
                .unwrap()
        })
    });
    for run in runs.collect::<Vec<_>>() {
        let (info, outcome) = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(outcome, RunOutcome::Completed);
        assert_eq!(store.turns(&info.conversation_id).await.unwrap().len(), 2);
    }
    assert_eq!(store.conversations(Some("helper")).await.unwrap().len(), 8);
}
