//! nats-server restarted (SIGKILL, then started again on the same port) under core-mode
//! workers and producers: they reconnect on their own; a command running across the
//! restart ends with exactly one terminal result (its own; `RESULTS_LOST` if the restart
//! swallowed it: core mode is at most once; or `WORKER_LOST` if the worker had not
//! reconnected when the liveness checks gave up, as happens on a loaded machine); later
//! commands run; a long command
//! on a healthy worker is never mistaken for a lost one.

use cmdr_executors::{decode_command, ExecutionStatus};

use crate::nats_server::NatsServer;
use crate::workers::{connect, producer, submit_running, WorkerProcess};
use crate::{collect, data};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_workers_and_producers_reconnect_after_a_server_restart() {
    let mut server = NatsServer::start();
    let _worker = WorkerProcess::start(&server).await;
    let producer = producer(&server).await;
    let (first, across) = submit_running(
        &producer,
        r#"{"command_id":"across-1","commandType":"BASH_EXEC","command":"echo before; sleep 2; echo after"}"#,
    )
    .await;
    assert_eq!(first.result_data, "before\n");

    server.restart();

    let rest = collect(across).await;
    let end = rest.last().unwrap();
    let terminals = rest.iter().filter(|r| r.status.is_terminal()).count();
    assert_eq!(terminals, 1, "{rest:#?}");
    match end.status {
        ExecutionStatus::Succeeded => assert_eq!(data(&rest), "after\n"),
        _ => assert!(
            matches!(
                end.error_code.as_deref(),
                Some("RESULTS_LOST" | "WORKER_LOST")
            ),
            "{rest:#?}"
        ),
    }
    // The worker re-subscribed: a command published now reaches it.
    server.wait_for_subscribers(&connect(&server).await).await;
    // The same producer (reconnected) submits again; the command runs longer than the
    // liveness checks take to give a command up, and still ends with its own result.
    let later = producer
        .submit(
            decode_command(
                r#"{"command_id":"later-1","commandType":"BASH_EXEC","command":"sleep 4; echo later"}"#,
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let later = collect(later).await;
    assert_eq!(
        later.last().unwrap().status,
        ExecutionStatus::Succeeded,
        "{later:#?}"
    );
    assert_eq!(data(&later), "later\n");
}
