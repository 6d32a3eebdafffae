//! The conversation as the loop keeps it: append-only messages, stored verbatim.
//!
//! What the model is sent is derived from this in one place ([`to_chat_messages`]), the
//! same way every time, so the request of iteration N is the request of iteration N−1
//! plus new messages (the provider's prefix cache stays warm).

use crate::llm::{ChatMessage, ChatRole};
use crate::turn::{Message, Role};

/// Opening line of a `tool` message as the model sees it.
pub const TOOL_RESULTS_OPEN: &str = "<tool_results>\n";
/// Closing line of a `tool` message as the model sees it.
pub const TOOL_RESULTS_CLOSE: &str = "\n</tool_results>";

/// The provider's view of the conversation: the system prompt, then every non-empty
/// message in order. Providers refuse a bare `tool` role without tool-call ids, so `tool`
/// messages become `user` messages wrapped in `<tool_results>` tags. A pure function of
/// its input: appending to `history` only ever appends to the result.
pub fn to_chat_messages(system_prompt: &str, history: &[Message]) -> Vec<ChatMessage> {
    let mut messages = Vec::with_capacity(history.len() + 1);
    if !system_prompt.is_empty() {
        messages.push(ChatMessage {
            role: ChatRole::System,
            content: system_prompt.to_owned(),
        });
    }
    messages.extend(
        history
            .iter()
            .filter(|m| !m.content.is_empty())
            .map(to_chat_message),
    );
    messages
}

fn to_chat_message(message: &Message) -> ChatMessage {
    match message.role {
        Role::User => ChatMessage {
            role: ChatRole::User,
            content: message.content.clone(),
        },
        Role::Assistant => ChatMessage {
            role: ChatRole::Assistant,
            content: message.content.clone(),
        },
        Role::Tool => ChatMessage {
            role: ChatRole::User,
            content: format!("{TOOL_RESULTS_OPEN}{}{TOOL_RESULTS_CLOSE}", message.content),
        },
    }
}
