//! A local registry whose executors are remote: the same streams as local execution, with
//! cancellation forwarded to the worker.

use cmdr::nats::remote::RemoteExecutor;
use cmdr_executors::decode_command;

use super::{assert_ok, collect, data, producer, terminal, NatsServer, Worker};

#[tokio::test]
async fn a_registry_of_remote_executors_runs_commands_on_the_pool() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let _worker = Worker::start(&server, Some(dir.path())).await;
    let registry = RemoteExecutor::registry(producer(&server).await);
    let c =
        decode_command(r#"{"commandType":"BASH_EXEC","command":"echo one; echo two >&2; pwd"}"#)
            .unwrap();
    let messages = collect(registry.execute(c).await.unwrap()).await;
    assert_ok(&messages);
    let expected_dir = dir.path().display().to_string();
    assert!(
        data(&messages).contains(&expected_dir),
        "ran on the worker: {messages:?}"
    );
    let end = terminal(&messages);
    assert_eq!(end.exit_code, Some(0));
    assert_eq!(end.final_cwd.as_deref(), Some(expected_dir.as_str()));
    assert!(end.duration_ms.is_some());

    let failing = decode_command(r#"{"commandType":"BASH_EXEC","command":"exit 7"}"#).unwrap();
    let messages = collect(registry.execute(failing).await.unwrap()).await;
    assert_eq!(terminal(&messages).exit_code, Some(7));
    assert_eq!(
        terminal(&messages).error_code.as_deref(),
        Some("EXIT_STATUS")
    );
}

#[tokio::test]
async fn cancelling_locally_cancels_remotely() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let registry = RemoteExecutor::registry(producer(&server).await);
    let watcher = async_nats::connect(server.url()).await.unwrap();
    let mut remote_results = watcher.subscribe("cmdr.results.*.rc-1").await.unwrap();
    let c = decode_command(
        r#"{"command_id":"rc-1","commandType":"BASH_EXEC","command":"echo go; sleep 1000"}"#,
    )
    .unwrap();
    let mut stream = registry.execute(c).await.unwrap();
    assert_eq!(stream.next().await.unwrap().result_data, "go\n");
    assert!(registry.cancel("rc-1"));
    let rest = collect(stream).await;
    assert_eq!(terminal(&rest).error_code.as_deref(), Some("CANCELLED"));
    let remote_terminal = super::terminal_on(&mut remote_results).await;
    assert_eq!(
        remote_terminal.error_code.as_deref(),
        Some("CANCELLED"),
        "the worker stopped it too"
    );
}

#[tokio::test]
async fn without_workers_the_local_command_fails_clearly() {
    let server = NatsServer::start();
    let registry = RemoteExecutor::registry(producer(&server).await);
    let c = decode_command(r#"{"commandType":"LIST_DIRECTORY","path":"/"}"#).unwrap();
    let messages = collect(registry.execute(c).await.unwrap()).await;
    assert_eq!(
        terminal(&messages).error_code.as_deref(),
        Some("NO_WORKERS")
    );
}

/// Through a remote registry (`cmdr serve --nats`), a background start keeps its process
/// fields, and the process commands reach the worker holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_commands_through_a_remote_registry_reach_the_process() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let registry = RemoteExecutor::registry(producer(&server).await);
    let start = decode_command(
        r#"{"commandType":"BASH_EXEC","command":"echo up; sleep 60","background":true,"ready":{"output":"up"}}"#,
    )
    .unwrap();
    let messages = collect(registry.execute(start).await.unwrap()).await;
    assert_ok(&messages);
    let end = terminal(&messages);
    let id = end
        .process_id
        .clone()
        .expect("the process id crosses the bus");
    assert_eq!(end.process_state.as_deref(), Some("running"));
    assert!(end.next_offset.is_some(), "{end:#?}");
    let read = decode_command(&format!(
        r#"{{"commandType":"PROCESS_OUTPUT","process_id":"{id}","offset":0}}"#
    ))
    .unwrap();
    let messages = collect(registry.execute(read).await.unwrap()).await;
    assert_ok(&messages);
    assert_eq!(data(&messages), "up\n");
    assert_eq!(terminal(&messages).next_offset, Some(3));
    let kill = decode_command(&format!(
        r#"{{"commandType":"PROCESS_KILL","process_id":"{id}"}}"#
    ))
    .unwrap();
    let messages = collect(registry.execute(kill).await.unwrap()).await;
    assert_ok(&messages);
    assert_eq!(terminal(&messages).process_state.as_deref(), Some("exited"));
}
