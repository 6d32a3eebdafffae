//! Server-sent events: agent-loop events and command results as SSE responses.
//!
//! Framing: one JSON object per event, on one `data:` line (`data: {…}\n\n`; JSON never
//! holds a raw newline), no `event:` or `id:` fields. While nothing happens a comment
//! line (`: keep-alive`) goes out every keep-alive interval, so proxies and clients
//! with idle timeouts keep the connection. `X-Accel-Buffering: no` asks nginx-style
//! proxies not to buffer.
//!
//! An agent stream always ends with one `done` or `error` event: if the run's task
//! vanished without one (a panic), the stream adds an `error` (`INTERNAL_ERROR`) itself.
//! A run sends its final event only after its conversation's lock was released
//! (`PreparedRun::run`), so a client may start its next run the moment it reads `done`.
//! Dropping the body (client gone) drops the run's guard: the run stops.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::header::HeaderName;
use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cmdr_executors::ErrorCode;
use cmdr_executors::{OutputResult, ResultStream};
use futures_util::StreamExt;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::DropGuard;

use crate::agent::AgentEvent;

use super::error::INTERNAL_MESSAGE;

/// The keep-alive comment's text.
pub const KEEP_ALIVE_TEXT: &str = "keep-alive";

/// An SSE response of an agent run's events.
pub fn agent_events(
    events: mpsc::Receiver<AgentEvent>,
    guard: DropGuard,
    keep_alive: Duration,
) -> Response {
    struct Reader {
        events: mpsc::Receiver<AgentEvent>,
        /// Held for as long as the body lives.
        _guard: DropGuard,
        ended: bool,
        done: bool,
    }
    let reader = Reader {
        events,
        _guard: guard,
        ended: false,
        done: false,
    };
    let stream = futures_util::stream::unfold(reader, |mut reader| async move {
        loop {
            if reader.done {
                return None;
            }
            match reader.events.recv().await {
                // Anything after the final event is not part of the run's stream.
                Some(_) if reader.ended => {}
                Some(event) => {
                    reader.ended = event.is_final();
                    return Some((Ok::<_, Infallible>(json_event(&event)), reader));
                }
                None if reader.ended => return None,
                None => {
                    tracing::error!("an agent run ended without a final event");
                    reader.done = true;
                    let event = AgentEvent::Error {
                        code: ErrorCode::InternalError.into(),
                        message: INTERNAL_MESSAGE.to_owned(),
                    };
                    return Some((Ok(json_event(&event)), reader));
                }
            }
        }
    });
    respond(Sse::new(stream), keep_alive)
}

/// An SSE response of one command's results (the terminal one last). Dropping the body
/// drops the [`ResultStream`], which stops the command; `hold` (e.g. the command's answer
/// key binding) lives exactly as long as the body.
pub fn command_results<H: Send + 'static>(
    results: ResultStream,
    keep_alive: Duration,
    hold: H,
) -> Response {
    let stream = results.map(move |result: OutputResult| {
        let _hold = &hold;
        Ok::<_, Infallible>(json_event(&result))
    });
    respond(Sse::new(stream), keep_alive)
}

fn respond<S>(sse: Sse<S>, keep_alive: Duration) -> Response
where
    S: futures_core::Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let sse = sse.keep_alive(KeepAlive::new().interval(keep_alive).text(KEEP_ALIVE_TEXT));
    (
        [(
            HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        )],
        sse,
    )
        .into_response()
}

/// One `data:` line holding `value` as JSON.
fn json_event<T: Serialize>(value: &T) -> Event {
    match serde_json::to_string(value) {
        Ok(json) => Event::default().data(json),
        Err(e) => {
            tracing::error!(error = %e, "could not serialize an SSE event");
            let event = AgentEvent::Error {
                code: ErrorCode::InternalError.into(),
                message: INTERNAL_MESSAGE.to_owned(),
            };
            let json = serde_json::to_string(&event).unwrap_or_default();
            Event::default().data(json)
        }
    }
}
