//! The producer's demultiplexer: one subscription for the results of all its commands and
//! one for their questions, whatever is in flight; a stream left unread holds up no other.

use std::net::TcpListener;

use async_nats::ConnectOptions;
use cmdr::nats::producer::Producer;
use cmdr_executors::{decode_command, ExecutionStatus};
use serde_json::json;

use super::{collect, data, terminal, terminal_on, NatsServer, Worker};

fn command(value: serde_json::Value) -> cmdr_executors::Command {
    decode_command(&value.to_string()).unwrap()
}

/// A server with its monitoring endpoint on; the endpoint's port.
fn monitored_server() -> (NatsServer, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = NatsServer::start_with_config(&format!("http: \"127.0.0.1:{port}\""));
    (server, port)
}

/// The subjects the connection called `name` subscribes to, as the server counts them.
async fn subscriptions(monitor: u16, name: &str) -> Vec<String> {
    cmdr::llm::OpenAiClient::install_crypto_provider();
    let url = format!("http://127.0.0.1:{monitor}/connz?subs=1");
    let connz: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let connection = connz["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no connection {name} in {connz:#}"));
    let subs = connection["subscriptions_list"].as_array();
    subs.into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_producer_holds_one_results_subscription_whatever_is_in_flight() {
    let (server, monitor) = monitored_server();
    let _worker = Worker::start(&server, None).await;
    let client = ConnectOptions::new()
        .name("demuxed-producer")
        .connect(server.url())
        .await
        .unwrap();
    let producer = Producer::new(client.clone());
    // Fewer than the worker's 8 jobs, so that the last command below has a free one.
    let mut in_flight = Vec::new();
    for _ in 0..6 {
        let c = command(json!({"commandType":"BASH_EXEC","command":"sleep 30"}));
        in_flight.push(producer.submit(c).await.unwrap());
    }
    client.flush().await.unwrap();
    let mut subs = subscriptions(monitor, "demuxed-producer").await;
    subs.sort();
    let id = producer.id();
    let own: Vec<&String> = subs.iter().filter(|s| s.starts_with("cmdr.")).collect();
    assert_eq!(
        own,
        [
            &format!("cmdr.input.{id}.*"),
            &format!("cmdr.results.{id}.*")
        ],
        "6 commands in flight, subscriptions: {subs:?}"
    );
    // Besides those, only the client's request inbox.
    assert_eq!(subs.len(), 3, "{subs:?}");
    drop(in_flight);

    // The same subscriptions serve the next commands; a dropped stream left none behind.
    let c = command(json!({"commandType":"BASH_EXEC","command":"echo after"}));
    let after = collect(producer.submit(c).await.unwrap()).await;
    assert_eq!(data(&after).trim(), "after", "{after:?}");
    assert_eq!(subscriptions(monitor, "demuxed-producer").await.len(), 3);
}

#[tokio::test]
async fn a_stream_left_unread_holds_up_no_other_and_fails_alone() {
    let server = NatsServer::start_with_config("max_payload: 65536");
    let _worker = Worker::start(&server, None).await;
    let producer = super::producer(&server)
        .await
        .with_result_buffer(100 * 1024);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("big.txt");
    let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, &text).unwrap();
    // A witness of the big command's results, to know when they are all out.
    let witness = async_nats::connect(server.url()).await.unwrap();
    let big_subject = format!("cmdr.results.{}.big-1", producer.id());
    let mut big_results = witness.subscribe(big_subject).await.unwrap();
    witness.flush().await.unwrap();

    let read = json!({"command_id":"big-1","commandType":"FILE_READ","file_path":file});
    let unread = producer.submit(command(read)).await.unwrap();
    // Every part of it (~190 KiB in 64 KiB messages) was published; none is read yet.
    terminal_on(&mut big_results).await;

    // Published after those parts on the same worker connection, so routed after them:
    // the unread stream is over its 100 KiB by now, and this one is not held up.
    let echo = json!({"commandType":"BASH_EXEC","command":"echo quick"});
    let quick = collect(producer.submit(command(echo)).await.unwrap()).await;
    assert_eq!(terminal(&quick).status, ExecutionStatus::Succeeded);
    assert_eq!(data(&quick).trim(), "quick");

    // The slow stream: what was kept, then one terminal saying why the rest is missing.
    let slow = collect(unread).await;
    let last = terminal(&slow);
    assert_eq!(last.status, ExecutionStatus::Failed, "{last:?}");
    assert_eq!(last.error_code.as_deref(), Some("RESULTS_LOST"), "{last:?}");
    assert!(last.error.contains("fell behind"), "{last:?}");
    let kept: usize = slow.iter().map(|r| r.result_data.len()).sum();
    assert!(kept > 0 && kept < text.len(), "kept {kept} bytes");
}
