//! Background processes in the agent loop (docs/agents.md, "Processes"): the model starts
//! a real dev server with `<shell background …>`, curls it, reads its output with
//! `<process-output>`, answers a prompt with `<process-input>` and stops it with
//! `<process-kill>` — across turns — through a real registry, with the fake LLM.

use std::sync::Arc;

use cmdr::agent::{
    AgentEvent, AgentLoop, RunOptions, RunOutcome, Session, TagKind, ToolStatus,
    TOOL_RESULTS_CLOSE, TOOL_RESULTS_OPEN,
};
use cmdr::executors::{Command, ExecutionStatus, ProcessListCommand, Registry};
use cmdr::llm::{LlmClient, LlmConfig, OpenAiClient};
use cmdr_test_support::http::gone;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::fake_llm::{FakeLlm, Reply};

/// A process that is ready at once, then prints nothing more.
const SLEEPER: &str = "<shell background ready=\"ready\">echo ready; exec sleep 300</shell>";

fn agent(llm: &FakeLlm) -> AgentLoop {
    let client: Arc<dyn LlmClient> =
        Arc::new(OpenAiClient::new(LlmConfig::new(llm.base_url(), "fake-model")).unwrap());
    AgentLoop::new(Some(client), Registry::with_defaults())
}

/// Runs one turn on `session` to its end: its outcome and events.
async fn turn(
    agent: &AgentLoop,
    session: &mut Session,
    instruction: &str,
) -> (RunOutcome, Vec<AgentEvent>) {
    let (tx, mut rx) = mpsc::channel(64);
    let collector = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        events
    });
    let outcome = agent
        .run_turn(
            session,
            instruction.to_owned(),
            &RunOptions::default(),
            &tx,
            &CancellationToken::new(),
        )
        .await;
    drop(tx);
    (outcome, collector.await.unwrap())
}

/// The `tool` message the model was sent in request `index` (its last message).
fn results_sent(llm: &FakeLlm, index: usize) -> String {
    let request = &llm.requests()[index];
    let messages = request["messages"].as_array().unwrap();
    let last = messages.last().unwrap()["content"].as_str().unwrap();
    let inner = last
        .strip_prefix(TOOL_RESULTS_OPEN)
        .and_then(|s| s.strip_suffix(TOOL_RESULTS_CLOSE))
        .unwrap_or_else(|| panic!("not a tool message: {last}"));
    inner.trim_matches('\n').to_owned()
}

/// The `tool-result` events: (kind of the call, status, processId, processState, text).
fn results(events: &[AgentEvent]) -> Vec<(ToolStatus, Option<String>, Option<String>, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                status,
                process_id,
                process_state,
                result,
                ..
            } => Some((
                *status,
                process_id.clone(),
                process_state.clone(),
                result.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// The process list of the session's scope.
async fn processes(registry: &Registry, session: &Session) -> Vec<Value> {
    let list = Command::ProcessList(ProcessListCommand::default());
    let mut stream = registry
        .execute_in(session.scope.clone(), list)
        .await
        .unwrap();
    let mut last = None;
    while let Some(message) = stream.next().await {
        last = Some(message);
    }
    let last = last.unwrap();
    assert_eq!(last.status, ExecutionStatus::Succeeded, "{last:?}");
    serde_json::from_str(&last.result_data).unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn the_model_runs_a_dev_server_across_turns_and_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("health"), "healthy").unwrap();
    let port = free_port();
    // The ready text has regex metacharacters: it is matched literally.
    let ready = format!("Serving HTTP on 127.0.0.1 port {port} (http://127.0.0.1:{port}/)");
    let llm = FakeLlm::start(vec![
        Reply::chunks([
            "Starting it.\n<shell background ready=\"",
            ready.as_str(),
            "\">exec python3 -u -m http.server ",
            &format!("{port} --bind 127.0.0.1</sh"),
            "ell>",
        ]),
        Reply::text(&format!(
            "<shell>curl -s http://127.0.0.1:{port}/health</shell>"
        )),
        Reply::text("The server is up on its port."),
        // The next turn: read what it logged, then stop it.
        Reply::chunks(["<process-out", "put id=\"p1\"/>"]),
        Reply::text("<process-kill id=\"p1\"/>"),
        Reply::text("Stopped."),
    ])
    .await;
    let agent = agent(&llm);
    let mut session = Session::new(dir.path());

    let (outcome, events) = turn(&agent, &mut session, "start a web server").await;
    assert_eq!(outcome, RunOutcome::Completed, "{events:#?}");
    let started = results(&events);
    assert_eq!(started[0].0, ToolStatus::Completed, "{started:#?}");
    assert_eq!(started[0].1.as_deref(), Some("p1"));
    assert_eq!(started[0].2.as_deref(), Some("running"));
    let call = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolCall {
                background, kind, ..
            } => Some((*background, *kind)),
            _ => None,
        })
        .unwrap();
    assert_eq!(call, (true, TagKind::Shell));
    let told = results_sent(&llm, 1);
    assert!(told.contains(&ready), "{told}");
    assert!(told.contains("[background process p1: running]"), "{told}");
    assert_eq!(started[1].3, "healthy", "{started:#?}");

    // Between turns the server keeps running.
    let listed = processes(agent.registry(), &session).await;
    assert_eq!(listed[0]["state"], "running", "{listed:#?}");
    let pid = i32::try_from(listed[0]["pid"].as_i64().unwrap()).unwrap();
    assert!(!gone(pid));
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());

    let (outcome, events) = turn(&agent, &mut session, "what did it log? then stop it").await;
    assert_eq!(outcome, RunOutcome::Completed, "{events:#?}");
    let read = results_sent(&llm, 4);
    assert!(read.starts_with("<process-output id=\"p1\"/>\n"), "{read}");
    assert!(read.contains("\"GET /health HTTP/1.1\" 200"), "{read}");
    assert!(read.contains("[process p1: running]"), "{read}");
    let output_call = events.iter().find_map(|e| match e {
        AgentEvent::ToolCall {
            kind, process_id, ..
        } => Some((*kind, process_id.clone())),
        _ => None,
    });
    assert_eq!(
        output_call,
        Some((TagKind::ProcessOutput, Some("p1".to_owned())))
    );
    let killed = results_sent(&llm, 5);
    assert!(killed.contains("[Stopped p1 ("), "{killed}");
    let ended = results(&events);
    assert_eq!(ended[1].2.as_deref(), Some("exited"), "{ended:#?}");

    assert!(gone(pid), "the server's shell {pid} is still there");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    assert_eq!(
        processes(agent.registry(), &session).await[0]["state"],
        "exited"
    );
}

#[tokio::test]
async fn a_prompt_is_answered_with_process_input() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text(
            "<shell background>printf 'Proceed? [y/N] '; read answer; echo \"got $answer\"</shell>\n\
             <shell background>cat -n; echo closed</shell>",
        ),
        Reply::text(
            "<process-input id=\"p1\">y</process-input>\n\
             <process-input id=\"p2\" eof>last line</process-input>",
        ),
        Reply::text("<process-input id=\"p1\">again</process-input>"),
        Reply::text("Done."),
    ])
    .await;
    let agent = agent(&llm);
    let mut session = Session::new(dir.path());
    let (outcome, events) = turn(&agent, &mut session, "install it").await;
    assert_eq!(outcome, RunOutcome::Completed, "{events:#?}");

    let asked = results_sent(&llm, 1);
    assert!(asked.contains("Proceed? [y/N] "), "{asked}");
    let answered = results_sent(&llm, 2);
    assert!(
        answered.starts_with("<process-input id=\"p1\">y</process-input>\ngot y\n"),
        "{answered}"
    );
    assert!(
        answered.contains("     1\tlast line\nclosed\n[process p2: exited with code 0]"),
        "{answered}"
    );
    // Input to a process that has exited: told, not run.
    let late = results_sent(&llm, 3);
    assert!(late.contains("PROCESS_EXITED"), "{late}");
    let statuses: Vec<ToolStatus> = results(&events).iter().map(|r| r.0).collect();
    assert_eq!(
        statuses,
        [
            ToolStatus::Completed,
            ToolStatus::Completed,
            ToolStatus::Completed,
            ToolStatus::Completed,
            ToolStatus::Failed
        ]
    );
}

#[tokio::test]
async fn unknown_ids_and_bad_tags_are_told_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let llm = FakeLlm::start(vec![
        Reply::text(
            "<process-output id=\"p99\"/>\n<process-kill/>\n<shell cwd=\"/\">ls</shell>\n\
             Shown, not run:\n```\n<process-kill id=\"p1\"/>\n```\n\
             <process-input id=\"p7\" key=\"f13\"/>",
        ),
        Reply::text("Sorry."),
    ])
    .await;
    let agent = agent(&llm);
    let mut session = Session::new(dir.path());
    let (outcome, events) = turn(&agent, &mut session, "read p99").await;
    assert_eq!(outcome, RunOutcome::Completed, "{events:#?}");
    let told = results_sent(&llm, 1);
    let blocks: Vec<&str> = told.split("\n\n").collect();
    assert_eq!(blocks.len(), 4, "{told}");
    assert!(
        blocks[0].starts_with("<process-output id=\"p99\"/>\n[PROCESS_NOT_FOUND: "),
        "{told}"
    );
    assert!(blocks[1].contains("not run: which process?"), "{told}");
    assert!(blocks[2].contains("<shell> has no attribute cwd"), "{told}");
    assert!(blocks[3].contains("not a key cmdr knows"), "{told}");
    let all = results(&events);
    assert!(all.iter().all(|r| r.0 == ToolStatus::Failed), "{all:#?}");
    assert_eq!(all[0].1.as_deref(), Some("p99"));
    assert!(processes(agent.registry(), &session).await.is_empty());
}

#[tokio::test]
async fn waiting_for_a_running_process_is_not_repetition_but_the_cap_bounds_it() {
    let dir = tempfile::tempdir().unwrap();
    let poll = "<process-output id=\"p1\" wait=\"0\"/>";
    let mut script = vec![Reply::text(SLEEPER)];
    // Four identical polls with identical (empty) results: waiting, not repeating.
    script.extend((0..4).map(|_| Reply::text(poll)));
    script.push(Reply::text("Still building."));
    // The next turn polls for ever: the iteration cap ends it.
    script.extend((0..3).map(|_| Reply::text(poll)));
    let llm = FakeLlm::start(script).await;
    let looped = agent(&llm);
    let mut session = Session::new(dir.path());
    let (outcome, events) = turn(&looped, &mut session, "build it").await;
    assert_eq!(outcome, RunOutcome::Completed, "{events:#?}");
    for index in 2..=5 {
        let told = results_sent(&llm, index);
        assert_eq!(told, format!("{poll}\n[process p1: running]"));
    }
    let capped = RunOptions {
        max_iterations: 3,
        ..RunOptions::default()
    };
    let (tx, _rx) = mpsc::channel(64);
    let outcome = looped
        .run_turn(
            &mut session,
            "wait more".to_owned(),
            &capped,
            &tx,
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome, RunOutcome::MaxIterations);

    // A one-shot command repeated with the same result is still repetition.
    let llm = FakeLlm::start(vec![
        Reply::text("<shell>echo same</shell>"),
        Reply::text("<shell>echo same</shell>"),
        Reply::text("<shell>echo same</shell>"),
    ])
    .await;
    let (outcome, _) = turn(&agent(&llm), &mut Session::new(dir.path()), "go").await;
    assert_eq!(outcome, RunOutcome::Repeating);
}
