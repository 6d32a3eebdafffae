//! Agent-side tests: the LLM client against a fake OpenAI-compatible streaming server.

mod agent_loop;
mod chat_cli;
mod chat_lock;
use cmdr_test_support::fake_llm;
mod llm_client;
mod model_numbers;
mod processes;
mod real_model;
mod real_models;
