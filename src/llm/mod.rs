//! The model side of the agent loop: a small [`LlmClient`] trait and its one
//! implementation for OpenAI-compatible streaming chat completions ([`OpenAiClient`]).
//!
//! - `message`: [`ChatMessage`] and [`ChatRequest`], what is sent (data only).
//! - `error`: [`LlmError`], every way a model call fails, with stable codes.
//! - `config`: [`LlmConfig`], read from `CMDR_LLM_BASE_URL`, `CMDR_LLM_API_KEY`,
//!   `CMDR_LLM_MODEL`.
//! - `openai`: [`OpenAiClient`] (reqwest on rustls/ring, SSE parsing).

mod config;
mod error;
mod message;
mod openai;

use std::future::Future;
use std::pin::Pin;

use futures_core::Stream;

pub use config::LlmConfig;
pub use error::LlmError;
pub use message::{ChatMessage, ChatRequest, ChatRole};
pub use openai::OpenAiClient;

/// One piece of a streamed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// A text delta, verbatim.
    Text(String),
    /// The provider's `finish_reason` (`stop`, `length`, `content_filter` …), sent at most
    /// once, after the last text delta, when the provider named one.
    Finish(String),
}

/// The model's reply as it arrives: deltas in order, ending after the last one (`Ok`
/// items only) or with one `Err` (after which nothing more comes).
pub type TokenStream = Pin<Box<dyn Stream<Item = Result<Delta, LlmError>> + Send>>;

/// The future [`LlmClient::stream_chat`] returns.
pub type ChatFuture<'a> = Pin<Box<dyn Future<Output = Result<TokenStream, LlmError>> + Send + 'a>>;

/// A chat model that streams its reply. Dropping the [`TokenStream`] stops the model
/// (the HTTP request is closed).
pub trait LlmClient: Send + Sync + 'static {
    /// Starts one streamed completion of `request`. Resolves once the provider accepted
    /// the request (HTTP status checked), before the first token.
    fn stream_chat(&self, request: ChatRequest) -> ChatFuture<'_>;

    /// The model used when a request names none.
    fn default_model(&self) -> &str;
}
