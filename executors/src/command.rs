//! What every [`Command`] can be asked, whatever its type, and how a [`CommandType`]
//! is spelled on the wire.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::ExecError;
use crate::protocol::{
    BashExecCommand, Command, CommandType, ExecutionStatus, FileReadCommand, FileWriteCommand,
    ListDirectoryCommand, PatchFileCommand, ProcessInputCommand, ProcessKillCommand,
    ProcessListCommand, ProcessOutputCommand, RequestUserInputCommand,
};

/// The longest `timeout_ms` a client may give: 7 days.
pub const MAX_TIMEOUT_MS: u64 = 7 * 24 * 3600 * 1000;
/// The longest `wait_ms` or `yield_ms` a client may give: 10 minutes.
pub const MAX_WAIT_MS: u64 = 10 * 60 * 1000;
/// The longest `grace_ms` a client may give: 1 minute.
pub const MAX_GRACE_MS: u64 = 60 * 1000;

impl CommandType {
    /// Every command type, in wire order.
    pub const ALL: [CommandType; 10] = [
        CommandType::BashExec,
        CommandType::FileRead,
        CommandType::FileWrite,
        CommandType::PatchFile,
        CommandType::ListDirectory,
        CommandType::RequestUserInput,
        CommandType::ProcessInput,
        CommandType::ProcessOutput,
        CommandType::ProcessKill,
        CommandType::ProcessList,
    ];

    /// The wire spelling, e.g. `"BASH_EXEC"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandType::BashExec => "BASH_EXEC",
            CommandType::FileRead => "FILE_READ",
            CommandType::FileWrite => "FILE_WRITE",
            CommandType::PatchFile => "PATCH_FILE",
            CommandType::ListDirectory => "LIST_DIRECTORY",
            CommandType::RequestUserInput => "REQUEST_USER_INPUT",
            CommandType::ProcessInput => "PROCESS_INPUT",
            CommandType::ProcessOutput => "PROCESS_OUTPUT",
            CommandType::ProcessKill => "PROCESS_KILL",
            CommandType::ProcessList => "PROCESS_LIST",
        }
    }
}

impl fmt::Display for CommandType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not one of the wire spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown commandType '{0}' (expected one of BASH_EXEC, FILE_READ, FILE_WRITE, PATCH_FILE, LIST_DIRECTORY, REQUEST_USER_INPUT, PROCESS_INPUT, PROCESS_OUTPUT, PROCESS_KILL, PROCESS_LIST)")]
pub struct UnknownCommandType(pub String);

impl FromStr for CommandType {
    type Err = UnknownCommandType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CommandType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownCommandType(s.to_owned()))
    }
}

impl Command {
    /// The command's type.
    pub fn command_type(&self) -> CommandType {
        match self {
            Command::BashExec(_) => CommandType::BashExec,
            Command::FileRead(_) => CommandType::FileRead,
            Command::FileWrite(_) => CommandType::FileWrite,
            Command::PatchFile(_) => CommandType::PatchFile,
            Command::ListDirectory(_) => CommandType::ListDirectory,
            Command::RequestUserInput(_) => CommandType::RequestUserInput,
            Command::ProcessInput(_) => CommandType::ProcessInput,
            Command::ProcessOutput(_) => CommandType::ProcessOutput,
            Command::ProcessKill(_) => CommandType::ProcessKill,
            Command::ProcessList(_) => CommandType::ProcessList,
        }
    }

    /// The command's id (empty until one is given or generated).
    pub fn command_id(&self) -> &str {
        match self {
            Command::BashExec(c) => &c.command_id,
            Command::FileRead(c) => &c.command_id,
            Command::FileWrite(c) => &c.command_id,
            Command::PatchFile(c) => &c.command_id,
            Command::ListDirectory(c) => &c.command_id,
            Command::RequestUserInput(c) => &c.command_id,
            Command::ProcessInput(c) => &c.command_id,
            Command::ProcessOutput(c) => &c.command_id,
            Command::ProcessKill(c) => &c.command_id,
            Command::ProcessList(c) => &c.command_id,
        }
    }

    /// Mutable access to the command's id.
    pub fn command_id_mut(&mut self) -> &mut String {
        match self {
            Command::BashExec(c) => &mut c.command_id,
            Command::FileRead(c) => &mut c.command_id,
            Command::FileWrite(c) => &mut c.command_id,
            Command::PatchFile(c) => &mut c.command_id,
            Command::ListDirectory(c) => &mut c.command_id,
            Command::RequestUserInput(c) => &mut c.command_id,
            Command::ProcessInput(c) => &mut c.command_id,
            Command::ProcessOutput(c) => &mut c.command_id,
            Command::ProcessKill(c) => &mut c.command_id,
            Command::ProcessList(c) => &mut c.command_id,
        }
    }

    /// Gives the command a fresh UUID v4 id when it has none; returns the id.
    pub fn ensure_command_id(&mut self) -> &str {
        let id = self.command_id_mut();
        if id.trim().is_empty() {
            *id = uuid::Uuid::new_v4().to_string();
        }
        id
    }

    /// Refuses (`INVALID_INPUT`, naming the cap) any duration a client gives beyond its
    /// cap: [`MAX_TIMEOUT_MS`] for `timeout_ms` (a command's deadline, a background
    /// process's lifetime, a readiness wait), [`MAX_WAIT_MS`] for `wait_ms` and
    /// `yield_ms`, [`MAX_GRACE_MS`] for `grace_ms`. Larger values cannot be meant, and
    /// would overflow the clock arithmetic they feed.
    pub fn check_durations(&self) -> Result<(), ExecError> {
        let mut given: Vec<(&str, Option<u64>, u64)> = Vec::new();
        let timeout = |ms| ("timeout_ms", ms, MAX_TIMEOUT_MS);
        let wait = |name, ms| (name, ms, MAX_WAIT_MS);
        match self {
            Command::BashExec(c) => {
                given.push(timeout(c.timeout_ms));
                given.push(wait("yield_ms", c.yield_ms));
                given.push((
                    "ready.timeout_ms",
                    c.ready.as_ref().and_then(|r| r.timeout_ms),
                    MAX_TIMEOUT_MS,
                ));
            }
            Command::ProcessInput(c) => {
                given.push(timeout(c.timeout_ms));
                given.push(wait("yield_ms", c.yield_ms));
            }
            Command::ProcessOutput(c) => {
                given.push(timeout(c.timeout_ms));
                given.push(wait("wait_ms", c.wait_ms));
            }
            Command::ProcessKill(c) => {
                given.push(timeout(c.timeout_ms));
                given.push(("grace_ms", c.grace_ms, MAX_GRACE_MS));
            }
            _ => given.push(timeout(
                self.requested_timeout()
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            )),
        }
        match given
            .into_iter()
            .find(|(_, ms, cap)| ms.is_some_and(|ms| ms > *cap))
        {
            Some((name, Some(ms), cap)) => Err(ExecError::InvalidInput(format!(
                "{name} is {ms}: at most {cap} ms"
            ))),
            _ => Ok(()),
        }
    }

    /// Gives the command the deadline `deadline` when it asks for none (a worker's
    /// `--max-timeout-ms`: no command holds a job for ever). A background start keeps no
    /// deadline: its `timeout_ms` is its process's lifetime, and the start itself ends
    /// with its `yield_ms` or readiness wait.
    pub fn default_deadline(&mut self, deadline: Duration) {
        let ms = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        let timeout_ms = match self {
            Command::BashExec(c) if c.background && c.session.is_none() => return,
            Command::BashExec(c) => &mut c.timeout_ms,
            Command::RequestUserInput(c) => &mut c.timeout_ms,
            Command::FileRead(c) => &mut c.timeout_ms,
            Command::FileWrite(c) => &mut c.timeout_ms,
            Command::PatchFile(c) => &mut c.timeout_ms,
            Command::ListDirectory(c) => &mut c.timeout_ms,
            Command::ProcessInput(c) => &mut c.timeout_ms,
            Command::ProcessOutput(c) => &mut c.timeout_ms,
            Command::ProcessKill(c) => &mut c.timeout_ms,
            Command::ProcessList(c) => &mut c.timeout_ms,
        };
        timeout_ms.get_or_insert(ms);
    }

    /// The deadline the command itself asks for (`timeout_ms`), if any. A background
    /// start's `timeout_ms` is its process's lifetime, not the start's deadline (the start
    /// is bounded by its `yield_ms` or readiness timeout).
    pub fn requested_timeout(&self) -> Option<Duration> {
        match self {
            Command::BashExec(c) if c.background && c.session.is_none() => None,
            Command::BashExec(c) => c.timeout_ms.map(Duration::from_millis),
            Command::RequestUserInput(c) => c.timeout_ms.map(Duration::from_millis),
            Command::FileRead(c) => c.timeout_ms.map(Duration::from_millis),
            Command::FileWrite(c) => c.timeout_ms.map(Duration::from_millis),
            Command::PatchFile(c) => c.timeout_ms.map(Duration::from_millis),
            Command::ListDirectory(c) => c.timeout_ms.map(Duration::from_millis),
            Command::ProcessInput(c) => c.timeout_ms.map(Duration::from_millis),
            Command::ProcessOutput(c) => c.timeout_ms.map(Duration::from_millis),
            Command::ProcessKill(c) => c.timeout_ms.map(Duration::from_millis),
            Command::ProcessList(c) => c.timeout_ms.map(Duration::from_millis),
        }
    }
}

impl ExecutionStatus {
    /// True for `SUCCEEDED` and `FAILED`.
    pub fn is_terminal(self) -> bool {
        !matches!(self, ExecutionStatus::Running)
    }
}

/// `TryFrom<Command>` for each command struct: an executor takes its own type out of the
/// tagged enum, or gets [`ExecError::WrongCommandType`].
macro_rules! typed_command {
    ($($variant:ident => $ty:ty),* $(,)?) => {$(
        impl TryFrom<Command> for $ty {
            type Error = ExecError;

            fn try_from(command: Command) -> Result<Self, ExecError> {
                match command {
                    Command::$variant(c) => Ok(c),
                    other => Err(ExecError::WrongCommandType {
                        expected: CommandType::$variant.as_str(),
                        got: other.command_type().as_str(),
                    }),
                }
            }
        }
    )*};
}

typed_command! {
    BashExec => BashExecCommand,
    FileRead => FileReadCommand,
    FileWrite => FileWriteCommand,
    PatchFile => PatchFileCommand,
    ListDirectory => ListDirectoryCommand,
    RequestUserInput => RequestUserInputCommand,
    ProcessInput => ProcessInputCommand,
    ProcessOutput => ProcessOutputCommand,
    ProcessKill => ProcessKillCommand,
    ProcessList => ProcessListCommand,
}
