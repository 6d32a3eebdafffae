//! Scopes over the bus (issue 32.3, docs/nats.md "Scopes over the bus"): the front doors
//! of one producer (`cmdr serve --nats`: MCP sessions, conversations, the REST scope)
//! each keep their own processes and sessions on the workers, and ending a scope on the
//! producer ends its processes on the workers. Real `cmdr worker` processes.

use cmdr::nats::producer::Producer;
use cmdr::nats::remote::RemoteExecutor;
use cmdr_executors::{decode_command, ExecutionStatus, OutputResult, Registry, Scope};
use cmdr_test_support::http::gone;
use serde_json::{json, Value};

use crate::{collect, eventually, NatsServer, WorkerProcess};

/// The terminal result of `json` run in `scope` through `registry`, carrying the data of
/// the whole stream.
pub(crate) async fn run(registry: &Registry, scope: &str, json: Value) -> OutputResult {
    let command = decode_command(&json.to_string()).unwrap();
    let stream = registry
        .execute_in(Scope::new(scope), command)
        .await
        .unwrap();
    let messages = collect(stream).await;
    let mut end = messages.last().unwrap().clone();
    end.result_data = crate::data(&messages);
    end
}

/// Starts, in `scope`, a background process that writes its pid to `pid_file` and
/// sleeps; its process id and pid.
async fn start(registry: &Registry, scope: &str, pid_file: &std::path::Path) -> (String, i32) {
    start_after(registry, scope, "", pid_file).await
}

/// [`start`], running `prelude` (e.g. `trap '' TERM; `) first.
pub(crate) async fn start_after(
    registry: &Registry,
    scope: &str,
    prelude: &str,
    pid_file: &std::path::Path,
) -> (String, i32) {
    let script = format!("{prelude}echo $$ > {}; exec sleep 1000", pid_file.display());
    let started = run(
        registry,
        scope,
        json!({"commandType": "BASH_EXEC", "command": script, "background": true, "yield_ms": 200}),
    )
    .await;
    assert_eq!(started.status, ExecutionStatus::Succeeded, "{started:#?}");
    eventually("the pid file", || {
        std::fs::read_to_string(pid_file).is_ok_and(|p| p.ends_with('\n'))
    })
    .await;
    let pid = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (started.process_id.unwrap(), pid)
}

fn failed_with(result: &OutputResult, code: &str) {
    assert_eq!(result.status, ExecutionStatus::Failed, "{result:#?}");
    assert_eq!(result.error_code.as_deref(), Some(code), "{result:#?}");
}

/// Two clients of one producer: neither lists, reads, writes to nor kills the other's
/// process, nor enters the other's session of the same name; ending one's scope on the
/// producer ends its process on the worker and leaves the other's running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_of_one_producer_keep_their_processes_apart_on_the_workers() {
    let server = NatsServer::start();
    let _worker = WorkerProcess::start(&server).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    clients_apart(RemoteExecutor::registry(Producer::new(client))).await;
}

/// [`two_clients_of_one_producer_keep_their_processes_apart_on_the_workers`] in durable
/// mode: the scope travels with the stored command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_durable_clients_of_one_producer_keep_their_processes_apart_on_the_workers() {
    let server = NatsServer::start();
    let _worker = WorkerProcess::start_as(&server, "durable-w", &["--durable"]).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let producer = Producer::durable(client).await.unwrap();
    clients_apart(RemoteExecutor::registry(producer)).await;
}

async fn clients_apart(registry: Registry) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = ("mcp:alice-session", "mcp:bob-session");
    let (a_id, a_pid) = start(&registry, a, &dir.path().join("a.pid")).await;
    let (b_id, b_pid) = start(&registry, b, &dir.path().join("b.pid")).await;

    let kill = json!({"commandType": "PROCESS_KILL", "process_id": a_id, "signal": "KILL"});
    failed_with(&run(&registry, b, kill).await, "PROCESS_NOT_FOUND");
    let read = json!({"commandType": "PROCESS_OUTPUT", "process_id": a_id});
    failed_with(&run(&registry, b, read).await, "PROCESS_NOT_FOUND");
    let write = json!({"commandType": "PROCESS_INPUT", "process_id": a_id, "input": "x\n"});
    failed_with(&run(&registry, b, write).await, "PROCESS_NOT_FOUND");
    let listed = run(&registry, b, json!({"commandType": "PROCESS_LIST"})).await;
    assert_eq!(listed.status, ExecutionStatus::Succeeded, "{listed:#?}");
    assert!(!listed.result_data.contains(&a_id), "{listed:#?}");
    assert!(listed.result_data.contains(&b_id), "{listed:#?}");
    assert!(!gone(a_pid), "bob's kill reached alice's process");

    let set =
        json!({"commandType": "BASH_EXEC", "session": "dev", "command": "SECRET=alice; echo set"});
    assert_eq!(
        run(&registry, a, set).await.status,
        ExecutionStatus::Succeeded
    );
    let peek =
        json!({"commandType": "BASH_EXEC", "session": "dev", "command": "echo \"[$SECRET]\""});
    let peeked = run(&registry, b, peek).await;
    assert_eq!(
        peeked.result_data.trim(),
        "[]",
        "bob entered alice's session: {peeked:#?}"
    );

    registry.end_scope(&Scope::new(a)).await;
    assert!(
        gone(a_pid),
        "alice's scope ended on the producer, her process lives on"
    );
    assert!(!gone(b_pid), "ending alice's scope ended bob's process");
    let read = json!({"commandType": "PROCESS_OUTPUT", "process_id": b_id});
    let read = run(&registry, b, read).await;
    assert_eq!(read.status, ExecutionStatus::Succeeded, "{read:#?}");
    registry.end_scope(&Scope::new(b)).await;
    assert!(gone(b_pid), "bob's scope ended, his process lives on");
}

/// A producer cannot name another producer's client scope: the scope it sends lies within
/// its own (`nats:<producer>.<scope>`), so a header shaped like another producer's scope
/// finds nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_header_cannot_reach_another_producers_processes() {
    let server = NatsServer::start();
    let _worker = WorkerProcess::start(&server).await;
    let connect = || async { async_nats::connect(server.url()).await.unwrap() };
    let alice = Producer::new(connect().await).with_id("alice").unwrap();
    assert!(
        Producer::new(connect().await).with_id("alice.x").is_err(),
        "a producer id with a dot would split like a client scope"
    );
    let mallory = Producer::new(connect().await).with_id("mallory").unwrap();
    let alice = RemoteExecutor::registry(alice);
    let mallory = RemoteExecutor::registry(mallory);
    let dir = tempfile::tempdir().unwrap();
    let (id, pid) = start(&alice, "", &dir.path().join("a.pid")).await;
    for scope in ["", "alice", "nats:alice", "..", "."] {
        let kill = json!({"commandType": "PROCESS_KILL", "process_id": id, "signal": "KILL"});
        failed_with(&run(&mallory, scope, kill).await, "PROCESS_NOT_FOUND");
    }
    assert!(!gone(pid));
    alice.end_scope(&Scope::default()).await;
}

/// A `cmdr mcp --nats` on stdin/stdout, without a model; its pid.
async fn cmdr_mcp_over(
    server: &NatsServer,
    db: &std::path::Path,
) -> (rmcp::service::RunningService<rmcp::RoleClient, ()>, u32) {
    use rmcp::ServiceExt;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cmdr"));
    command
        .args(["mcp", "--nats", &server.url(), "--db"])
        .arg(db)
        .env_remove("CMDR_LLM_BASE_URL")
        .env_remove("CMDR_LLM_MODEL")
        .env_remove("CMDR_LLM_API_KEY")
        .env_remove("CMDR_AUTH_TOKEN");
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let pid = transport.id().unwrap();
    (().serve(transport).await.unwrap(), pid)
}

/// The JSON of a tool result's one text content.
fn tool_json(result: &rmcp::model::CallToolResult) -> Value {
    let text = &result.content[0].as_text().unwrap().text;
    serde_json::from_str(text).unwrap()
}

async fn tool(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &'static str,
    args: Value,
) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let params = rmcp::model::CallToolRequestParams::new(name).with_arguments(args);
    tool_json(&client.call_tool(params).await.unwrap())
}

/// Two `cmdr mcp --nats` on one host are one producer (the same default producer id)
/// with two stdio sessions: neither sees nor kills the other's process on the workers,
/// and the one that exits ends only its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stdio_sessions_of_one_producer_keep_their_processes_apart() {
    let server = NatsServer::start();
    let _worker = WorkerProcess::start(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = cmdr_mcp_over(&server, &dir.path().join("a.sqlite3")).await;
    let (b, b_pid) = cmdr_mcp_over(&server, &dir.path().join("b.sqlite3")).await;
    let pid_file = dir.path().join("a.pid");
    let script = format!("echo $$ > {}; echo up; exec sleep 1000", pid_file.display());
    let started = tool(
        &a,
        "start_process",
        json!({"command": script, "ready": {"output": "up"}}),
    )
    .await;
    let id = started["processId"].as_str().unwrap().to_owned();
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    let listed = tool(&b, "list_processes", json!({})).await;
    assert!(
        !listed.to_string().contains(&id),
        "b lists a's process: {listed}"
    );
    let killed = tool(
        &b,
        "kill_process",
        json!({"process_id": id, "signal": "KILL"}),
    )
    .await;
    assert_eq!(killed["errorCode"], "PROCESS_NOT_FOUND", "{killed}");
    b.cancel().await.unwrap();
    eventually("b's cmdr mcp exits", || gone(b_pid as i32)).await;
    assert!(!gone(pid), "b's exit ended a's process on the worker");
    let listed = tool(&a, "list_processes", json!({})).await;
    assert!(listed.to_string().contains(&id), "{listed}");
    a.cancel().await.unwrap();
}
