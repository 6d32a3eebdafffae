//! # cmdr — an actor-based async command runner for AI agents
//!
//! The command package lives in the [`cmdr_executors`] crate (re-exported as
//! [`executors`]): protocol types, executor actors, the registry and the executors.
//! This crate holds the application around it — the front doors that feed the registry.
//!
//! ## Layout
//! - [`agent`]: the agent loop — `<shell>` detection, the loop, events, history.
//! - [`agents`]: agent definitions on disk — [`agents::AgentCatalog`], `config.toml`,
//!   and the strict command files (`commands/*.json`).
//! - [`app`]: the composition root: [`app::RegistryBuilder`] and typed set-up errors, used
//!   by every front door.
//! - [`http`]: the REST + SSE API of `cmdr serve` ([`http::router`]), over [`server`].
//! - [`llm`]: the model client (OpenAI-compatible streaming chat completions).
//! - [`orphans`]: shells marked with their `cmdr`'s identity, and the processes of a
//!   `cmdr` that died mid-run killed when its runs are closed; `owner`: that identity.
//! - [`recovery`]: start-up recovery, run once by the front doors that run agents: the
//!   runs of dead `cmdr`s closed in the store, their processes killed.
//! - [`mcp`]: the MCP tools over streamable HTTP and stdio (rmcp), onto [`server::AppState`].
//! - [`scopes`]: the process scope of each front door (`http`, `conversation:<id>`,
//!   `mcp:<session>`, `nats:<producer>`).
//! - [`server`]: the state `cmdr serve` and `cmdr mcp` share (registry, service, inputs).
//! - [`service`]: the agent service every transport calls: discovery, checks, locks, runs.
//! - [`cli`]: the `cmdr` command line (`cmdr exec` …), one file per subcommand.
//! - [`json_escape`]: JSON string escaping of large output chunks, as `serde_json` does it.
//! - [`json_lines`]: reading commands as JSON Lines (or pretty-printed objects) from a
//!   stream, one malformed line never hiding the next.
//! - [`store`]: persistent conversations and turns ([`store::Store`], SQLite by default).
//! - [`turn`]: a conversation's turns as data ([`turn::Message`] …), below the agent loop
//!   and the store, which both use them.
//! - [`tty_input`]: the terminal [`InputBroker`](cmdr_executors::InputBroker) used by
//!   `cmdr exec` to answer `REQUEST_USER_INPUT`.
//! - [`undumpable`]: cmdr's environment and memory hidden from the commands it runs.
//! - [`web`]: the web UI (`web/`: HTML, CSS, ES modules) embedded in the binary
//!   ([`web::router`]: `GET /` and `GET /assets/…`).

pub mod agent;
pub mod agents;
pub mod app;
pub mod cli;
pub mod http;
pub mod json_escape;
pub mod json_lines;
pub mod llm;
pub mod mcp;
pub mod nats;
pub mod orphans;
pub(crate) mod owner;
pub mod recovery;
pub mod result_line;
pub mod scopes;
pub mod server;
pub mod service;
pub mod store;
pub mod tty_input;
pub mod turn;
pub mod undumpable;
pub mod web;

pub use cmdr_executors as executors;
