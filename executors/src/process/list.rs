//! `PROCESS_LIST`: the background processes of the command's scope, as a JSON array in `resultData`:
//! `[{processId, command, pid, state, startedAt, exitCode?, exitedAt?, signal?, errorCode?,
//! expiresAt?, outputBytes, tty}]`.

use serde::Serialize;

use super::ProcessTable;
use crate::executor::{ExecContext, ExecFuture, Executor};
use crate::outcome::Outcome;
use crate::protocol::{Command, ProcessListCommand};

/// One entry of the list.
#[derive(Debug, Serialize)]
struct Entry<'a> {
    #[serde(rename = "processId")]
    process_id: &'a str,
    command: &'a str,
    pid: Option<u32>,
    state: &'static str,
    #[serde(rename = "startedAt")]
    started_at: String,
    #[serde(rename = "exitCode", skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(rename = "exitedAt", skip_serializing_if = "Option::is_none")]
    exited_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<String>,
    #[serde(rename = "errorCode", skip_serializing_if = "Option::is_none")]
    error_code: Option<&'static str>,
    #[serde(rename = "expiresAt", skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(rename = "outputBytes")]
    output_bytes: u64,
    tty: bool,
}

/// The `PROCESS_LIST` executor.
#[derive(Debug, Clone)]
pub struct ProcessListExec {
    table: ProcessTable,
}

impl ProcessListExec {
    /// Lists the processes of `table`.
    pub fn new(table: ProcessTable) -> Self {
        Self { table }
    }
}

impl Executor for ProcessListExec {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            ProcessListCommand::try_from(command)?;
            let processes = self.table.list(&ctx.scope);
            let entries: Vec<Entry<'_>> = processes
                .iter()
                .map(|p| {
                    let state = p.state();
                    Entry {
                        process_id: &p.id,
                        command: &p.command,
                        pid: p.pid,
                        state: state.name(),
                        started_at: super::timestamp(p.started_at),
                        exit_code: state.exit_code(),
                        exited_at: p.exited_at().map(super::timestamp),
                        signal: state.signal_name(),
                        error_code: state
                            .timed_out()
                            .then(|| crate::ErrorCode::Timeout.as_str()),
                        expires_at: p.expires_at().map(super::timestamp),
                        output_bytes: p.log.end(),
                        tty: p.terminal().is_some(),
                    }
                })
                .collect();
            let running = entries.iter().filter(|e| e.state == "running").count();
            let json = serde_json::to_string(&entries)
                .map_err(|e| crate::error::ExecError::InvalidInput(e.to_string()))?;
            Ok(
                Outcome::succeeded(format!("{} processes ({running} running).", entries.len()))
                    .with_data(json),
            )
        })
    }
}
