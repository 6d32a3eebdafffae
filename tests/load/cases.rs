//! One command of each type with its expected result: the fixture files it needs are
//! made in a folder, and [`Case::check`] verifies a command's whole result stream (one
//! terminal, last, the right content, the right file on disk).

use std::path::{Path, PathBuf};

use cmdr_executors::{decode_command, Command, ExecutionStatus, OutputResult};
use serde_json::{json, Value};

/// The command types, in the order the load tests cycle through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `BASH_EXEC` `echo`.
    Bash,
    /// `FILE_READ` of a prepared file.
    Read,
    /// `FILE_WRITE` of a new file.
    Write,
    /// `PATCH_FILE` of a prepared file.
    Patch,
    /// `LIST_DIRECTORY` of a prepared folder.
    List,
    /// `REQUEST_USER_INPUT`, answered with [`Case::answer`].
    Input,
}

/// Every kind, in cycling order.
pub const KINDS: [Kind; 6] = [
    Kind::Bash,
    Kind::Read,
    Kind::Write,
    Kind::Patch,
    Kind::List,
    Kind::Input,
];

/// A command and what its results must be.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its `command_id` (also names its files).
    pub id: String,
    /// Its type.
    pub kind: Kind,
    /// The command as JSON.
    pub json: Value,
    /// The file it reads, writes or patches, or the folder it lists.
    path: PathBuf,
}

impl Case {
    /// The case `id` of `kind`, with its fixtures made in `dir`.
    pub fn new(kind: Kind, dir: &Path, id: &str) -> Case {
        let path = dir.join(id);
        let json = match kind {
            Kind::Bash => json!({"commandType": "BASH_EXEC", "command": format!("echo {id}")}),
            Kind::Read => {
                std::fs::write(&path, read_content(id)).unwrap();
                json!({"commandType": "FILE_READ", "file_path": path})
            }
            Kind::Write => json!({
                "commandType": "FILE_WRITE", "file_path": path, "content": written_content(id)
            }),
            Kind::Patch => {
                std::fs::write(&path, format!("alpha\n{id}\nomega\n")).unwrap();
                let patch = format!("@@ -1,3 +1,3 @@\n alpha\n-{id}\n+patched {id}\n omega\n");
                json!({"commandType": "PATCH_FILE", "file_path": path, "patch": patch})
            }
            Kind::List => {
                std::fs::create_dir_all(&path).unwrap();
                std::fs::write(path.join(format!("entry-{id}")), "x").unwrap();
                json!({"commandType": "LIST_DIRECTORY", "path": path})
            }
            Kind::Input => {
                json!({"commandType": "REQUEST_USER_INPUT", "prompt": format!("question {id}")})
            }
        };
        let mut json = json;
        json["command_id"] = json!(id);
        Case {
            id: id.to_owned(),
            kind,
            json,
            path,
        }
    }

    /// The decoded command.
    pub fn command(&self) -> Command {
        decode_command(&self.json.to_string()).unwrap()
    }

    /// The answer a `REQUEST_USER_INPUT` with this id gets.
    pub fn answer(command_id: &str) -> String {
        format!("answer to {command_id}")
    }

    /// Removes the files the case made or wrote.
    pub fn remove_files(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }

    /// Checks a command's whole stream: every message is this command's, exactly one
    /// terminal and it is last, `SUCCEEDED`, the right output and the right file.
    pub fn check(&self, messages: &[OutputResult]) -> Result<(), String> {
        let terminals = messages.iter().filter(|m| m.status.is_terminal()).count();
        if terminals != 1 || !messages.last().is_some_and(|m| m.status.is_terminal()) {
            return Err(format!(
                "{}: {terminals} terminals, last not terminal",
                self.id
            ));
        }
        if let Some(other) = messages.iter().find(|m| m.command_id != self.id) {
            return Err(format!("{}: a message of {}", self.id, other.command_id));
        }
        let last = &messages[messages.len() - 1];
        if last.status != ExecutionStatus::Succeeded {
            return Err(format!("{}: {last:?}", self.id));
        }
        let data: String = messages.iter().map(|m| m.result_data.as_str()).collect();
        self.check_output(&data)
    }

    fn check_output(&self, data: &str) -> Result<(), String> {
        let id = &self.id;
        let ok = match self.kind {
            Kind::Bash => data == format!("{id}\n"),
            Kind::Read => data == read_content(id),
            Kind::Write => std::fs::read_to_string(&self.path).ok() == Some(written_content(id)),
            Kind::Patch => {
                std::fs::read_to_string(&self.path).ok()
                    == Some(format!("alpha\npatched {id}\nomega\n"))
            }
            Kind::List => data.starts_with("Listing for ") && data.contains(&format!("entry-{id}")),
            Kind::Input => data == Case::answer(id),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{id} ({:?}): wrong output {data:?}", self.kind))
        }
    }
}

fn read_content(id: &str) -> String {
    format!("first line of {id}\nsecond line of {id}\n")
}

fn written_content(id: &str) -> String {
    format!("written by {id}\n")
}
