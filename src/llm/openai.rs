//! [`OpenAiClient`]: streamed chat completions from any OpenAI-compatible endpoint
//! (OpenAI, Gemini's OpenAI endpoint, Ollama, vLLM, llama.cpp …), over reqwest on
//! rustls/ring, with the server-sent events parsed by `eventsource-stream`.
//!
//! Error mapping (codes in [`LlmError::code`]):
//! - cannot connect (refused, DNS, TLS, connect timeout) → [`LlmError::Connect`];
//! - no response headers within the idle timeout → [`LlmError::Timeout`];
//! - non-2xx status → [`LlmError::Http`] with the provider's own message, taken from
//!   `{"error":{"message":…}}`, `[{"error":{…}}]` (Gemini), `{"error":"…"}` (Ollama) or
//!   `{"message":…}` (vLLM), else a short excerpt of the body;
//! - a chunk carrying `{"error":{…}}` mid-stream → [`LlmError::Http`] too (the provider
//!   reported a failure, the stream itself was fine): status from the error's numeric
//!   `code`/`status` when it is 400–599, else 500;
//! - a `data:` payload that is not JSON, or not an object, or SSE that cannot be parsed →
//!   [`LlmError::Malformed`] with a short excerpt;
//! - no bytes at all (SSE comments count) for the idle timeout → [`LlmError::Timeout`];
//! - the body ending (cleanly or with a transport error) before `[DONE]` and before any
//!   `finish_reason` → [`LlmError::StreamCut`]; after a `finish_reason` it is a normal end.
//!
//! The API key goes into the `Authorization` header only: every error text is scrubbed
//! of it, and URLs in errors and logs carry no credentials or query.

use std::error::Error as _;
use std::pin::Pin;
use std::sync::Once;
use std::time::Duration;

use eventsource_stream::{EventStream, EventStreamError};
use futures_core::Stream;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde::Serialize;
use serde_json::Value;

use super::config::safe_url;
use super::{
    ChatFuture, ChatMessage, ChatRequest, Delta, LlmClient, LlmConfig, LlmError, TokenStream,
};

/// At most this much of an error response body is read.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// At most this many characters of a body or payload are quoted in an error.
const EXCERPT_CHARS: usize = 300;
/// Status reported for an error object inside a 2xx stream that names no usable status.
const MID_STREAM_ERROR_STATUS: u16 = 500;

/// An [`LlmClient`] for OpenAI-compatible streaming chat completions
/// (`POST {base_url}/chat/completions` with `"stream": true`).
///
/// Holds one connection pool for all requests; share the client through an `Arc`.
#[derive(Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    config: LlmConfig,
    /// `{base_url}/chat/completions`.
    endpoint: String,
    /// `endpoint` without credentials or query, for errors and logs.
    safe_endpoint: String,
}

/// The request body, in the field order providers see (stable bytes).
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
}

/// First pause before asking a provider that answered 503 again.
const LOADING_FIRST_PAUSE: Duration = Duration::from_millis(250);
/// Longest pause between two such attempts.
const LOADING_MAX_PAUSE: Duration = Duration::from_secs(4);

impl OpenAiClient {
    /// Installs rustls' `ring` crypto provider as the process default, once. Harmless
    /// when a provider is already installed (that one stays). [`OpenAiClient::new`] calls
    /// it; `main` may call it at start-up so every TLS user shares the same provider.
    pub fn install_crypto_provider() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            // Err only means another provider was installed first: that one is used.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
    }

    /// A client for `config`. Fails with [`LlmError::NotConfigured`] when the base URL is
    /// not an `http(s)` URL, or [`LlmError::Connect`] when the HTTP stack cannot start.
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        Self::install_crypto_provider();
        let endpoint = endpoint_url(&config.base_url)?;
        let safe_endpoint = safe_url(&endpoint);
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| LlmError::Connect {
                url: safe_endpoint.clone(),
                reason: error_chain(e),
            })?;
        Ok(Self {
            http,
            config,
            endpoint,
            safe_endpoint,
        })
    }

    /// The configuration this client was built from.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Sends the request and checks the status; the body is not read yet on success. A
    /// provider answering 503 (a local server still loading its model) is asked again,
    /// with a growing pause, until [`LlmConfig::loading_wait`] has passed.
    async fn start(&self, request: ChatRequest) -> Result<reqwest::Response, LlmError> {
        let model = request.model.as_deref().unwrap_or(&self.config.model);
        let body = serde_json::to_vec(&WireRequest {
            model,
            messages: &request.messages,
            stream: true,
            max_tokens: request.max_tokens,
            stop: &request.stop,
        })
        .map_err(|e| LlmError::Malformed(format!("cannot encode the request: {e}")))?;
        tracing::debug!(
            url = %self.safe_endpoint,
            model,
            messages = request.messages.len(),
            "LLM request start"
        );
        let deadline = tokio::time::Instant::now() + self.config.loading_wait;
        let mut pause = LOADING_FIRST_PAUSE;
        loop {
            match self.send(body.clone()).await {
                Err(LlmError::Http {
                    status: 503,
                    message,
                }) if tokio::time::Instant::now() + pause < deadline => {
                    tracing::info!(%message, "the model provider is unavailable (503); asking again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(LOADING_MAX_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// One attempt of [`Self::start`].
    async fn send(&self, body: Vec<u8>) -> Result<reqwest::Response, LlmError> {
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let idle = self.config.idle_timeout;
        let response = match tokio::time::timeout(idle, builder.send()).await {
            Err(_) => return Err(LlmError::Timeout(whole_secs(idle))),
            Ok(Err(e)) => return Err(self.scrub(self.connect_error(e))),
            Ok(Ok(response)) => response,
        };
        if response.status().is_success() {
            return Ok(response);
        }
        Err(self.scrub(http_error(response, idle).await))
    }

    /// A send failure as [`LlmError::Connect`] (the URL without credentials).
    fn connect_error(&self, error: reqwest::Error) -> LlmError {
        LlmError::Connect {
            url: self.safe_endpoint.clone(),
            reason: error_chain(error),
        }
    }

    /// `error` with the API key (should a provider echo it) replaced.
    fn scrub(&self, error: LlmError) -> LlmError {
        scrub_key(error, self.config.api_key.as_deref())
    }
}

impl LlmClient for OpenAiClient {
    fn stream_chat(&self, request: ChatRequest) -> ChatFuture<'_> {
        Box::pin(async move {
            let response = self.start(request).await?;
            let tokens = TokenReader::new(response, self.config.idle_timeout);
            let key = self.config.api_key.clone();
            let stream = futures_util::stream::unfold(tokens, |mut reader| async move {
                let item = reader.next_token().await?;
                Some((item, reader))
            })
            .map(move |item| item.map_err(|e| scrub_key(e, key.as_deref())));
            Ok(Box::pin(stream) as TokenStream)
        })
    }

    fn default_model(&self) -> &str {
        &self.config.model
    }
}

/// `{base_url}/chat/completions` (one `/` between them; a query such as Azure's
/// `?api-version=` stays a query). Base URLs that are not `http(s)` URLs are rejected.
fn endpoint_url(base_url: &str) -> Result<String, LlmError> {
    let mut url = match reqwest::Url::parse(base_url) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => url,
        Ok(url) => {
            return Err(LlmError::NotConfigured(format!(
                "CMDR_LLM_BASE_URL must be an http(s) URL, not {}:",
                url.scheme()
            )))
        }
        Err(e) => {
            return Err(LlmError::NotConfigured(format!(
                "CMDR_LLM_BASE_URL is not a valid URL ({e}): {}",
                safe_url(base_url)
            )))
        }
    };
    let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
    url.set_path(&path);
    Ok(url.into())
}

/// The error and its sources joined by `": "`, without the request URL.
fn error_chain(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Replaces `key` in the texts of `error` (no-op without a key).
fn scrub_key(error: LlmError, key: Option<&str>) -> LlmError {
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        return error;
    };
    let clean = |text: String| text.replace(key, "<redacted>");
    match error {
        LlmError::NotConfigured(t) => LlmError::NotConfigured(clean(t)),
        LlmError::Connect { url, reason } => LlmError::Connect {
            url: clean(url),
            reason: clean(reason),
        },
        LlmError::Http { status, message } => LlmError::Http {
            status,
            message: clean(message),
        },
        LlmError::Malformed(t) => LlmError::Malformed(clean(t)),
        LlmError::StreamCut(t) => LlmError::StreamCut(clean(t)),
        LlmError::Timeout(secs) => LlmError::Timeout(secs),
    }
}

/// `duration` in whole seconds, rounded up (a 300 ms timeout reports 1 s, not 0 s).
fn whole_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

/// The first [`EXCERPT_CHARS`] characters of `text`, trimmed, `…` marking a cut.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A non-2xx response as [`LlmError::Http`], its body read up to [`ERROR_BODY_LIMIT`].
async fn http_error(response: reqwest::Response, idle: Duration) -> LlmError {
    let status = response.status();
    let body = read_bounded(response, idle).await;
    let message = provider_message(&body)
        .unwrap_or_else(|| excerpt(&String::from_utf8_lossy(&body)))
        .trim()
        .to_owned();
    let message = if message.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no error message")
            .to_owned()
    } else {
        message
    };
    tracing::debug!(status = status.as_u16(), "LLM request rejected");
    LlmError::Http {
        status: status.as_u16(),
        message,
    }
}

/// Up to [`ERROR_BODY_LIMIT`] bytes of the body; whatever arrived when it fails or stalls.
async fn read_bounded(response: reqwest::Response, idle: Duration) -> Vec<u8> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < ERROR_BODY_LIMIT {
        match tokio::time::timeout(idle, chunks.next()).await {
            Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    body
}

/// The provider's error message in a JSON error body, if it has one.
fn provider_message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let value = match &value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    error_object_message(value)
        .or_else(|| {
            value
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .filter(|m| !m.trim().is_empty())
}

/// `error.message` (or `error` itself when it is a string) of a JSON object.
fn error_object_message(value: &Value) -> Option<String> {
    match value.get("error")? {
        Value::String(message) => Some(message.clone()),
        error => error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

/// The HTTP-like status an error object inside a stream names (`code` or `status`).
fn error_object_status(value: &Value) -> u16 {
    let error = value.get("error");
    [
        error.and_then(|e| e.get("code")),
        error.and_then(|e| e.get("status")),
    ]
    .into_iter()
    .flatten()
    .find_map(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
    .and_then(|n| u16::try_from(n).ok())
    .filter(|n| (400..=599).contains(n))
    .unwrap_or(MID_STREAM_ERROR_STATUS)
}

/// Why the body stream stopped delivering bytes.
#[derive(Debug)]
enum BodyError {
    /// The connection failed (reset, incomplete chunked body …).
    Transport(reqwest::Error),
    /// Nothing arrived for the idle timeout.
    Idle,
}

/// The raw body chunks.
type BodyBytes = Pin<Box<dyn Stream<Item = Result<bytes::Bytes, BodyError>> + Send>>;

/// The response body as chunks, failing with [`BodyError::Idle`] when none arrives for
/// `idle`. Ends (dropping the response, so closing the connection) after an error.
fn idle_limited(response: reqwest::Response, idle: Duration) -> BodyBytes {
    let body = Box::pin(response.bytes_stream());
    Box::pin(futures_util::stream::unfold(
        Some(body),
        move |body| async move {
            let mut body = body?;
            match tokio::time::timeout(idle, body.next()).await {
                Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(body))),
                Ok(Some(Err(e))) => Some((Err(BodyError::Transport(e)), None)),
                Ok(None) => None,
                Err(_) => Some((Err(BodyError::Idle), None)),
            }
        },
    ))
}

/// What one SSE event means for the reader.
enum Step {
    /// A text delta to yield.
    Token(String),
    /// Nothing to yield (role-only, usage or `finish_reason` chunk, SSE comment …).
    Skip,
    /// The reply is complete.
    End,
    /// The reply failed.
    Fail(LlmError),
}

/// Turns the SSE events of a 2xx response into text deltas.
struct TokenReader {
    /// `None` once the stream ended or failed (the connection is closed then).
    events: Option<EventStream<BodyBytes>>,
    /// A chunk with a `finish_reason` was seen: the reply is complete even without `[DONE]`.
    finished: bool,
    /// That `finish_reason`, until it is yielded at the end.
    finish_reason: Option<String>,
    idle: Duration,
    /// Text deltas yielded, for the end-of-stream log.
    tokens: usize,
}

impl TokenReader {
    fn new(response: reqwest::Response, idle: Duration) -> Self {
        let events = EventStream::new(idle_limited(response, idle));
        Self {
            events: Some(events),
            finished: false,
            finish_reason: None,
            idle,
            tokens: 0,
        }
    }

    /// The next delta, `None` at the end; after an `Err` the next call returns `None`.
    async fn next_token(&mut self) -> Option<Result<Delta, LlmError>> {
        loop {
            let event = self.events.as_mut()?.next().await;
            let step = match event {
                None => self.on_end(),
                Some(Ok(event)) => self.on_data(&event.data),
                Some(Err(error)) => self.on_error(error),
            };
            match step {
                Step::Skip => continue,
                Step::Token(text) => {
                    self.tokens += 1;
                    return Some(Ok(Delta::Text(text)));
                }
                Step::End => {
                    self.close("LLM stream end");
                    return self.finish_reason.take().map(|r| Ok(Delta::Finish(r)));
                }
                Step::Fail(error) => {
                    self.close("LLM stream failed");
                    return Some(Err(error));
                }
            }
        }
    }

    /// Drops the body (closing the connection) and logs the outcome.
    fn close(&mut self, what: &str) {
        self.events = None;
        tracing::debug!(tokens = self.tokens, finished = self.finished, "{what}");
    }

    /// The body ended without `[DONE]`.
    fn on_end(&self) -> Step {
        if self.finished {
            Step::End
        } else {
            Step::Fail(LlmError::StreamCut(
                "the connection closed before the reply finished".to_owned(),
            ))
        }
    }

    /// The body or its SSE framing failed.
    fn on_error(&self, error: EventStreamError<BodyError>) -> Step {
        match error {
            EventStreamError::Transport(BodyError::Idle) => {
                Step::Fail(LlmError::Timeout(whole_secs(self.idle)))
            }
            EventStreamError::Transport(BodyError::Transport(_)) if self.finished => Step::End,
            EventStreamError::Transport(BodyError::Transport(e)) => {
                Step::Fail(LlmError::StreamCut(error_chain(e)))
            }
            EventStreamError::Utf8(e) => {
                Step::Fail(LlmError::Malformed(format!("the stream is not UTF-8: {e}")))
            }
            EventStreamError::Parser(e) => Step::Fail(LlmError::Malformed(format!(
                "invalid server-sent events: {}",
                excerpt(&e.to_string())
            ))),
        }
    }

    /// One `data:` payload: `[DONE]` or a `chat.completion.chunk`.
    fn on_data(&mut self, data: &str) -> Step {
        if data.trim() == "[DONE]" {
            return Step::End;
        }
        let chunk: Value = match serde_json::from_str(data) {
            Ok(chunk @ Value::Object(_)) => chunk,
            Ok(_) | Err(_) => {
                return Step::Fail(LlmError::Malformed(format!(
                    "a stream event is not a JSON object: {}",
                    excerpt(data)
                )))
            }
        };
        if chunk.get("error").is_some() {
            return Step::Fail(mid_stream_error(&chunk));
        }
        let choice = chunk.get("choices").and_then(|c| c.get(0));
        if let Some(reason) = choice
            .and_then(|c| c.get("finish_reason"))
            .filter(|r| !r.is_null())
        {
            self.finished = true;
            self.finish_reason = Some(reason.as_str().unwrap_or("unknown").to_owned());
        }
        match choice.and_then(|c| c.get("delta")?.get("content")?.as_str()) {
            Some(text) if !text.is_empty() => Step::Token(text.to_owned()),
            _ => Step::Skip,
        }
    }
}

/// An `{"error": …}` chunk inside a 2xx stream, as [`LlmError::Http`].
fn mid_stream_error(chunk: &Value) -> LlmError {
    let message = error_object_message(chunk)
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| excerpt(&chunk.to_string()));
    LlmError::Http {
        status: error_object_status(chunk),
        message,
    }
}
