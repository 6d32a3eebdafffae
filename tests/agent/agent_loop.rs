//! The agent loop end to end: a real fake LLM server over HTTP, real `bash` commands
//! through the registry, real files.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cmdr::agent::{
    omitted_marker, AgentEvent, AgentLoop, DoneReason, Role, RunOptions, RunOutcome, Session,
    ToolStatus, TurnStatus, TOOL_RESULTS_OPEN,
};
use cmdr::executors::Registry;
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::fake_llm::{FakeLlm, Reply};

/// Everything one turn produced.
struct Turn {
    events: Vec<AgentEvent>,
    session: Session,
    outcome: RunOutcome,
}

fn client(llm: &FakeLlm) -> Arc<dyn LlmClient> {
    Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap())
}

fn agent(llm: &FakeLlm) -> AgentLoop {
    AgentLoop::new(Some(client(llm)), Registry::with_defaults())
}

/// Runs one turn to its end and collects its events.
async fn turn(
    agent: &AgentLoop,
    mut session: Session,
    instruction: &str,
    options: &RunOptions,
) -> Turn {
    let (tx, mut rx) = mpsc::channel(16);
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        events
    });
    let cancel = CancellationToken::new();
    let outcome = agent
        .run_turn(&mut session, instruction.to_owned(), options, &tx, &cancel)
        .await;
    drop(tx);
    Turn {
        events: collector.await.unwrap(),
        session,
        outcome,
    }
}

async fn one_turn(script: Vec<Reply>, dir: &Path, instruction: &str) -> (Turn, FakeLlm) {
    let llm = FakeLlm::start(script).await;
    let agent = agent(&llm);
    let turn = turn(
        &agent,
        Session::new(dir),
        instruction,
        &RunOptions::default(),
    )
    .await;
    (turn, llm)
}

/// The position of the first event matching `pred`.
fn position(events: &[AgentEvent], what: &str, pred: impl Fn(&AgentEvent) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no {what} event in {events:#?}"))
}

/// Asserts `id` went queued → running → done with `status`, in that order; returns its
/// result text.
fn lifecycle(events: &[AgentEvent], id: &str, status: ToolStatus) -> String {
    let call = position(
        events,
        "tool-call",
        |e| matches!(e, AgentEvent::ToolCall { command_id, .. } if command_id == id),
    );
    let start = position(
        events,
        "tool-start",
        |e| matches!(e, AgentEvent::ToolStart { command_id, .. } if command_id == id),
    );
    let result = position(
        events,
        "tool-result",
        |e| matches!(e, AgentEvent::ToolResult { command_id, .. } if command_id == id),
    );
    assert!(
        call < start && start < result,
        "{id}: {call} {start} {result}"
    );
    let AgentEvent::ToolResult {
        result, status: s, ..
    } = &events[result]
    else {
        unreachable!()
    };
    assert_eq!(*s, status, "{id}: {result}");
    result.clone()
}

fn ids(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCall { command_id, .. } => Some(command_id.clone()),
            _ => None,
        })
        .collect()
}

fn text_of(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Text { content } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

fn roles(session: &Session) -> Vec<Role> {
    session.messages.iter().map(|m| m.role).collect()
}

fn last_event(events: &[AgentEvent]) -> &AgentEvent {
    let last = events.last().expect("events");
    assert!(last.is_final(), "{last:?}");
    assert_eq!(
        events.iter().filter(|e| e.is_final()).count(),
        1,
        "exactly one final event"
    );
    last
}

fn error_code(events: &[AgentEvent]) -> String {
    match last_event(events) {
        AgentEvent::Error { code, message } => {
            assert!(!message.is_empty());
            code.clone()
        }
        other => panic!("expected an error event, got {other:?}"),
    }
}

#[tokio::test]
async fn three_different_commands_each_go_queued_running_completed() {
    let dir = tempfile::tempdir().unwrap();
    let reply = "Checking.\n<shell>echo one</shell> <shell>echo two >&2</shell> <shell>printf three</shell>";
    let (turn, llm) = one_turn(
        vec![Reply::text(reply), Reply::text("All three ran.")],
        dir.path(),
        "run three things",
    )
    .await;
    let events = &turn.events;
    assert_eq!(ids(events), ["cmd-1-0", "cmd-1-1", "cmd-1-2"]);
    assert_eq!(lifecycle(events, "cmd-1-0", ToolStatus::Completed), "one\n");
    assert_eq!(lifecycle(events, "cmd-1-1", ToolStatus::Completed), "two\n");
    assert_eq!(lifecycle(events, "cmd-1-2", ToolStatus::Completed), "three");
    // Sequential: each command starts after the previous one ended.
    let r0 = position(
        events,
        "result 0",
        |e| matches!(e, AgentEvent::ToolResult { command_id, .. } if command_id == "cmd-1-0"),
    );
    let s1 = position(
        events,
        "start 1",
        |e| matches!(e, AgentEvent::ToolStart { command_id, .. } if command_id == "cmd-1-1"),
    );
    assert!(r0 < s1);
    let ends: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::IterationEnd { .. }))
        .collect();
    assert_eq!(
        ends,
        [
            &AgentEvent::IterationEnd {
                iteration: 1,
                has_more_commands: true
            },
            &AgentEvent::IterationEnd {
                iteration: 2,
                has_more_commands: false
            }
        ]
    );
    assert_eq!(
        last_event(events),
        &AgentEvent::Done {
            reason: DoneReason::Completed
        }
    );
    assert_eq!(turn.outcome, RunOutcome::Completed);
    assert_eq!(
        roles(&turn.session),
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(turn.session.messages[1].content, reply, "stored verbatim");
    assert_eq!(
        turn.session.messages[2].content,
        "$ echo one\none\n\n$ echo two >&2\ntwo\n\n$ printf three\nthree"
    );
    assert_eq!(llm.request_count(), 2);
}

#[tokio::test]
async fn duplicate_commands_get_distinct_ids_and_their_own_results() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "").unwrap();
    std::fs::write(dir.path().join("b.txt"), "").unwrap();
    let (turn, _llm) = one_turn(
        vec![Reply::text("<shell>ls</shell> <shell>ls</shell>")],
        dir.path(),
        "list twice",
    )
    .await;
    assert_eq!(ids(&turn.events), ["cmd-1-0", "cmd-1-1"]);
    for id in ["cmd-1-0", "cmd-1-1"] {
        assert_eq!(
            lifecycle(&turn.events, id, ToolStatus::Completed),
            "a.txt\nb.txt\n"
        );
    }
    let results = turn
        .events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolResult { .. }))
        .count();
    assert_eq!(results, 2, "one result per command");
}

#[tokio::test]
async fn the_model_reacts_to_results_over_several_iterations() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, llm) = one_turn(
        vec![
            Reply::text("First: <shell>echo 41</shell>"),
            Reply::text("Now: <shell>echo $((41 + 1))</shell>"),
            Reply::text("The answer is 42."),
        ],
        dir.path(),
        "compute",
    )
    .await;
    assert_eq!(ids(&turn.events), ["cmd-1-0", "cmd-2-0"]);
    assert_eq!(
        lifecycle(&turn.events, "cmd-2-0", ToolStatus::Completed),
        "42\n"
    );
    assert_eq!(turn.outcome, RunOutcome::Completed);
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let second = requests[1]["messages"].as_array().unwrap();
    let last = second.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"],
        format!("{TOOL_RESULTS_OPEN}$ echo 41\n41\n</tool_results>")
    );
    assert_eq!(second[0]["role"], "system");
    assert!(second[0]["content"].as_str().unwrap().contains("<shell>"));
    assert_eq!(
        roles(&turn.session),
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
}

#[tokio::test]
async fn tags_split_across_chunks_are_found_and_text_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let chunks = [
        "Let me look. <sh",
        "ell>ec",
        "ho hi</sh",
        "ell> and <",
        "/shell> ok",
    ];
    let (turn, _llm) = one_turn(
        vec![Reply::chunks(chunks), Reply::text("done")],
        dir.path(),
        "look",
    )
    .await;
    assert_eq!(ids(&turn.events), ["cmd-1-0"]);
    assert_eq!(
        lifecycle(&turn.events, "cmd-1-0", ToolStatus::Completed),
        "hi\n"
    );
    let whole: String = chunks.concat();
    let streamed = text_of(&turn.events);
    assert!(streamed.starts_with(&whole), "{streamed:?}");
    assert_eq!(turn.session.messages[1].content, whole);
}

#[tokio::test]
async fn the_iteration_cap_stops_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(
        (0..6)
            .map(|i| Reply::text(&format!("<shell>echo {i}; touch ran-{i}</shell>")))
            .collect(),
    )
    .await;
    let agent = agent(&llm);
    let options = RunOptions {
        max_iterations: 3,
        ..RunOptions::default()
    };
    let turn = turn(&agent, Session::new(dir.path()), "loop", &options).await;
    assert_eq!(llm.request_count(), 3);
    assert_eq!(ids(&turn.events), ["cmd-1-0", "cmd-2-0", "cmd-3-0"]);
    assert_eq!(
        lifecycle(&turn.events, "cmd-2-0", ToolStatus::Completed),
        "1\n"
    );
    // Nobody would read the last reply's results: its command is reported, not run.
    assert_eq!(
        lifecycle_skipped(&turn.events, "cmd-3-0"),
        ToolStatus::Skipped
    );
    assert!(dir.path().join("ran-1").exists());
    assert!(!dir.path().join("ran-2").exists());
    let last = turn.session.messages.last().unwrap();
    assert!(
        last.content
            .starts_with("$ echo 2; touch ran-2\n[not run: the iteration limit (3) was reached"),
        "{last:?}"
    );
    assert_eq!(last.tool_runs[0].status, "skipped");
    assert!(turn.events.contains(&AgentEvent::IterationEnd {
        iteration: 3,
        has_more_commands: false
    }));
    assert_eq!(
        last_event(&turn.events),
        &AgentEvent::Done {
            reason: DoneReason::MaxIterations
        }
    );
    assert_eq!(turn.outcome, RunOutcome::MaxIterations);
    assert_eq!(turn.session.messages.last().unwrap().role, Role::Tool);
}

#[tokio::test]
async fn the_default_cap_is_ten_iterations() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, llm) = one_turn(
        (0..12)
            .map(|i| Reply::text(&format!("<shell>echo {i}</shell>")))
            .collect(),
        dir.path(),
        "forever",
    )
    .await;
    assert_eq!(llm.request_count(), 10);
    assert_eq!(turn.outcome, RunOutcome::MaxIterations);
    assert_eq!(ids(&turn.events).last().unwrap(), "cmd-10-0");
}

#[tokio::test]
async fn a_huge_output_is_truncated_in_the_tool_message_only() {
    let dir = tempfile::tempdir().unwrap();
    let command = "printf HEAD; head -c 10000 /dev/zero | tr '\\0' x; printf TAIL";
    let (turn, llm) = one_turn(
        vec![
            Reply::text(&format!("<shell>{command}</shell>")),
            Reply::text("ok"),
        ],
        dir.path(),
        "big",
    )
    .await;
    let full = format!("HEAD{}TAIL", "x".repeat(10_000));
    assert_eq!(
        lifecycle(&turn.events, "cmd-1-0", ToolStatus::Completed),
        full,
        "the event carries the whole output"
    );
    let streamed: String = turn
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolOutput { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, full, "live output carries every byte");
    let tool = &turn.session.messages[2];
    let expected = format!(
        "$ {command}\n{}{}{}",
        &full[..1000],
        omitted_marker(full.len() - 2000),
        &full[full.len() - 1000..]
    );
    assert_eq!(tool.content, expected);
    let sent = llm.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(sent.contains("[… 8008 characters omitted …]"), "{sent}");
}

#[tokio::test]
async fn failures_are_reported_to_the_model_and_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, _llm) = one_turn(
        vec![
            Reply::text("<shell>echo oops; exit 3</shell><shell>true</shell>"),
            Reply::text("I see."),
        ],
        dir.path(),
        "fail",
    )
    .await;
    let result = lifecycle(&turn.events, "cmd-1-0", ToolStatus::Failed);
    assert_eq!(result, "oops\n[exit status 3]");
    assert_eq!(
        lifecycle(&turn.events, "cmd-1-1", ToolStatus::Completed),
        "(no output)"
    );
    let tool_runs = &turn.session.messages[2].tool_runs;
    assert_eq!(tool_runs[0].status, "failed");
    assert_eq!(tool_runs[0].exit_code, Some(3));
}

/// The request of iteration N+1 is the request of iteration N plus new messages, byte
/// for byte — also across user turns of the same session.
#[tokio::test]
async fn requests_only_ever_append_to_the_previous_request() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::chunks(["Step <shell>echo \"a\\tb\" ", "é</shell>"]),
        Reply::text("<shell>printf '}]\\n'</shell> more"),
        Reply::text("done"),
        Reply::text("<shell>echo second turn</shell>"),
        Reply::text("bye"),
    ])
    .await;
    let agent = agent(&llm);
    let first = turn(
        &agent,
        Session::new(dir.path()),
        "go",
        &RunOptions::default(),
    )
    .await;
    let second = turn(&agent, first.session, "again", &RunOptions::default()).await;
    assert_eq!(second.outcome, RunOutcome::Completed);
    let raw = llm.raw_requests();
    assert_eq!(raw.len(), 5);
    const SUFFIX: &[u8] =
        b"],\"stream\":true,\"max_tokens\":4096,\"stop\":[\"\\n<tool_results>\",\"\\n[exit status\"]}";
    for pair in raw.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert!(
            before.ends_with(SUFFIX),
            "{}",
            String::from_utf8_lossy(before)
        );
        let prefix = &before[..before.len() - SUFFIX.len()];
        assert!(
            after.starts_with(prefix) && after[prefix.len()] == b',',
            "request is not the previous one plus new messages:\n{}\n---\n{}",
            String::from_utf8_lossy(before),
            String::from_utf8_lossy(after)
        );
    }
}

#[tokio::test]
async fn the_working_directory_carries_over_like_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>cd sub</shell><shell>pwd</shell>"),
        Reply::text("<shell>pwd</shell>"),
        Reply::text("done"),
        Reply::text("<shell>cd .. && pwd</shell>"),
        Reply::text("done"),
    ])
    .await;
    let agent = agent(&llm);
    let first = turn(
        &agent,
        Session::new(dir.path()),
        "cd",
        &RunOptions::default(),
    )
    .await;
    let sub = dir.path().join("sub").canonicalize().unwrap();
    let expected = format!("{}\n", sub.display());
    assert_eq!(
        lifecycle(&first.events, "cmd-1-1", ToolStatus::Completed),
        expected
    );
    assert_eq!(
        lifecycle(&first.events, "cmd-2-0", ToolStatus::Completed),
        expected
    );
    let second = turn(&agent, first.session, "again", &RunOptions::default()).await;
    assert_eq!(
        lifecycle(&second.events, "cmd-1-0", ToolStatus::Completed),
        format!("{}\n", dir.path().canonicalize().unwrap().display())
    );
}

#[tokio::test]
async fn without_a_model_runs_fail_with_llm_unavailable_and_keep_the_message() {
    let agent = AgentLoop::new(None, Registry::with_defaults());
    let turn = turn(&agent, Session::new("/"), "hello", &RunOptions::default()).await;
    assert_eq!(error_code(&turn.events), "LLM_UNAVAILABLE");
    assert_eq!(turn.session.messages.len(), 2);
    assert_eq!(turn.session.messages[0].content, "hello");
    assert_eq!(turn.session.messages[1].status, TurnStatus::Failed);
    assert!(matches!(turn.outcome, RunOutcome::Failed { .. }));
}

/// Runs a turn whose script starts with `first`, returns the error code and the turn.
async fn provider_error(first: Reply) -> (String, Turn) {
    let dir = tempfile::tempdir().unwrap();
    let (turn, _llm) = one_turn(vec![first], dir.path(), "hi").await;
    (error_code(&turn.events), turn)
}

#[tokio::test]
async fn provider_http_errors_end_with_an_error_event() {
    let (code, turn) = provider_error(Reply::Status(
        500,
        r#"{"error":{"message":"model overloaded"}}"#.into(),
    ))
    .await;
    assert_eq!(code, "LLM_HTTP_ERROR");
    let AgentEvent::Error { message, .. } = turn.events.last().unwrap() else {
        unreachable!()
    };
    assert!(message.contains("500") && message.contains("model overloaded"));
    assert_eq!(
        turn.session.messages[0].content, "hi",
        "the user message is kept"
    );

    let (code, _) = provider_error(Reply::Status(
        401,
        r#"{"error":{"message":"bad key"}}"#.into(),
    ))
    .await;
    assert_eq!(code, "LLM_HTTP_ERROR");
}

#[tokio::test]
async fn a_malformed_stream_ends_with_an_error_event() {
    let (code, _) = provider_error(Reply::Raw(vec!["data: {not json\n\n".into()])).await;
    assert_eq!(code, "LLM_BAD_STREAM");
}

#[tokio::test]
async fn a_refused_connection_is_llm_unavailable() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let llm: Arc<dyn LlmClient> = Arc::new(
        OpenAiClient::new(LlmConfig::new(
            format!("http://127.0.0.1:{port}/v1"),
            "fake-model",
        ))
        .unwrap(),
    );
    let agent = AgentLoop::new(Some(llm), Registry::with_defaults());
    let turn = turn(&agent, Session::new("/"), "hi", &RunOptions::default()).await;
    assert_eq!(error_code(&turn.events), "LLM_UNAVAILABLE");
}

#[tokio::test]
async fn a_stream_cut_midway_keeps_what_arrived_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let partial = format!("Working <shell>touch {}</shell> then", marker.display());
    let (turn, _llm) = one_turn(
        vec![Reply::CutAfter(vec![partial.clone()])],
        dir.path(),
        "hi",
    )
    .await;
    assert_eq!(error_code(&turn.events), "LLM_STREAM_CUT");
    let assistant = &turn.session.messages[1];
    assert_eq!(
        assistant.content, partial,
        "nothing already received is lost"
    );
    assert_eq!(assistant.status, TurnStatus::Failed);
    assert_eq!(
        lifecycle_skipped(&turn.events, "cmd-1-0"),
        ToolStatus::Skipped
    );
    assert!(!marker.exists(), "a command of a broken reply never runs");
}

#[tokio::test]
async fn an_error_in_a_later_iteration_keeps_the_earlier_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (turn, _llm) = one_turn(
        vec![
            Reply::text("<shell>echo kept</shell>"),
            Reply::Status(500, "internal".into()),
        ],
        dir.path(),
        "hi",
    )
    .await;
    assert_eq!(error_code(&turn.events), "LLM_HTTP_ERROR");
    assert_eq!(
        roles(&turn.session),
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(turn.session.messages[2].content, "$ echo kept\nkept");
}

/// A command announced but never started gets a `skipped` result (no client is left
/// showing it queued).
fn lifecycle_skipped(events: &[AgentEvent], id: &str) -> ToolStatus {
    assert!(!events
        .iter()
        .any(|e| matches!(e, AgentEvent::ToolStart { command_id, .. } if command_id == id)));
    let i = position(
        events,
        "tool-result",
        |e| matches!(e, AgentEvent::ToolResult { command_id, .. } if command_id == id),
    );
    match &events[i] {
        AgentEvent::ToolResult { status, .. } => *status,
        _ => unreachable!(),
    }
}

/// A turn running in the background, observed event by event.
struct Live {
    events: mpsc::Receiver<AgentEvent>,
    seen: Vec<AgentEvent>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<(Session, RunOutcome)>,
}

impl Live {
    fn start(agent: AgentLoop, session: Session, instruction: &str) -> Live {
        let (tx, events) = mpsc::channel(16);
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let instruction = instruction.to_owned();
        let task = tokio::spawn(async move {
            let mut session = session;
            let outcome = agent
                .run_turn(
                    &mut session,
                    instruction,
                    &RunOptions::default(),
                    &tx,
                    &token,
                )
                .await;
            (session, outcome)
        });
        Live {
            events,
            seen: Vec::new(),
            cancel,
            task,
        }
    }

    /// Waits for the first event matching `pred`.
    async fn until(&mut self, pred: impl Fn(&AgentEvent) -> bool) -> AgentEvent {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(20), self.events.recv())
                .await
                .expect("an event within 20 s")
                .expect("the run goes on");
            self.seen.push(event.clone());
            if pred(&event) {
                return event;
            }
        }
    }

    /// Cancels, then collects the rest.
    async fn abort(mut self) -> Turn {
        self.cancel.cancel();
        while let Some(event) = self.events.recv().await {
            self.seen.push(event);
        }
        let (session, outcome) = self.task.await.unwrap();
        Turn {
            events: self.seen,
            session,
            outcome,
        }
    }
}

#[tokio::test]
async fn abort_during_the_model_stream_records_the_partial_reply_as_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let partial = format!("Let me <shell>touch {}</shell> and", marker.display());
    let llm = FakeLlm::start(vec![Reply::Hang(vec![partial.clone()])]).await;
    let mut live = Live::start(agent(&llm), Session::new(dir.path()), "hi");
    live.until(|e| matches!(e, AgentEvent::ToolCall { .. }))
        .await;
    let turn = live.abort().await;
    llm.wait_disconnects(1).await;
    assert_eq!(turn.outcome, RunOutcome::Stopped);
    assert_eq!(
        last_event(&turn.events),
        &AgentEvent::Done {
            reason: DoneReason::Stopped
        }
    );
    let assistant = &turn.session.messages[1];
    assert_eq!(
        (assistant.content.as_str(), assistant.status),
        (partial.as_str(), TurnStatus::Stopped)
    );
    assert_eq!(
        lifecycle_skipped(&turn.events, "cmd-1-0"),
        ToolStatus::Skipped
    );
    assert!(!marker.exists(), "nothing starts after an abort");
    assert_eq!(llm.request_count(), 1);
}

fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn abort_during_a_command_kills_its_process_tree_and_starts_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let reply = format!(
        "<shell>sleep 1000 & echo $!; sleep 1000</shell><shell>touch {}</shell>",
        marker.display()
    );
    let llm = FakeLlm::start(vec![Reply::text(&reply)]).await;
    let mut live = Live::start(agent(&llm), Session::new(dir.path()), "hi");
    let AgentEvent::ToolOutput { content, .. } = live
        .until(|e| matches!(e, AgentEvent::ToolOutput { .. }))
        .await
    else {
        unreachable!()
    };
    let pid: i32 = content.trim().parse().unwrap();
    assert!(!gone(pid));
    let turn = live.abort().await;
    assert_eq!(turn.outcome, RunOutcome::Stopped);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !gone(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "sleep {pid} survived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let result = lifecycle(&turn.events, "cmd-1-0", ToolStatus::Stopped);
    assert!(result.starts_with(&format!("{pid}\n")), "{result}");
    assert_eq!(
        lifecycle_skipped(&turn.events, "cmd-1-1"),
        ToolStatus::Skipped
    );
    assert!(!marker.exists());
    let tool = turn.session.messages.last().unwrap();
    assert_eq!((tool.role, tool.status), (Role::Tool, TurnStatus::Stopped));
    assert_eq!(
        last_event(&turn.events),
        &AgentEvent::Done {
            reason: DoneReason::Stopped
        }
    );
    assert_eq!(llm.request_count(), 1, "the model is not asked again");
}
