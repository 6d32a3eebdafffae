//! What real models do that a well-behaved script never does, and what the loop does
//! about it (docs/agent.md, "What real models do"): replies cut off by the length limit,
//! made-up results after the commands, the same commands over and over, commands at the
//! iteration cap, `<shell>` inside code fences, questions for the person. Each test fails
//! on the loop as it was before these answers.

use std::sync::Arc;
use std::time::Duration;

use cmdr::agent::{
    AgentEvent, AgentLoop, DoneReason, Role, RunOptions, RunOutcome, Session, TagKind, ToolStatus,
};
use cmdr::executors::{PendingInputs, Registry};
use cmdr::llm::{LlmConfig, OpenAiClient};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::fake_llm::{FakeLlm, Reply};
use cmdr_test_support::PATIENCE;

struct Turn {
    events: Vec<AgentEvent>,
    session: Session,
    outcome: RunOutcome,
}

fn agent_with(llm: &FakeLlm, registry: Registry) -> AgentLoop {
    let client = OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap();
    AgentLoop::new(Some(Arc::new(client)), registry)
}

async fn run(agent: &AgentLoop, dir: &std::path::Path, options: &RunOptions) -> Turn {
    let mut session = Session::new(dir);
    let (tx, mut rx) = mpsc::channel(16);
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        events
    });
    let cancel = CancellationToken::new();
    let outcome = tokio::time::timeout(
        PATIENCE,
        agent.run_turn(&mut session, "go".into(), options, &tx, &cancel),
    )
    .await
    .expect("the turn ends");
    drop(tx);
    Turn {
        events: collector.await.unwrap(),
        session,
        outcome,
    }
}

async fn one_turn(script: Vec<Reply>, dir: &std::path::Path) -> (Turn, FakeLlm) {
    let llm = FakeLlm::start(script).await;
    let turn = run(
        &agent_with(&llm, Registry::with_defaults()),
        dir,
        &RunOptions::default(),
    )
    .await;
    (turn, llm)
}

fn done_reason(events: &[AgentEvent]) -> DoneReason {
    match events.last() {
        Some(AgentEvent::Done { reason }) => *reason,
        other => panic!("expected done, got {other:?}"),
    }
}

fn results(events: &[AgentEvent]) -> Vec<(String, ToolStatus, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                command_id,
                status,
                result,
                ..
            } => Some((command_id.clone(), *status, result.clone())),
            _ => None,
        })
        .collect()
}

fn shown_text(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Text { content } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_reply_cut_off_by_the_length_limit_runs_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, llm) = one_turn(
        vec![Reply::Length(vec![
            "<shell>touch a</shell>\n<shell>touch b; echo half".into(),
        ])],
        dir.path(),
    )
    .await;
    assert_eq!(turn.outcome, RunOutcome::MaxTokens);
    assert_eq!(done_reason(&turn.events), DoneReason::MaxTokens);
    assert_eq!(llm.request_count(), 1);
    assert!(
        !dir.path().join("a").exists(),
        "nothing of a cut reply runs"
    );
    let results = results(&turn.events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].1, ToolStatus::Skipped);
    assert!(
        results[0].2.contains("cut off by the length limit"),
        "{results:?}"
    );
    let last = turn.session.messages.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert!(last.content.contains("max_tokens"), "{last:?}");
}

#[tokio::test]
async fn every_request_carries_max_tokens_and_the_stop_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![Reply::text("hi"), Reply::text("hi")]).await;
    let agent = agent_with(&llm, Registry::with_defaults());
    run(&agent, dir.path(), &RunOptions::default()).await;
    let unlimited = RunOptions {
        max_tokens: None,
        ..RunOptions::default()
    };
    run(&agent, dir.path(), &unlimited).await;
    let requests = llm.requests();
    assert_eq!(requests[0]["max_tokens"], json!(4096));
    assert_eq!(
        requests[0]["stop"],
        json!(["\n<tool_results>", "\n[exit status"])
    );
    assert!(requests[1].get("max_tokens").is_none(), "{}", requests[1]);
}

#[tokio::test]
async fn made_up_results_after_the_commands_are_never_shown_stored_or_run() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, llm) = one_turn(
        vec![
            // A provider that ignores `stop`: the loop enforces it on the stream.
            Reply::chunks([
                "<shell>echo real</shell>\n<tool_",
                "results>\n$ echo real\nmade up\n</tool_results>\n<shell>touch fake</shell>",
            ]),
            Reply::text("done."),
        ],
        dir.path(),
    )
    .await;
    assert_eq!(turn.outcome, RunOutcome::Completed);
    let reply = &turn.session.messages[1];
    assert_eq!(reply.content, "<shell>echo real</shell>\n");
    assert_eq!(shown_text(&turn.events), "<shell>echo real</shell>\ndone.");
    assert!(!dir.path().join("fake").exists());
    let results = results(&turn.events);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].2, "real\n");
    // The model is sent its reply as stored, then cmdr's own results.
    let second = &llm.requests()[1]["messages"];
    assert_eq!(second[2]["content"], json!("<shell>echo real</shell>\n"));
    assert!(!second.to_string().contains("made up"));
}

#[tokio::test]
async fn the_same_commands_with_the_same_results_are_noticed_then_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, llm) = one_turn(
        (0..6)
            .map(|_| Reply::text("<shell>echo same</shell>"))
            .collect(),
        dir.path(),
    )
    .await;
    assert_eq!(turn.outcome, RunOutcome::Repeating);
    assert_eq!(done_reason(&turn.events), DoneReason::Repeating);
    assert_eq!(llm.request_count(), 3, "told once, then stopped");
    let tools: Vec<&str> = turn
        .session
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tools.len(), 3);
    assert!(!tools[0].contains("same commands"));
    assert!(
        tools[1].contains("same commands with the same results"),
        "{}",
        tools[1]
    );
    // The model was sent the note.
    assert!(llm.requests()[2]["messages"]
        .to_string()
        .contains("same commands with the same results"));
}

#[tokio::test]
async fn commands_whose_results_change_are_not_repetition() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, llm) = one_turn(
        (0..4)
            .map(|_| Reply::text("<shell>echo x >> log; wc -l < log</shell>"))
            .chain([Reply::text("done.")])
            .collect(),
        dir.path(),
    )
    .await;
    assert_eq!(turn.outcome, RunOutcome::Completed);
    assert_eq!(llm.request_count(), 5);
}

#[tokio::test]
async fn a_shell_tag_inside_a_code_fence_is_shown_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, _llm) = one_turn(
        vec![
            Reply::chunks([
                "You could run:\n``",
                "`bash\n<shell>touch shown</shell>\n```\nI run: <shell>touch ran</shell>",
            ]),
            Reply::text("done."),
        ],
        dir.path(),
    )
    .await;
    assert!(dir.path().join("ran").exists());
    assert!(!dir.path().join("shown").exists());
    let calls = turn
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolCall { .. }))
        .count();
    assert_eq!(calls, 1);
}

#[tokio::test]
async fn an_ask_tag_asks_the_person_through_the_runs_own_broker() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>echo before</shell><ask>Which colour?</ask>"),
        Reply::text("Blue it is."),
    ])
    .await;
    let inputs = PendingInputs::new();
    let agent = agent_with(&llm, cmdr::server::local_registry(&inputs));
    let answerer = {
        let inputs = inputs.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + PATIENCE;
            loop {
                if let Some(question) = inputs.pending().into_iter().next() {
                    assert_eq!(question.prompt, "Which colour?");
                    inputs.answer(&question.command_id, "blue".into()).unwrap();
                    return;
                }
                assert!(tokio::time::Instant::now() < deadline, "no question came");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let turn = run(&agent, dir.path(), &RunOptions::default()).await;
    answerer.await.unwrap();
    assert_eq!(turn.outcome, RunOutcome::Completed);
    let kinds: Vec<TagKind> = turn
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCall { kind, .. } => Some(*kind),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, [TagKind::Shell, TagKind::Ask]);
    let tool = &turn.session.messages[2];
    assert_eq!(
        tool.content,
        "$ echo before\nbefore\n\n? Which colour?\nblue"
    );
    assert!(tool.tool_runs[1].question);
    assert!(llm.requests()[1]["messages"]
        .to_string()
        .contains("? Which colour?\\nblue"));
}

#[tokio::test]
async fn an_ask_with_nobody_to_answer_fails_clearly_and_the_model_hears_it() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, _llm) = one_turn(
        vec![Reply::text("<ask>Proceed?</ask>"), Reply::text("ok.")],
        dir.path(),
    )
    .await;
    let results = results(&turn.events);
    assert_eq!(results[0].1, ToolStatus::Failed);
    assert!(turn.session.messages[2]
        .content
        .starts_with("? Proceed?\n["));
}
