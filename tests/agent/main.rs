//! Agent-side tests: the LLM client against a fake OpenAI-compatible streaming server.

// Integration tests are tests: their helpers may unwrap (the workspace denies it elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod chat_cli;
use cmdr_test_support::fake_llm;
mod llm_client;
