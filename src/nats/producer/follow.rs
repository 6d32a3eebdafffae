//! Following a command's results in `CMDR_RESULTS` (durable mode), through outages.
//!
//! A task reads the results with an ephemeral consumer (no acks, in memory) from the first
//! one on, remembers the stream sequence of the last one delivered, and when the consumer
//! fails (the server restarted, the connection dropped) makes a new one that starts right
//! after it — so nothing is missed or repeated. It stops after the terminal result, when
//! the reader goes away, or after [`GIVE_UP_AFTER`] of consecutive failures.
//!
//! The consumer is R1 (one node holds it): when that node dies, nothing tells the client,
//! which only notices that the server's idle heartbeats stopped. So the follower pulls
//! with a [`HEARTBEAT`] of one second (its consumer is missed within two) rather than the
//! client's default 15 s, which left a command whose terminal was already stored on the
//! surviving nodes waiting 15 to 30 s for a consumer nobody served (seen in the cluster
//! test under load: commands past its deadline with their output but no terminal).
//!
//! A consumer can also fall silent while its node is alive: seen in the cluster test, an R1
//! consumer kept sending heartbeats but never delivered a terminal that the stream had
//! stored (quorum-acknowledged) while its leader was being killed — the consumer's replica
//! never caught up. So after [`FIRST_CHECK`] without a result the follower asks the stream
//! leader itself for the next result after the last one delivered (`STREAM.MSG.GET`,
//! `next_by_subj`); if the leader has one, the follower hands over what the leader holds
//! and resumes on a new consumer. Quiet commands are checked less and less often (the
//! pause doubles up to [`LAST_CHECK`]), so a thousand silent followers cost a few requests
//! a second.
//!
//! A consumer can also skip a result and deliver the ones after it (a replica that missed
//! one while the stream's leader died: seen in the cluster test as a command whose
//! terminal arrived without its output). Each stored result after a run's first names its
//! predecessor's stream sequence ([`RESULT_AFTER_HEADER`]); a follower handed a result
//! whose predecessor it never delivered reads what lies between from the stream leader
//! first, so no result is handed over past a hole.
//!
//! Each consumer is deleted as soon as it is done with, not left for the server to expire:
//! a producer following thousands of commands a minute would otherwise pile up thousands
//! of idle consumers and reach the server's consumer limit (measured: commands stalled
//! for 30 s each until old consumers expired). [`INACTIVE_THRESHOLD`] is the backstop for
//! a producer that dies before it can delete them.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, consumer::pull, consumer::DeliverPolicy};
use cmdr_executors::OutputResult;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::nats::durable::RESULTS_STREAM;
use crate::nats::subjects;
use crate::nats::wire::RESULT_AFTER_HEADER;

/// Results buffered between the follower task and the reader.
const BUFFER: usize = 64;
/// Pause between attempts to resume.
const RETRY: Duration = Duration::from_millis(250);
/// Consecutive failed attempts (× [`RETRY`]) before the follower gives up.
const GIVE_UP_AFTER: u32 = 240;
/// How long the server keeps a follower's consumer nobody reads (a producer that died).
const INACTIVE_THRESHOLD: Duration = Duration::from_secs(10);
/// The server's idle heartbeat on a follower's pulls; two missed ones mean its consumer
/// is gone (its node died) and the follower resumes on another.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long one pull request lasts before the client renews it.
const PULL_EXPIRES: Duration = Duration::from_secs(10);
/// Silence after which the follower first asks the stream leader whether its consumer
/// missed a result.
const FIRST_CHECK: Duration = Duration::from_secs(2);
/// The longest pause between those checks.
const LAST_CHECK: Duration = Duration::from_secs(16);
/// How long the stream leader gets to answer a check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// A result, or why following stopped.
pub(super) type Followed = Result<OutputResult, String>;

/// Starts following the results of `producer`'s command `command_id`.
pub(super) fn follow(
    js: jetstream::Context,
    producer: &str,
    command_id: &str,
) -> mpsc::Receiver<Followed> {
    let (tx, rx) = mpsc::channel(BUFFER);
    let subject = subjects::results(producer, command_id);
    tokio::spawn(async move { run(js, subject, &tx).await });
    rx
}

async fn run(js: jetstream::Context, subject: String, tx: &mpsc::Sender<Followed>) {
    let mut next_sequence: Option<u64> = None;
    let mut failures = 0u32;
    loop {
        match Follower::start(&js, &subject, next_sequence).await {
            Ok(mut follower) => {
                let finished = follower
                    .forward(tx, &mut next_sequence, &mut failures)
                    .await;
                follower.delete().await;
                if finished {
                    return;
                }
            }
            Err(e) => tracing::debug!(%subject, "cannot follow results yet: {e}"),
        }
        failures += 1;
        if failures > GIVE_UP_AFTER {
            let _ = tx.send(Err("lost the results stream".to_owned())).await;
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            () = tx.closed() => return,
        }
    }
}

/// One ephemeral consumer over a command's results.
struct Follower {
    stream: jetstream::stream::Stream,
    name: String,
    messages: pull::Stream,
    subject: String,
}

impl Follower {
    /// A consumer from `start` (or the first result) on.
    async fn start(
        js: &jetstream::Context,
        subject: &str,
        start: Option<u64>,
    ) -> Result<Follower, String> {
        let deliver_policy = match start {
            Some(start_sequence) => DeliverPolicy::ByStartSequence { start_sequence },
            None => DeliverPolicy::All,
        };
        let stream = js
            .get_stream(RESULTS_STREAM)
            .await
            .map_err(|e| e.to_string())?;
        let consumer = stream
            .create_consumer(pull::Config {
                filter_subject: subject.to_owned(),
                deliver_policy,
                ack_policy: consumer::AckPolicy::None,
                memory_storage: true,
                num_replicas: 1,
                inactive_threshold: INACTIVE_THRESHOLD,
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        let name = consumer.cached_info().name.clone();
        let node = consumer
            .cached_info()
            .cluster
            .as_ref()
            .and_then(|c| c.leader.clone());
        tracing::debug!(%subject, consumer = %name, ?node, ?start, "following results");
        let follower = Follower {
            messages: match consumer
                .stream()
                .heartbeat(HEARTBEAT)
                .expires(PULL_EXPIRES)
                .messages()
                .await
            {
                Ok(messages) => messages,
                Err(e) => {
                    let _ = stream.delete_consumer(&name).await;
                    return Err(e.to_string());
                }
            },
            stream,
            name,
            subject: subject.to_owned(),
        };
        Ok(follower)
    }

    /// Hands results to `tx` until the terminal one (true), the reader goes away (true) or
    /// the consumer fails or falls behind the stream (false: resume after `next_sequence`).
    async fn forward(
        &mut self,
        tx: &mpsc::Sender<Followed>,
        next_sequence: &mut Option<u64>,
        failures: &mut u32,
    ) -> bool {
        let mut check_after = FIRST_CHECK;
        loop {
            let item = tokio::select! {
                item = self.messages.next() => item,
                () = tx.closed() => return true,
                () = tokio::time::sleep(check_after) => {
                    match self.catch_up(tx, next_sequence).await {
                        Some(finished) => return finished,
                        None => {
                            check_after = (check_after * 2).min(LAST_CHECK);
                            continue;
                        }
                    }
                }
            };
            let Some(item) = item else { return false };
            let message = match item {
                Ok(message) => message,
                Err(e) => {
                    let subject = &self.subject;
                    tracing::debug!(%subject, "results consumer failed, resuming: {e}");
                    return false;
                }
            };
            check_after = FIRST_CHECK;
            let sequence = message.info().ok().map(|info| info.stream_sequence);
            if let (Some(sequence), Some(after)) = (sequence, after(&message)) {
                if let Some(finished) = self.fill_gap(tx, next_sequence, after, sequence).await {
                    return finished;
                }
            }
            *failures = 0;
            if let Some(finished) = hand_over(tx, next_sequence, sequence, &message.payload).await {
                return finished;
            }
        }
    }

    /// Asks the stream leader for the results after `next_sequence`: `None` if it has none
    /// (or cannot say), else hands them over and tells whether following is finished
    /// (true) or goes on with a new consumer (false).
    async fn catch_up(
        &self,
        tx: &mpsc::Sender<Followed>,
        next_sequence: &mut Option<u64>,
    ) -> Option<bool> {
        let mut caught_up = 0usize;
        loop {
            let next = self.next_stored(next_sequence.unwrap_or(1)).await;
            let Some(message) = next.ok().flatten() else {
                if caught_up == 0 {
                    return None;
                }
                let (subject, consumer) = (&self.subject, &self.name);
                tracing::info!(
                    %subject, %consumer, caught_up,
                    "results consumer fell behind its stream; read from the leader, resuming"
                );
                return Some(false);
            };
            caught_up += 1;
            if let Some(finished) =
                hand_over(tx, next_sequence, Some(message.sequence), &message.payload).await
            {
                return Some(finished);
            }
        }
    }

    /// Before the result at `sequence`, whose predecessor is at `after`: if that was never
    /// handed over (the consumer skipped it), hands over what the stream leader holds
    /// between the last one delivered and `sequence`. `Some(true)` when following is
    /// finished (as [`hand_over`]); `Some(false)` when the leader cannot be asked (the
    /// follower resumes on a new consumer after the last result delivered, and asks again).
    async fn fill_gap(
        &self,
        tx: &mpsc::Sender<Followed>,
        next_sequence: &mut Option<u64>,
        after: u64,
        sequence: u64,
    ) -> Option<bool> {
        if after < next_sequence.unwrap_or(1) || after >= sequence {
            return None;
        }
        let mut filled = 0usize;
        loop {
            let Ok(next) = self.next_stored(next_sequence.unwrap_or(1)).await else {
                return Some(false);
            };
            let Some(message) = next else { break };
            if message.sequence >= sequence {
                break;
            }
            filled += 1;
            let handed = hand_over(tx, next_sequence, Some(message.sequence), &message.payload);
            if let Some(finished) = handed.await {
                return Some(finished);
            }
        }
        let (subject, consumer) = (&self.subject, &self.name);
        if next_sequence.unwrap_or(1) <= after {
            tracing::warn!(%subject, after, sequence, "a result is missing from the results stream");
        } else {
            tracing::info!(%subject, %consumer, filled, "results consumer skipped results; read them from the leader");
        }
        None
    }

    /// The first result stored at or after `from`, as the stream leader has it (`None`:
    /// there is none); `Err` when the leader cannot be asked.
    async fn next_stored(
        &self,
        from: u64,
    ) -> Result<Option<jetstream::message::StreamMessage>, ()> {
        let request = self
            .stream
            .raw_message_builder()
            .sequence(from)
            .next_by_subject(self.subject.clone())
            .send();
        match tokio::time::timeout(CHECK_TIMEOUT, request).await {
            Ok(Ok(message)) => Ok(Some(message)),
            Ok(Err(e)) if e.kind() == jetstream::stream::RawMessageErrorKind::NoMessageFound => {
                Ok(None)
            }
            Ok(Err(e)) => {
                let subject = &self.subject;
                tracing::debug!(%subject, "asking the stream leader for results: {e}");
                Err(())
            }
            Err(_) => Err(()),
        }
    }

    /// Deletes the consumer (best effort: the server expires it anyway).
    async fn delete(self) {
        if let Err(e) = self.stream.delete_consumer(&self.name).await {
            let subject = &self.subject;
            tracing::debug!(%subject, "deleting a results consumer: {e}");
        }
    }
}

/// The stream sequence of the result stored before `message` in its run, if it names one.
fn after(message: &jetstream::Message) -> Option<u64> {
    let value = message.headers.as_ref()?.get(RESULT_AFTER_HEADER)?;
    value.as_str().parse().ok()
}

/// Hands one stored result (at stream `sequence`) to `tx`, unless it was handed over
/// already. `Some(true)` when following is finished (the terminal, or the reader left).
async fn hand_over(
    tx: &mpsc::Sender<Followed>,
    next_sequence: &mut Option<u64>,
    sequence: Option<u64>,
    payload: &[u8],
) -> Option<bool> {
    if let Some(sequence) = sequence {
        // Never hand over a result twice (a consumer that starts over, a catch-up).
        if next_sequence.is_some_and(|next| sequence < next) {
            return None;
        }
        *next_sequence = Some(sequence + 1);
    }
    let parsed = serde_json::from_slice::<OutputResult>(payload)
        .map_err(|e| format!("malformed result: {e}"));
    let terminal = parsed.as_ref().map_or(true, |r| r.status.is_terminal());
    if tx.send(parsed).await.is_err() || terminal {
        return Some(true);
    }
    None
}

#[cfg(test)]
mod tests {
    use cmdr_executors::ExecutionStatus;
    use cmdr_test_support::nats_server::NatsServer;

    use super::*;
    use crate::nats::durable::{ensure_streams, DurableSettings};

    /// Stores one result of command `c` naming `after`; its stream sequence.
    async fn store(js: &jetstream::Context, subject: &str, json: &str, after: Option<u64>) -> u64 {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(after) = after {
            headers.insert(RESULT_AFTER_HEADER, after.to_string().as_str());
        }
        let ack = js
            .publish_with_headers(subject.to_owned(), headers, json.to_owned().into())
            .await
            .unwrap();
        ack.await.unwrap().sequence
    }

    fn result(status: &str, data: &str) -> String {
        format!(
            r#"{{"command_id":"c","commandType":"BASH_EXEC","status":"{status}","resultData":"{data}"}}"#
        )
    }

    #[tokio::test]
    async fn a_result_its_consumer_skipped_is_read_from_the_leader_first() {
        let server = NatsServer::start();
        let js = jetstream::new(async_nats::connect(server.url()).await.unwrap());
        ensure_streams(&js, &DurableSettings::default())
            .await
            .unwrap();
        let subject = subjects::results("p", "c");
        // Another command's results in between: stream sequences are stream-wide.
        let other = subjects::results("p", "other");
        store(&js, &other, &result("RUNNING", "x"), None).await;
        let first = store(&js, &subject, &result("RUNNING", "a"), None).await;
        store(&js, &other, &result("RUNNING", "y"), None).await;
        let second = store(&js, &subject, &result("RUNNING", "b"), Some(first)).await;
        store(&js, &subject, &result("SUCCEEDED", "c"), Some(second)).await;
        // A consumer that skipped the first result: it delivers from the second on.
        let mut follower = Follower::start(&js, &subject, Some(second)).await.unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let (mut next_sequence, mut failures) = (None, 0);
        let finished = follower.forward(&tx, &mut next_sequence, &mut failures);
        assert!(finished.await, "following ends with the terminal");
        follower.delete().await;
        drop(tx);
        let mut got = Vec::new();
        while let Some(followed) = rx.recv().await {
            let followed = followed.unwrap();
            got.push((followed.status, followed.result_data));
        }
        let expected = [
            (ExecutionStatus::Running, "a"),
            (ExecutionStatus::Running, "b"),
            (ExecutionStatus::Succeeded, "c"),
        ]
        .map(|(status, data)| (status, data.to_owned()));
        assert_eq!(got, expected);
    }
}
