//! The reply to a command request: the command's terminal result when the producer takes
//! it (the request carries `Cmdr-Reply: result`, `wire::REPLY_HEADER`) and it comes soon,
//! else `Accepted`; a plain request (a producer in another language) gets `Accepted`.

use async_nats::{HeaderMap, Request};
use cmdr::nats::wire::{Accepted, REPLY_HEADER, REPLY_RESULT};
use cmdr_executors::{ExecutionStatus, OutputResult};
use futures_util::StreamExt;
use serde_json::json;

use super::{collect, data, producer, terminal, terminal_on, NatsServer, Worker, PATIENCE};

/// A request taking the terminal result as the reply, as producers ask: with the header
/// `Cmdr-Reply: result`.
fn asking_for_result(body: String) -> Request {
    let mut headers = HeaderMap::new();
    headers.insert(REPLY_HEADER, REPLY_RESULT);
    Request::new()
        .payload(body.into())
        .headers(headers)
        .timeout(Some(PATIENCE))
}

/// The result a reply is, if it is one (it has a `status`; an `Accepted` has none).
fn result_in(reply: &async_nats::Message) -> Option<OutputResult> {
    serde_json::from_slice(&reply.payload).ok()
}

/// A server with one worker, and a client already subscribed to `results` (a results
/// subject or pattern). Fields drop in order: the worker stops before its server.
struct Pool {
    client: async_nats::Client,
    results: async_nats::Subscriber,
    _worker: Worker,
    _server: NatsServer,
}

impl Pool {
    async fn listening_on(results: &str) -> Self {
        let server = NatsServer::start();
        let worker = Worker::start(&server, None).await;
        let client = async_nats::connect(server.url()).await.unwrap();
        let results = client.subscribe(results.to_owned()).await.unwrap();
        client.flush().await.unwrap();
        Self {
            client,
            results,
            _worker: worker,
            _server: server,
        }
    }

    /// Sends the `BASH_EXEC` command `body` as producers do, taking the terminal result as
    /// the reply; the reply.
    async fn ask_bash(&self, body: &serde_json::Value) -> async_nats::Message {
        self.client
            .send_request(
                "cmdr.commands.raw.BASH_EXEC",
                asking_for_result(body.to_string()),
            )
            .await
            .unwrap()
    }
}

/// A worker replying with results carries each command's terminal once: in the reply or
/// on the results subject, never both.
#[tokio::test]
async fn a_worker_replies_with_the_terminal_once() {
    let mut pool = Pool::listening_on("cmdr.results.raw.*").await;
    let dir = tempfile::tempdir().unwrap();
    let mut in_reply = 0;
    for n in 0..40 {
        let body =
            json!({"command_id":format!("r-{n}"),"commandType":"LIST_DIRECTORY","path":dir.path()})
                .to_string();
        let request = asking_for_result(body);
        let reply = pool
            .client
            .send_request("cmdr.commands.raw.LIST_DIRECTORY", request)
            .await
            .unwrap();
        if let Some(result) = result_in(&reply) {
            in_reply += 1;
            assert_eq!(result.command_id, format!("r-{n}"));
            assert_eq!(result.status, ExecutionStatus::Succeeded, "{result:?}");
        } else {
            let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
            assert!(accepted.worker.is_some(), "{accepted:?}");
            let result = terminal_on(&mut pool.results).await;
            assert_eq!(result.command_id, format!("r-{n}"));
        }
    }
    assert!(in_reply > 0, "no reply carried its result");
    // A fence: a plain request, answered `Accepted`, its terminal on the
    // subject after everything the worker published before.
    let fence = json!({"command_id":"fence","commandType":"LIST_DIRECTORY","path":dir.path()});
    pool.client
        .request("cmdr.commands.raw.LIST_DIRECTORY", fence.to_string().into())
        .await
        .unwrap();
    let next = terminal_on(&mut pool.results).await;
    assert_eq!(next.command_id, "fence", "a terminal sent twice: {next:?}");
}

/// A command with no result within the worker's wait (here: blocked reading a FIFO that
/// is written only after the reply came) is answered `Accepted` meanwhile, and its
/// results follow on the results subject.
#[tokio::test]
async fn a_command_without_a_result_yet_is_answered_accepted() {
    let mut pool = Pool::listening_on("cmdr.results.raw.slow-1").await;
    let (_dir, fifo) = gate();
    let script = format!("read x < '{}'; echo got $x", fifo.display());
    let body = json!({"command_id":"slow-1","commandType":"BASH_EXEC","command":script});
    let reply = pool.ask_bash(&body).await;
    assert!(result_in(&reply).is_none());
    let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(accepted.command_id, "slow-1");
    assert!(accepted.worker.is_some() && !accepted.busy, "{accepted:?}");
    // Opening the FIFO for writing waits for its reader, the command.
    tokio::task::spawn_blocking(move || std::fs::write(fifo, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let mut output = String::new();
    let last = loop {
        let message = tokio::time::timeout(PATIENCE, pool.results.next())
            .await
            .unwrap()
            .unwrap();
        let result: OutputResult = serde_json::from_slice(&message.payload).unwrap();
        output.push_str(&result.result_data);
        if result.status.is_terminal() {
            break result;
        }
    };
    assert_eq!(last.status, ExecutionStatus::Succeeded, "{last:?}");
    assert_eq!(output, "got go\n");
}

/// A producer submitting silent commands one after another waits only the short reply
/// wait for each, not the 200 ms it once was: twenty submits of silent commands take far
/// less than the 4 s that twenty such waits would (the bound leaves a busy machine room).
#[tokio::test]
async fn silent_commands_submitted_one_after_another_are_each_accepted_soon() {
    let pool = Pool::listening_on("cmdr.results.raw.>").await;
    let started = std::time::Instant::now();
    for n in 0..20 {
        let id = format!("quiet-{n}");
        let body = json!({"command_id": id, "commandType": "BASH_EXEC", "command": "sleep 30"});
        let reply = pool.ask_bash(&body).await;
        let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(accepted.command_id, id);
    }
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
}

/// A plain request (a producer in another language, which need not know the header) gets
/// `Accepted` at once.
#[tokio::test]
async fn a_plain_request_still_gets_accepted() {
    let mut pool = Pool::listening_on("cmdr.results.raw.old-1").await;
    // Its first result is its terminal: a reply asked for would carry it.
    let body = json!({"command_id":"old-1","commandType":"BASH_EXEC","command":"true"});
    let reply = pool
        .client
        .request("cmdr.commands.raw.BASH_EXEC", body.to_string().into())
        .await
        .unwrap();
    assert!(result_in(&reply).is_none());
    let accepted: Accepted = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(accepted.command_id, "old-1");
    assert!(accepted.worker.is_some());
    let last = terminal_on(&mut pool.results).await;
    assert_eq!(last.status, ExecutionStatus::Succeeded);
}

/// Through a producer, a command whose output comes before and after `submit` returned
/// (its reply, then, an `Accepted`) streams it all, in order, with one terminal.
#[tokio::test]
async fn results_after_the_reply_follow_it_in_order() {
    let server = NatsServer::start();
    let _worker = Worker::start(&server, None).await;
    let (_dir, fifo) = gate();
    let producer = producer(&server).await;
    let script = format!("echo one; read x < '{}'; echo $x", fifo.display());
    let command = cmdr_executors::decode_command(
        &json!({"commandType":"BASH_EXEC","command":script}).to_string(),
    )
    .unwrap();
    let stream = producer.submit(command).await.unwrap();
    tokio::task::spawn_blocking(move || std::fs::write(fifo, "two\n"))
        .await
        .unwrap()
        .unwrap();
    let messages = collect(stream).await;
    assert_eq!(data(&messages), "one\ntwo\n");
    assert_eq!(terminal(&messages).status, ExecutionStatus::Succeeded);
}

/// A FIFO in a new temporary directory (kept alive by the returned guard): a command that
/// reads it waits until the test writes it.
fn gate() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("gate");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    (dir, fifo)
}
