//! `cmdr serve --nats`: the server's registry runs commands on the worker pool, and
//! `/health` reports the connection.

use cmdr::server::{AppState, StateConfig};
use cmdr_executors::{combine_output_results, decode_command, ExecutionStatus};

use crate::{NatsServer, Worker};

#[tokio::test]
async fn a_server_state_with_nats_runs_commands_on_the_worker_pool() {
    let server = NatsServer::start();
    let work = tempfile::tempdir().unwrap();
    let worker = Worker::start(&server, Some(work.path())).await;
    let dir = tempfile::tempdir().unwrap();
    let state = AppState::build(
        StateConfig {
            agents_dir: dir.path().join("agents"),
            db: dir.path().join("cmdr.sqlite3"),
            nats: Some(cmdr::nats::connect::NatsConnect::new(&server.url(), "test")),
            auth_token: None,
            default_cwd: dir.path().to_owned(),
            paths: cmdr_executors::PathPolicy::unrestricted(),
            landlock: false,
            combined_limit: cmdr_executors::DEFAULT_COMBINED_LIMIT,
            shell_env: Default::default(),
            max_concurrent: cmdr_executors::DEFAULT_MAX_CONCURRENT,
            session_idle: std::time::Duration::from_secs(1800),
        },
        None,
    )
    .await
    .unwrap();
    assert_eq!(state.health().await.nats, "connected");
    let command = decode_command(r#"{"commandType":"BASH_EXEC","command":"pwd"}"#).unwrap();
    let stream = state.registry.execute(command).await.unwrap();
    let result = combine_output_results(stream, None).await;
    assert_eq!(result.status, ExecutionStatus::Succeeded, "{result:?}");
    assert_eq!(
        result.result_data.trim(),
        work.path().display().to_string(),
        "the command ran on the worker (in its working directory)"
    );
    worker.stop().await;
}
