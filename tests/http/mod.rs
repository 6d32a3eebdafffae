//! The HTTP API end to end (docs/contract.md §6): a real server on an ephemeral port, a real HTTP
//! client, the fake OpenAI-compatible LLM, a temp agents folder and SQLite file, real
//! commands.
//!
//! - `routes`: discovery, conversations, health.
//! - `runs`: runs to completion, SSE streams, stateless runs, errors, aborts, the lock.
//! - `commands`: the raw job runner (SSE, combine, cancel, input, malformed bodies).
//! - `security`: token, browser guard, body limit, unknown routes and methods.
//! - `confine`: `--allow-root` over HTTP (working folders, commands, health).

mod commands;
mod confine;
use cmdr_test_support::fake_llm;
mod routes;
mod runs;
mod security;
use cmdr_test_support::http as support;
