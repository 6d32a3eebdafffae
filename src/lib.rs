//! # cmdr — an actor-based async command runner for AI agents
//!
//! The command package lives in the [`cmdr_executors`] crate (re-exported as
//! [`executors`]): protocol types, executor actors, the registry and the six executors.
//! This crate holds the application around it — the front doors that feed the registry.
//!
//! ## Layout
//! - [`cli`]: the `cmdr` command line (`cmdr exec` …), one file per subcommand.
//! - [`json_lines`]: reading commands as JSON Lines (or pretty-printed objects) from a
//!   stream, one malformed line never hiding the next.
//! - [`tty_input`]: the terminal [`InputBroker`](cmdr_executors::InputBroker) used by
//!   `cmdr exec` to answer `REQUEST_USER_INPUT`.

pub mod cli;
pub mod json_lines;
pub mod nats;
pub mod tty_input;

pub use cmdr_executors as executors;
