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
