//! The process tools over MCP (docs/processes.md): a background prompt answered through
//! `process_input`, output read by offset, a session keeping its state, the list, kill,
//! and an unknown id as a tool error; scopes: two sessions and REST each see only their
//! own processes, and a session's processes die when it is closed or expires; through a
//! real `cmdr serve`, a `tty` process's `isatty` prompt answered and its terminal resized,
//! and the terminal arguments the tools cannot use refused.

use serde_json::{json, Value};

use cmdr_test_support::http::{eventually, gone};
use cmdr_test_support::serve::{Options, Serve};
use cmdr_test_support::PATIENCE;

use crate::mcp::rpc::{assert_error, tool_json, Rpc};
use crate::mcp::{Server, World};

async fn call(rpc: &mut Rpc, tool: &str, args: Value) -> (Value, bool) {
    let answer = rpc.call(tool, args).await;
    tool_json(&answer)
}

#[tokio::test]
async fn a_background_prompt_is_started_answered_read_listed_and_killed() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;

    let (started, is_error) = call(
        &mut rpc,
        "start_process",
        json!({"command": "echo waiting; read -r name; echo \"hello $name\"; sleep 60",
               "working_dir": world.work(), "ready": {"output": "waiting"}}),
    )
    .await;
    assert!(!is_error, "{started}");
    assert_eq!(started["processState"], "running");
    assert_eq!(started["resultData"], "waiting\n");
    let id = started["processId"].as_str().unwrap().to_owned();

    let (_, is_error) = call(
        &mut rpc,
        "process_input",
        json!({"process_id": id, "input": "Ada\n", "yield_ms": 50}),
    )
    .await;
    assert!(!is_error);
    let (read, _) = call(
        &mut rpc,
        "process_output",
        json!({"process_id": id, "offset": 0, "wait_ms": 100}),
    )
    .await;
    let mut text = read["resultData"].as_str().unwrap().to_owned();
    let mut offset = read["nextOffset"].as_u64().unwrap();
    while !text.contains("hello Ada") {
        let (more, _) = call(
            &mut rpc,
            "process_output",
            json!({"process_id": id, "offset": offset, "wait_ms": 1000}),
        )
        .await;
        text.push_str(more["resultData"].as_str().unwrap_or_default());
        offset = more["nextOffset"].as_u64().unwrap();
    }
    assert_eq!(text, "waiting\nhello Ada\n");

    let (list, _) = call(&mut rpc, "list_processes", json!({})).await;
    let entries: Vec<Value> = serde_json::from_str(list["resultData"].as_str().unwrap()).unwrap();
    assert!(entries
        .iter()
        .any(|e| e["processId"] == id.as_str() && e["state"] == "running"));

    let (killed, is_error) = call(&mut rpc, "kill_process", json!({"process_id": id})).await;
    assert!(!is_error, "{killed}");
    assert_eq!(killed["processState"], "exited");

    let (missing, is_error) = call(&mut rpc, "process_output", json!({"process_id": "p404"})).await;
    assert!(is_error);
    assert_eq!(missing["errorCode"], "PROCESS_NOT_FOUND");
}

#[tokio::test]
async fn bash_exec_with_a_session_keeps_the_shells_state_between_calls() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let work = world.work();
    let (first, is_error) = call(
        &mut rpc,
        "bash_exec",
        json!({"command": "cd sub 2>/dev/null || mkdir sub && cd sub; COUNT=41", "session": "dev", "working_dir": work}),
    )
    .await;
    assert!(!is_error, "{first}");
    let (second, _) = call(
        &mut rpc,
        "bash_exec",
        json!({"command": "echo $((COUNT + 1)); basename \"$PWD\"", "session": "dev"}),
    )
    .await;
    assert_eq!(second["resultData"], "42\nsub\n", "{second}");
    assert!(second["finalCwd"].as_str().unwrap().ends_with("/sub"));
}

/// The REST API over the same state as an MCP server, on its own port.
async fn rest_beside(server: &Server) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = cmdr::http::router(server.state.clone());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, task)
}

/// The number after `key=` in `text`.
fn number_after(text: &str, key: &str) -> i32 {
    text.split(key)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text:?}"))
}

/// Starts `command` in the background over `rpc`, ready once it printed `ready`; its id
/// and first output.
async fn start(rpc: &mut Rpc, command: &str, ready: &str) -> (String, String) {
    let (started, is_error) = call(
        rpc,
        "start_process",
        json!({"command": command, "ready": {"output": ready}}),
    )
    .await;
    assert!(!is_error, "{started}");
    let id = started["processId"].as_str().unwrap().to_owned();
    (id, started["resultData"].as_str().unwrap().to_owned())
}

async fn listed(rpc: &mut Rpc) -> Vec<String> {
    let (list, is_error) = call(rpc, "list_processes", json!({})).await;
    assert!(!is_error, "{list}");
    let entries: Vec<Value> = serde_json::from_str(list["resultData"].as_str().unwrap()).unwrap();
    entries
        .iter()
        .map(|e| e["processId"].as_str().unwrap().to_owned())
        .collect()
}

/// Ends `rpc`'s session the way a client does: `DELETE` with its session id.
async fn delete_session(rpc: &Rpc) {
    let response = rpc
        .http
        .delete(&rpc.url)
        .header("mcp-session-id", rpc.session.as_deref().unwrap())
        .header("mcp-protocol-version", cmdr_test_support::mcp_rpc::PROTOCOL)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

#[tokio::test]
async fn two_sessions_and_rest_each_see_only_their_own_processes() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (rest, _rest_task) = rest_beside(&server).await;
    let http = reqwest::Client::new();
    let (mut alice, _) = Rpc::connect(&server.url(), None).await;
    let (mut mallory, _) = Rpc::connect(&server.url(), None).await;

    let (id, _) = start(
        &mut alice,
        "echo waiting; read -r name; echo \"hello $name\"; sleep 300",
        "waiting",
    )
    .await;
    // Another session: not found, whatever it tries.
    for (tool, args) in [
        ("process_output", json!({"process_id": id, "offset": 0})),
        (
            "process_input",
            json!({"process_id": id, "input": "Mallory\n"}),
        ),
        ("kill_process", json!({"process_id": id, "signal": "KILL"})),
    ] {
        let (refused, is_error) = call(&mut mallory, tool, args).await;
        assert!(is_error, "{tool}: {refused}");
        assert_eq!(
            refused["errorCode"], "PROCESS_NOT_FOUND",
            "{tool}: {refused}"
        );
    }
    assert!(listed(&mut mallory).await.is_empty());
    // Sessions of the same name are two shells.
    let (_, _) = call(
        &mut alice,
        "bash_exec",
        json!({"command": "SECRET=alice", "session": "dev"}),
    )
    .await;
    let (peek, _) = call(
        &mut mallory,
        "bash_exec",
        json!({"command": "echo \"${SECRET:-unset}\"", "session": "dev"}),
    )
    .await;
    assert_eq!(peek["resultData"], "unset\n", "{peek}");

    // REST neither.
    let (status, list) = get(&http, &format!("{rest}/processes")).await;
    assert_eq!(status, 200);
    assert_eq!(list["processes"], json!([]), "{list}");
    for path in [
        format!("/processes/{id}/output"),
        format!("/processes/{id}/output?stream=true"),
    ] {
        let (status, body) = get(&http, &format!("{rest}{path}")).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["code"], "PROCESS_NOT_FOUND", "{path}: {body}");
    }
    let killed = http
        .post(format!("{rest}/processes/{id}/kill"))
        .json(&json!({"signal": "KILL"}))
        .send()
        .await
        .unwrap();
    assert_eq!(killed.status(), 404);
    // … and what REST starts, MCP does not see.
    let started: Value = http
        .post(format!("{rest}/processes"))
        .json(&json!({"command": "sleep 300", "yield_ms": 0}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rest_id = started["processId"].as_str().unwrap().to_owned();
    let (refused, is_error) =
        call(&mut alice, "process_output", json!({"process_id": rest_id})).await;
    assert!(is_error);
    assert_eq!(refused["errorCode"], "PROCESS_NOT_FOUND", "{refused}");
    let (_, list) = get(&http, &format!("{rest}/processes")).await;
    assert_eq!(list["processes"].as_array().unwrap().len(), 1, "{list}");

    // The owner's process was untouched: it still answers its owner.
    let (reply, is_error) = call(
        &mut alice,
        "process_input",
        json!({"process_id": id, "input": "Alice\n", "yield_ms": 5000}),
    )
    .await;
    assert!(!is_error, "{reply}");
    assert!(
        reply["resultData"]
            .as_str()
            .unwrap()
            .contains("hello Alice"),
        "{reply}"
    );
    assert_eq!(
        listed(&mut alice).await.len(),
        2,
        "the process and the session shell"
    );
}

async fn get(http: &reqwest::Client, url: &str) -> (u16, Value) {
    let response = http.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn closing_a_session_kills_its_processes_and_no_other() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut closing, _) = Rpc::connect(&server.url(), None).await;
    let (mut staying, _) = Rpc::connect(&server.url(), None).await;
    let (_, text) = start(
        &mut closing,
        "trap '' TERM; setsid sleep 300 & echo \"pid=$$ child=$!\"; while :; do sleep 0.05; done",
        "child=",
    )
    .await;
    let (pid, child) = (number_after(&text, "pid="), number_after(&text, "child="));
    let (session, _) = call(
        &mut closing,
        "bash_exec",
        json!({"command": "echo \"shell=$$\"", "session": "dev"}),
    )
    .await;
    let shell = number_after(session["resultData"].as_str().unwrap(), "shell=");
    let (kept, text) = start(&mut staying, "echo \"pid=$$\"; exec sleep 300", "pid=").await;
    let kept_pid = number_after(&text, "pid=");

    delete_session(&closing).await;

    for pid in [pid, child, shell] {
        eventually(
            &format!("{pid} of the closed session is gone"),
            async || gone(pid),
        )
        .await;
    }
    assert!(!gone(kept_pid), "the other session's process was killed");
    assert_eq!(listed(&mut staying).await, vec![kept]);
}

#[tokio::test]
async fn an_idle_session_expires_with_its_processes() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let limits = cmdr::mcp::SessionLimits {
        idle: std::time::Duration::from_secs(1),
        ..cmdr::mcp::SessionLimits::default()
    };
    let server = Server::start_with(state, limits).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let (_, text) = start(&mut rpc, "echo \"pid=$$\"; exec sleep 300", "pid=").await;
    let pid = number_after(&text, "pid=");
    // Nothing more is sent: the session expires, and its process with it.
    eventually("the idle session's process is gone", async || gone(pid)).await;
}

/// The output of process `id` over `rpc` from offset 0 until it contains `needle`
/// (within `PATIENCE`).
async fn output_until(rpc: &mut Rpc, id: &str, needle: &str) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (mut text, mut offset) = (String::new(), 0);
    loop {
        let (read, is_error) = call(
            rpc,
            "process_output",
            json!({"process_id": id, "offset": offset, "wait_ms": 500}),
        )
        .await;
        assert!(!is_error, "{read}");
        text.push_str(read["resultData"].as_str().unwrap_or_default());
        offset = read["nextOffset"].as_u64().unwrap();
        if text.contains(needle) {
            return text;
        }
        // An exited process may still have output to read (a terminal's `\r\n` comes in a
        // write of its own): only a read that brings nothing after the exit is the end.
        let more = read["processState"] == "running"
            || !read["resultData"].as_str().unwrap_or_default().is_empty();
        assert!(
            tokio::time::Instant::now() < deadline && more,
            "no {needle:?} in the output of {id}: {text:?} ({read})"
        );
    }
}

#[tokio::test]
async fn a_tty_process_answers_an_isatty_prompt_and_resizes_through_the_tools() {
    let serve = Serve::start(Options::default()).await;
    let (mut rpc, _) = Rpc::connect(&serve.mcp, None).await;
    let listed = rpc.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let schema = |name: &str| {
        tools.iter().find(|t| t["name"] == name).unwrap()["inputSchema"]["properties"].clone()
    };
    let start = schema("start_process");
    assert_eq!(start["tty"]["type"], "boolean", "{start}");
    assert_eq!(start["cols"]["minimum"], 1, "{start}");
    assert_eq!(schema("process_input")["rows"]["minimum"], 1);

    let prompt =
        "python3 -c 'import sys; assert sys.stdin.isatty(); print(\"got\", input(\"Proceed? \"))'";
    let (started, is_error) = call(
        &mut rpc,
        "start_process",
        json!({"command": prompt, "tty": true, "ready": {"output": "Proceed\\? $"}}),
    )
    .await;
    assert!(!is_error, "{started}");
    let id = started["processId"].as_str().unwrap().to_owned();
    let (reply, is_error) = call(
        &mut rpc,
        "process_input",
        json!({"process_id": id, "input": "yes\n", "yield_ms": 0}),
    )
    .await;
    assert!(!is_error, "{reply}");
    // The terminal turns `\n` into `\r\n` in a write of its own: wait for the whole line.
    let text = output_until(&mut rpc, &id, "got yes\r\n").await;
    assert_eq!(text, "Proceed? yes\r\ngot yes\r\n");

    let (started, is_error) = call(
        &mut rpc,
        "start_process",
        json!({"command": "stty size; while read -r; do stty size; done", "tty": true,
               "cols": 100, "rows": 30, "ready": {"output": "\\d+ \\d+\\r\\n"}}),
    )
    .await;
    assert!(!is_error, "{started}");
    assert_eq!(started["resultData"], "30 100\r\n");
    let id = started["processId"].as_str().unwrap().to_owned();
    let (resized, is_error) = call(
        &mut rpc,
        "process_input",
        json!({"process_id": id, "rows": 43, "yield_ms": 0}),
    )
    .await;
    assert!(!is_error, "{resized}");
    assert!(
        resized["message"]
            .as_str()
            .unwrap()
            .contains("resized to 100x43"),
        "{resized}"
    );
    let (_, is_error) = call(
        &mut rpc,
        "process_input",
        json!({"process_id": id, "cols": 132, "input": "\n", "yield_ms": 0}),
    )
    .await;
    assert!(!is_error);
    let text = output_until(&mut rpc, &id, "43 132").await;
    assert_eq!(text, "30 100\r\n\r\n43 132\r\n");
    let (killed, is_error) = call(&mut rpc, "kill_process", json!({"process_id": id})).await;
    assert!(!is_error, "{killed}");
    assert_eq!(
        serve.stop().await,
        0,
        "cmdr stops cleanly, its processes with it"
    );
}

#[tokio::test]
async fn terminal_arguments_the_tools_cannot_use_are_refused_clearly() {
    let serve = Serve::start(Options::default()).await;
    let (mut rpc, _) = Rpc::connect(&serve.mcp, None).await;
    // A one-shot command or a session gets no terminal.
    for args in [
        json!({"command": "true", "tty": true}),
        json!({"command": "true", "tty": true, "session": "dev"}),
        json!({"command": "true", "cols": 100}),
    ] {
        let answer = rpc.call("bash_exec", args.clone()).await;
        let message = assert_error(&answer, -32602, "INVALID_REQUEST");
        assert!(
            message.contains("start_process and tty: true"),
            "{args}: {message}"
        );
    }
    // Values the executors refuse are tool errors with their code; values outside the
    // schema are invalid arguments.
    for (args, says) in [
        (
            json!({"command": "true", "tty": true, "rows": 0}),
            "at least 1",
        ),
        (json!({"command": "true", "cols": 100}), "set tty: true"),
    ] {
        let (refused, is_error) = call(&mut rpc, "start_process", args.clone()).await;
        assert!(is_error, "{args}: {refused}");
        assert_eq!(refused["errorCode"], "INVALID_INPUT", "{args}: {refused}");
        assert!(
            refused["error"].as_str().unwrap().contains(says),
            "{args}: {refused}"
        );
    }
    let answer = rpc
        .call(
            "start_process",
            json!({"command": "true", "tty": true, "cols": 70000}),
        )
        .await;
    assert_error(&answer, -32602, "INVALID_REQUEST");
    let (piped, _) = start(&mut rpc, "echo up; sleep 300", "up").await;
    let (refused, is_error) = call(
        &mut rpc,
        "process_input",
        json!({"process_id": piped, "cols": 100}),
    )
    .await;
    assert!(is_error, "{refused}");
    assert_eq!(refused["errorCode"], "INVALID_INPUT", "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("not started with tty: true"),
        "{refused}"
    );
    assert_eq!(
        listed(&mut rpc).await,
        vec![piped],
        "nothing refused was started"
    );
    assert_eq!(
        serve.stop().await,
        0,
        "cmdr stops cleanly, its processes with it"
    );
}

/// `start_process` takes `timeout_ms`, the process's lifetime: while it runs its reads say
/// when the lifetime ends, and once it is over the process is stopped and a read says
/// `TIMEOUT`.
#[tokio::test]
async fn start_process_takes_a_lifetime_and_the_reads_say_what_remains() {
    let world = World::new();
    let (state, _) = world.state(None, None);
    let server = Server::start(state).await;
    let (mut rpc, _) = Rpc::connect(&server.url(), None).await;
    let (started, is_error) = call(
        &mut rpc,
        "start_process",
        json!({"command": "echo up; sleep 60", "timeout_ms": 1500,
               "ready": {"output": "up"}}),
    )
    .await;
    assert!(!is_error, "{started}");
    let id = started["processId"].as_str().unwrap().to_owned();
    let (read, _) = call(&mut rpc, "process_output", json!({"process_id": id})).await;
    assert!(
        read["message"]
            .as_str()
            .unwrap()
            .contains("lifetime ends in"),
        "{read}"
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let ended = loop {
        let (read, _) = call(
            &mut rpc,
            "process_output",
            json!({"process_id": id, "wait_ms": 5000}),
        )
        .await;
        if read["processState"] == "exited" {
            break read;
        }
        assert!(tokio::time::Instant::now() < deadline, "{read}");
    };
    assert_eq!(ended["errorCode"], "TIMEOUT", "{ended}");
}
