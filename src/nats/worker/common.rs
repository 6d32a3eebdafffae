//! What both worker loops do with one command: decode it (answering an undecodable one),
//! start it through the registry, and cancel it when asked on the bus.

use async_nats::{Client, HeaderMap, Message};
use cmdr_executors::{
    decode_command_slice, peek_command_id, Command, OutputResult, Registry, ResultStream, Scope,
    SubmitError,
};
use futures_util::StreamExt;

use super::alive::Holding;
use super::publish::Publisher;
use super::reply::Reply;
use crate::nats::subjects;
use crate::nats::wire::{Accepted, SCOPE_HEADER};

/// What a worker needs to run one command message.
#[derive(Clone)]
pub(super) struct Runner {
    pub(super) registry: Registry,
    pub(super) publisher: Publisher,
    pub(super) holding: Holding,
    /// Commands asking for a longer `timeout_ms` are refused, and those asking for none
    /// get it as their deadline (`--max-timeout-ms`).
    pub(super) max_timeout: std::time::Duration,
}

impl Runner {
    /// Runs one command message, publishes its results, then stops holding its scoped id.
    /// With a deferred `reply` (`reply`), the first result goes there if it is still
    /// untaken; else it is answered [`Accepted`] once the command is over.
    pub(super) async fn run(&self, message: &Message, scoped: &str, reply: Option<&Reply>) {
        let decoded = decode(&message.subject, message.headers.as_ref(), &message.payload);
        self.run_decoded(decoded, scoped, reply).await;
    }

    /// [`Runner::run`] of a command already decoded (by the reader that received it).
    pub(super) async fn run_decoded(&self, decoded: Decoded, scoped: &str, reply: Option<&Reply>) {
        if let Some((scope, mut command)) = answer_undecodable(decoded, &self.publisher).await {
            let default = self.registry.default_timeout(command.command_type());
            let stream = match super::timeout_cap::admit(&mut command, self.max_timeout, default) {
                Some(refused) => ResultStream::from_result(refused),
                None => start(&self.registry, scope, command).await,
            };
            self.publisher.publish_replying(stream, reply).await;
        }
        if let Some(reply) = reply.filter(|reply| reply.take()) {
            reply.send_accepted(self.publisher.client()).await;
        }
        self.holding.release(scoped);
    }
}

/// Answers a command request (its id `command_id`) with [`Accepted`] naming this worker
/// (`busy`: not taken).
pub(super) async fn acknowledge(
    client: &Client,
    message: &Message,
    command_id: String,
    worker: &str,
    busy: bool,
) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    let accepted = Accepted {
        command_id,
        worker: Some(worker.to_owned()),
        busy,
    };
    if let Ok(body) = serde_json::to_vec(&accepted) {
        if let Err(e) = client.publish(reply, body.into()).await {
            tracing::warn!("acknowledging a command: {e}");
        }
    }
}

/// A command message, decoded.
// `Run` is nearly every message: boxing it would allocate per command to save bytes only
// in the rare others.
#[allow(clippy::large_enum_variant)]
pub(super) enum Decoded {
    /// To run in this scope (its producer's); its id is scoped.
    Run(Scope, Command),
    /// Undecodable, with an id to answer under: this result (its id scoped) goes to the
    /// command's results subject.
    Answer(Box<OutputResult>),
    /// Neither runnable nor answerable (no producer, no usable id): logged, dropped.
    Dropped,
}

impl Decoded {
    /// The command's id and scoped id, when it decoded.
    pub(super) fn ids(&self) -> Option<(String, String)> {
        let Decoded::Run(_, command) = self else {
            return None;
        };
        let scoped = command.command_id();
        let (_, id) = subjects::unscoped(scoped)?;
        Some((id.to_owned(), scoped.to_owned()))
    }
}

/// Decodes a command received on `subject` (`cmdr.commands.<producer>.<type>`, or a
/// worker's own `cmdr.worker.<worker>.commands.<producer>.<type>`) and gives
/// it its scoped id (`<producer>.<command_id>`), with the scope it runs in: its
/// producer's (`nats:<producer>`, see [`crate::scopes::nats`]), or the client scope its
/// [`SCOPE_HEADER`] names within the producer's ([`crate::scopes::nats_client`]), so a
/// producer — and each of its clients — sees only its own processes and sessions. An
/// undecodable command is to be answered on its results subject when an id can be read
/// (else it is logged and dropped).
pub(super) fn decode(subject: &str, headers: Option<&HeaderMap>, payload: &[u8]) -> Decoded {
    let Some(producer) = subjects::producer_of(subject) else {
        tracing::warn!(%subject, "dropped a command on a subject that names no producer");
        return Decoded::Dropped;
    };
    let mut command = match decode_command_slice(payload) {
        Ok(command) => command,
        Err(failure) => {
            let mut result = failure.to_result();
            if subjects::is_valid_id(&result.command_id) {
                result.command_id = subjects::scoped(producer, &result.command_id);
                return Decoded::Answer(Box::new(result));
            }
            tracing::warn!("dropped a command with no usable id: {failure}");
            return Decoded::Dropped;
        }
    };
    if !subjects::is_valid_id(command.command_id()) {
        tracing::warn!(
            id = command.command_id(),
            "dropped a command whose id is not a subject token"
        );
        return Decoded::Dropped;
    }
    let scoped = subjects::scoped(producer, command.command_id());
    *command.command_id_mut() = scoped;
    Decoded::Run(
        crate::scopes::nats_client(producer, client_scope(headers)),
        command,
    )
}

/// The client scope a message's [`SCOPE_HEADER`] names (`""`: none).
pub(super) fn client_scope(headers: Option<&HeaderMap>) -> &str {
    headers
        .and_then(|h| h.get(SCOPE_HEADER))
        .map_or("", |value| value.as_str())
}

/// Publishes the answer of an undecodable command; the command to run, if it decoded.
async fn answer_undecodable(decoded: Decoded, publisher: &Publisher) -> Option<(Scope, Command)> {
    match decoded {
        Decoded::Run(scope, command) => Some((scope, command)),
        Decoded::Answer(result) => {
            publisher
                .publish_all(ResultStream::from_result(*result))
                .await;
            None
        }
        Decoded::Dropped => None,
    }
}

/// [`decode`], answering an undecodable command at once; `None` when there is nothing
/// to run.
pub(super) async fn decode_or_answer(
    message: &async_nats::Message,
    publisher: &Publisher,
) -> Option<(Scope, Command)> {
    let decoded = decode(&message.subject, message.headers.as_ref(), &message.payload);
    answer_undecodable(decoded, publisher).await
}

/// The id of the command in `payload` received on `subject`, and its scoped id, as far as
/// they can be read (to acknowledge it, and to hold it while it runs); read once.
pub(super) fn ids_of(subject: &str, payload: &[u8]) -> (String, String) {
    let id = peek_command_id(payload).unwrap_or_default();
    let scoped = match subjects::producer_of(subject) {
        Some(producer) => subjects::scoped(producer, &id),
        None => id.clone(),
    };
    (id, scoped)
}

/// Starts `command` in `scope`; a refusal becomes a one-message stream.
pub(super) async fn start(registry: &Registry, scope: Scope, command: Command) -> ResultStream {
    let id = command.command_id().to_owned();
    let command_type = command.command_type();
    registry
        .execute_in(scope, command)
        .await
        .unwrap_or_else(|e: SubmitError| {
            ResultStream::from_result(e.to_result(&id, command_type.as_str()))
        })
}

/// Cancels commands named on `cmdr.cancel.<producer>.<id>`: only that producer's command
/// of that id (its scoped id), never another producer's.
pub(super) async fn listen_for_cancels(mut cancels: async_nats::Subscriber, registry: Registry) {
    while let Some(message) = cancels.next().await {
        if let Some(scoped) = subjects::cancelled(&message.subject) {
            if registry.cancel(&scoped) {
                tracing::info!(command_id = %scoped, "cancelled over the bus");
            }
        }
    }
}
