//! The HTTP API end to end (docs/contract.md §6): a real server on an ephemeral port, a real HTTP
//! client, the fake OpenAI-compatible LLM, a temp agents folder and SQLite file, real
//! commands.
//!
//! - `routes`: discovery, conversations, health.
//! - `runs`: runs to completion, SSE streams, stateless runs, errors, aborts, the lock.
//! - `commands`: the raw job runner (SSE, combine, cancel, input, malformed bodies).
//! - `security`: token, browser guard, body limit, unknown routes and methods.
//! - `confine`: `--allow-root` over HTTP (working folders, commands, health).
//! - `processes`: the process routes; `agent_processes`: the agent's processes through a
//!   real `cmdr serve` (the conversation's scope, archive, the model's read position).

mod agent_processes;
mod commands;
mod confine;
mod processes;
use cmdr_test_support::fake_llm;
mod routes;
mod runs;
mod security;
use cmdr_test_support::http as support;
