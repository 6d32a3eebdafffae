//! [`AgentConfig`]: an agent's optional `config.toml`.

use std::time::Duration;

use cmdr_executors::EnvPolicy;
use serde::Deserialize;

/// The smallest allowed `max_iterations`.
pub const MIN_MAX_ITERATIONS: u32 = 1;
/// The largest allowed `max_iterations`.
pub const MAX_MAX_ITERATIONS: u32 = 100;

/// An agent's `config.toml`. Every key is optional; a missing file is the same as an empty
/// one. Unknown keys are an error (a typo must not be silently ignored).
///
/// ```toml
/// # One line shown by `cmdr agents list` and in the UI.
/// description = "Reviews and improves implementation plans"
/// # The model to ask; the client's default (`CMDR_LLM_MODEL`) when absent.
/// model = "gemini-2.5-pro"
/// # Iterations (model reply + its commands) per user turn, 1..=100; default 10.
/// max_iterations = 20
/// # Deadline of each `<shell>` command, in seconds (at least 1); default 300.
/// command_timeout_secs = 120
/// # The longest model reply, in tokens (`max_tokens`); default 4096, 0 = send no limit.
/// max_tokens = 8192
///
/// # The environment of the agent's shells (default: the server's policy).
/// [shell_environment_policy]
/// inherit = "core"              # all | core | none
/// exclude = ["AWS_*"]           # more name patterns to drop (`*` wildcards)
/// include_only = []             # if not empty, only matching names are kept
/// ignore_default_excludes = false   # keep *KEY*, *SECRET*, *TOKEN* … (CMDR_* never)
/// set = { CI = "1" }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// `description`: a one-line summary of the agent.
    pub description: Option<String>,
    /// `model`: the model id to use instead of the client's default.
    pub model: Option<String>,
    /// `max_iterations`: the iteration cap of each user turn, 1..=100.
    pub max_iterations: Option<u32>,
    /// `command_timeout_secs`: the deadline of each command the agent runs, at least 1.
    pub command_timeout_secs: Option<u64>,
    /// `max_tokens`: the longest reply asked of the model; 0 sends no limit (the
    /// provider's default).
    pub max_tokens: Option<u32>,
    /// `[shell_environment_policy]`: how the environment of the agent's shells is built
    /// from cmdr's (in place of the server's policy; in-process runs only — with `--nats`
    /// the workers' policy applies).
    pub shell_environment_policy: Option<EnvPolicy>,
}

impl AgentConfig {
    /// Parses and checks the text of a `config.toml`. The error is one line: the line
    /// number, the offending line when there is one, and what is wrong — e.g.
    /// ``line 3 (`temperature = 0.2`): unknown key `temperature`, expected one of …``.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut config: Self = toml::from_str(text).map_err(|e| describe_toml_error(text, &e))?;
        if let Some(n) = config.max_iterations {
            if !(MIN_MAX_ITERATIONS..=MAX_MAX_ITERATIONS).contains(&n) {
                return Err(format!(
                    "max_iterations must be between {MIN_MAX_ITERATIONS} and \
                     {MAX_MAX_ITERATIONS}, got {n}"
                ));
            }
        }
        if config.command_timeout_secs == Some(0) {
            return Err("command_timeout_secs must be at least 1".to_owned());
        }
        config.description = config.description.map(|d| d.trim().to_owned());
        config.model = config
            .model
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty());
        Ok(config)
    }

    /// The `max_tokens` a run sends: the configured one (none for 0), else `default`.
    pub fn max_tokens_or(&self, default: Option<u32>) -> Option<u32> {
        match self.max_tokens {
            Some(0) => None,
            Some(n) => Some(n),
            None => default,
        }
    }

    /// `command_timeout_secs` as a [`Duration`].
    pub fn command_timeout(&self) -> Option<Duration> {
        self.command_timeout_secs.map(Duration::from_secs)
    }
}

/// One line out of a TOML error: `line N (`the line`): message`, with serde's "unknown
/// field" said as "unknown key" (TOML's word).
fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim();
    let message = match message.strip_prefix("unknown field") {
        Some(rest) => format!("unknown key{rest}"),
        None => message.to_owned(),
    };
    let Some(span) = error.span() else {
        return message;
    };
    let start = span.start.min(text.len());
    let line_no = text.as_bytes()[..start]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    let line = text.lines().nth(line_no - 1).map(str::trim).unwrap_or("");
    if line.is_empty() {
        format!("line {line_no}: {message}")
    } else {
        format!("line {line_no} (`{line}`): {message}")
    }
}
