//! Agents and agent commands on disk (docs/contract.md §5): the one place that discovers agents and
//! validates command files, for every transport (CLI, REST, MCP).
//!
//! ```text
//! codex_agents/                  the agents directory (`--agents-dir`, `CMDR_AGENTS_DIR`)
//!   planning_agent/              an agent, named after its folder
//!     config.toml                optional: description, model, max_iterations, …
//!     system_prompt.md           optional: appended to the default `<shell>` prompt
//!     commands/improve_plan.json optional: a command (macro) named `improve_plan`
//! ```
//!
//! - `catalog`: [`AgentCatalog`] — list agents, load one, list and load its commands.
//! - `config`: [`AgentConfig`], the strict `config.toml`.
//! - `command_file`: [`validate_command_json`], [`AgentCommand`] and [`CommandItem`]
//!   (the extension point for new step types).
//! - `name`: which names may become paths (no traversal).
//! - `error`: [`AgentError`] and its stable codes.
//!
//! Everything here is synchronous `std::fs`; async callers use a blocking thread.
//! `docs/agents.md` is the guide for agent authors.

mod catalog;
mod command_file;
mod config;
mod error;
mod name;

pub use catalog::{
    Agent, AgentCatalog, AgentSummary, CommandEntry, AGENTS_DIR_ENV, DEFAULT_AGENTS_DIR,
    INVALID_AGENT_DESCRIPTION, INVALID_COMMAND_DESCRIPTION,
};
pub use command_file::{
    validate_command_json, AgentCommand, CommandFileError, CommandItem, MessageRole,
    SUPPORTED_ITEM_TYPES,
};
pub use config::{AgentConfig, MAX_MAX_ITERATIONS, MIN_MAX_ITERATIONS};
pub use error::AgentError;
