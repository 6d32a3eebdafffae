//! Liveness checks answer only the producer that owns the command (issue 32.17): a worker
//! tells alice whether her command runs, and tells anyone else asking about it — even on
//! their own liveness subject, with her scoped id — "not running".

use std::time::Duration;

use cmdr::nats::wire::Alive;

use crate::{producer, NatsServer, WorkerProcess, PATIENCE};

async fn ask(client: &async_nats::Client, subject: String, scoped: &str) -> Alive {
    let request = async_nats::Request::new()
        .payload(scoped.to_owned().into())
        .timeout(Some(Duration::from_secs(5)));
    let reply = client.send_request(subject, request).await.unwrap();
    serde_json::from_slice(&reply.payload).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_tells_only_its_producer_whether_a_command_runs() {
    let server = NatsServer::start();
    let _worker = WorkerProcess::start_as(&server, "w1", &[]).await;
    let alice = producer(&server).await.with_id("alice").unwrap();
    let mut stream = alice
        .submit_json(
            r#"{"command_id":"long","commandType":"BASH_EXEC","command":"echo started; sleep 30"}"#,
        )
        .await;
    let first = tokio::time::timeout(PATIENCE, futures_util::StreamExt::next(&mut stream))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.result_data, "started\n", "{first:?}");
    let probe = async_nats::connect(server.url()).await.unwrap();
    let own = ask(&probe, "cmdr.alive.w1.alice".into(), "alice.long").await;
    assert!(own.running, "alice is told her command runs");
    let other = ask(&probe, "cmdr.alive.w1.mallory".into(), "alice.long").await;
    assert!(!other.running, "mallory learns that alice's command runs");
}
