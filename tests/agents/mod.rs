//! Agents and agent commands on disk (`cmdr::agents`): discovery, the strict command-file
//! schema, `config.toml`, traversal-safe names and the shipped `codex_agents/`. Real temp
//! directories; no cache anywhere, so every test writes files and reads them back.

mod agents_list;
mod commands_list;
mod config;
mod load_command;
mod schema;
mod shipped;
mod support;
