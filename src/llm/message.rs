//! What is sent to the model: data only.

use serde::Serialize;

/// Who wrote a message, in the provider's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions for the model.
    System,
    /// The person (and, wrapped, command results).
    User,
    /// The model's own earlier replies, verbatim.
    Assistant,
}

/// One message of the conversation as the provider receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: ChatRole,
    /// Its text, byte for byte.
    pub content: String,
}

/// One streamed chat completion.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatRequest {
    /// The model; the client's default when `None`.
    pub model: Option<String>,
    /// The whole conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// The longest reply, in tokens (`max_tokens`); the provider's default when `None`.
    pub max_tokens: Option<u32>,
    /// Texts that end the reply where the model writes them (`stop`; not included in
    /// the reply). Providers accept up to four.
    pub stop: Vec<String>,
}
