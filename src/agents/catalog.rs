//! [`AgentCatalog`]: the agents directory — listing agents, loading one, listing and
//! loading its commands. Plain synchronous `std::fs`; async callers run it on a blocking
//! thread. Nothing is cached: every call reads the disk, so edits show up at once.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::command_file::{validate_command_json, AgentCommand, CommandItem};
use super::config::AgentConfig;
use super::error::AgentError;
use super::name::{agent_name_problem, command_name_problem, is_hidden, too_long};

/// The environment variable that overrides the agents directory.
pub const AGENTS_DIR_ENV: &str = "CMDR_AGENTS_DIR";
/// The agents directory when nothing else is configured (relative to the cwd).
pub const DEFAULT_AGENTS_DIR: &str = "codex_agents";
/// The description of an agent listed despite a broken `config.toml`.
pub const INVALID_AGENT_DESCRIPTION: &str = "Invalid agent config";
/// The description of a listed command whose file is invalid.
pub const INVALID_COMMAND_DESCRIPTION: &str = "Invalid command file";

const CONFIG_FILE: &str = "config.toml";
const SYSTEM_PROMPT_FILE: &str = "system_prompt.md";
const COMMANDS_DIR: &str = "commands";
const COMMAND_EXT: &str = ".json";

/// The agents directory: every (non-hidden) folder in it is an agent named after the
/// folder.
#[derive(Debug, Clone)]
pub struct AgentCatalog {
    dir: PathBuf,
}

/// One agent as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentSummary {
    /// The folder's name.
    pub name: String,
    /// `description` from `config.toml`; `""` when absent, and
    /// [`INVALID_AGENT_DESCRIPTION`] when `config.toml` cannot be read or is invalid.
    pub description: String,
    /// Why the agent's `config.toml` is invalid, for tools that explain it (not
    /// serialized).
    #[serde(skip)]
    pub error: Option<String>,
}

/// A loaded agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The folder's name.
    pub name: String,
    /// The agent's folder.
    pub dir: PathBuf,
    /// Its `config.toml` (the defaults when absent).
    pub config: AgentConfig,
    /// The content of `system_prompt.md`, when present. It extends (never replaces) the
    /// default `<shell>` prompt: see [`crate::agent::system_prompt`].
    pub system_prompt: Option<String>,
}

/// One command as listed. Serializes as `{"name","description"}`, plus
/// `"disabled":true` for an invalid file; the validation error stays off the wire and is
/// available through [`CommandEntry::error`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandEntry {
    /// The file name without `.json`.
    pub name: String,
    /// `Description` of a valid file; [`INVALID_COMMAND_DESCRIPTION`] otherwise.
    pub description: String,
    /// Whether the file is invalid (and so cannot be run).
    #[serde(skip_serializing_if = "is_false")]
    pub disabled: bool,
    /// Why the file is invalid (`items[2].content[1]: must be a non-empty string`).
    #[serde(skip)]
    pub error: Option<String>,
}

impl CommandEntry {
    /// Why the file is invalid, when it is.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl AgentCatalog {
    /// A catalog of the agents in `dir`. Nothing is read until asked.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The agents directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `$CMDR_AGENTS_DIR` when set and non-empty, else `codex_agents` (relative to the
    /// cwd).
    pub fn default_dir() -> PathBuf {
        std::env::var_os(AGENTS_DIR_ENV)
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_AGENTS_DIR), PathBuf::from)
    }

    /// Every agent, sorted by name: the folders of the agents directory (symlinks to
    /// folders included), skipping files, hidden folders and folders whose name could not
    /// be used as an agent name (not UTF-8, or containing `..` or `\`). A missing agents
    /// directory is an empty list. An agent whose `config.toml` is broken is still listed,
    /// with description [`INVALID_AGENT_DESCRIPTION`] and the reason in `error`.
    pub fn list_agents(&self) -> Result<Vec<AgentSummary>, AgentError> {
        let mut agents = Vec::new();
        for name in self.subdirectories(&self.dir)? {
            if agent_name_problem(&name).is_some() {
                continue;
            }
            let summary = match self.load_config(&name, &self.dir.join(&name)) {
                Ok(config) => AgentSummary {
                    description: config.description.unwrap_or_default(),
                    name,
                    error: None,
                },
                Err(e) => AgentSummary {
                    name,
                    description: INVALID_AGENT_DESCRIPTION.to_owned(),
                    error: Some(e.to_string()),
                },
            };
            agents.push(summary);
        }
        agents.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(agents)
    }

    /// Loads the agent `name`: its `config.toml` (checked) and `system_prompt.md`.
    /// `AGENT_NOT_FOUND` for a name that is not a folder of the agents directory (or could
    /// not be one); `AGENT_INVALID` for a broken `config.toml`.
    pub fn agent(&self, name: &str) -> Result<Agent, AgentError> {
        let dir = self.agent_dir(name)?;
        let config = self.load_config(name, &dir)?;
        let system_prompt = self.read_optional(&dir.join(SYSTEM_PROMPT_FILE))?;
        Ok(Agent {
            name: name.to_owned(),
            dir,
            config,
            system_prompt,
        })
    }

    /// The commands of `agent`, sorted by name, read from disk on every call: each
    /// `commands/*.json` file (not hidden; other files and folders are ignored). Invalid
    /// files are listed disabled, with description [`INVALID_COMMAND_DESCRIPTION`] and the
    /// reason in `error`. No `commands/` folder is an empty list. Does not require the
    /// agent's `config.toml` to be valid.
    pub fn list_commands(&self, agent: &str) -> Result<Vec<CommandEntry>, AgentError> {
        let commands_dir = self.agent_dir(agent)?.join(COMMANDS_DIR);
        let entries = match fs::read_dir(&commands_dir) {
            Ok(entries) => entries,
            Err(e) if is_missing(&e) => return Ok(Vec::new()),
            Err(e) => return Err(self.io(&commands_dir, e)),
        };
        let mut commands = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.io(&commands_dir, e))?;
            let Ok(file_name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(name) = file_name.strip_suffix(COMMAND_EXT) else {
                continue;
            };
            if is_hidden(&file_name) || entry.path().is_dir() {
                continue;
            }
            let checked = match command_name_problem(name) {
                Some(problem) => Err(format!("the file name cannot be run: {problem}")),
                None => fs::read(entry.path())
                    .map_err(|e| format!("cannot read the file: {e}"))
                    .and_then(parse_command_file),
            };
            commands.push(match checked {
                Ok((description, _)) => CommandEntry {
                    name: name.to_owned(),
                    description,
                    disabled: false,
                    error: None,
                },
                Err(error) => CommandEntry {
                    name: name.to_owned(),
                    description: INVALID_COMMAND_DESCRIPTION.to_owned(),
                    disabled: true,
                    error: Some(error),
                },
            });
        }
        commands.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(commands)
    }

    /// Loads and validates `commands/<name>.json` of `agent`. In this order:
    /// `COMMAND_INVALID` for a name that is empty, starts with `.` or contains `/`, `\` or
    /// `..` — before the disk is touched, so even for an agent that does not exist;
    /// `AGENT_NOT_FOUND`; `COMMAND_NOT_FOUND` when there is no such file;
    /// `COMMAND_INVALID` with the validation error for an invalid file.
    pub fn load_command(&self, agent: &str, name: &str) -> Result<AgentCommand, AgentError> {
        if let Some(problem) = command_name_problem(name) {
            return Err(AgentError::CommandInvalid(format!(
                "command name `{}` is not allowed: {problem}",
                printable(name)
            )));
        }
        let path = self
            .agent_dir(agent)?
            .join(COMMANDS_DIR)
            .join(format!("{name}{COMMAND_EXT}"));
        let not_found = || AgentError::CommandNotFound {
            agent: agent.to_owned(),
            command: name.to_owned(),
        };
        match fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => return Err(not_found()),
            Ok(_) => {}
            Err(e) if is_missing(&e) => return Err(not_found()),
            Err(e) => return Err(self.io(&path, e)),
        }
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if is_missing(&e) => return Err(not_found()),
            Err(e) => return Err(self.io(&path, e)),
        };
        let (description, items) = parse_command_file(bytes).map_err(|e| {
            AgentError::CommandInvalid(format!("{}: {e}", self.relative(&path).display()))
        })?;
        Ok(AgentCommand {
            name: name.to_owned(),
            description,
            items,
        })
    }

    /// The folder of agent `name`, after checking the name and that the folder exists.
    fn agent_dir(&self, name: &str) -> Result<PathBuf, AgentError> {
        if let Some(problem) = too_long(name) {
            return Err(AgentError::AgentNameInvalid(problem));
        }
        let not_found = || AgentError::AgentNotFound(name.to_owned());
        if agent_name_problem(name).is_some() {
            return Err(not_found());
        }
        let dir = self.dir.join(name);
        match fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => Ok(dir),
            Ok(_) => Err(not_found()),
            Err(e) if is_missing(&e) => Err(not_found()),
            Err(e) => Err(self.io(&dir, e)),
        }
    }

    /// The agent's `config.toml`, or the defaults when there is none.
    fn load_config(&self, agent: &str, dir: &Path) -> Result<AgentConfig, AgentError> {
        let path = dir.join(CONFIG_FILE);
        let Some(text) = self.read_optional(&path)? else {
            return Ok(AgentConfig::default());
        };
        AgentConfig::parse(&text).map_err(|reason| {
            // `<agent>/config.toml line 2 (`…`): …` or `<agent>/config.toml: …`.
            let sep = if reason.starts_with("line ") {
                " "
            } else {
                ": "
            };
            AgentError::AgentInvalid {
                agent: agent.to_owned(),
                reason: format!("{}{sep}{reason}", self.relative(&path).display()),
            }
        })
    }

    /// The text of `path`, `None` when it does not exist. A file that is not UTF-8 is an
    /// `Io` error of kind `InvalidData`.
    fn read_optional(&self, path: &Path) -> Result<Option<String>, AgentError> {
        match fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if is_missing(&e) => Ok(None),
            Err(e) => Err(self.io(path, e)),
        }
    }

    /// The UTF-8 names of the non-hidden folders of `dir` (none when `dir` is missing).
    fn subdirectories(&self, dir: &Path) -> Result<Vec<String>, AgentError> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if is_missing(&e) => return Ok(Vec::new()),
            Err(e) => return Err(self.io(dir, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.io(dir, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !is_hidden(&name) && entry.path().is_dir() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn io(&self, path: &Path, source: io::Error) -> AgentError {
        AgentError::Io {
            path: self.relative(path).to_path_buf(),
            source,
        }
    }

    /// `path` relative to the agents directory when inside it.
    fn relative<'a>(&self, path: &'a Path) -> &'a Path {
        path.strip_prefix(&self.dir).unwrap_or(path)
    }
}

/// Validates the bytes of a command file: its `Description` and items, or the reason it
/// is invalid (one line for people).
fn parse_command_file(bytes: Vec<u8>) -> Result<(String, Vec<CommandItem>), String> {
    let text = String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_owned())?;
    validate_command_json(&text).map_err(|e| e.to_string())
}

/// `name` as typed, with control characters escaped so a message stays one line.
fn printable(name: &str) -> String {
    if name.chars().any(char::is_control) {
        name.escape_debug().to_string()
    } else {
        name.to_owned()
    }
}

/// "Not there": missing, or a path through something that is not a directory.
fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}
