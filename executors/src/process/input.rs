//! `PROCESS_INPUT`: write to a background process's stdin (or type on its terminal, which
//! `cols`/`rows` resize first), then return the output that follows within `yield_ms`.

use std::time::Duration;

use super::{report, Process, ProcessState, ProcessTable, TermSize};
use crate::error::ExecError;
use crate::executor::{ExecContext, ExecFuture, Executor};
use crate::outcome::Outcome;
use crate::protocol::{Command, ProcessInputCommand};

/// How long the output after the input is collected by default.
pub const DEFAULT_INPUT_YIELD: Duration = Duration::from_millis(1000);
/// The most output returned with an input.
const MAX_REPLY: usize = 64 * 1024;

/// The `PROCESS_INPUT` executor.
#[derive(Debug, Clone)]
pub struct ProcessInputExec {
    table: ProcessTable,
}

impl ProcessInputExec {
    /// Writes to the processes of `table`.
    pub fn new(table: ProcessTable) -> Self {
        Self { table }
    }
}

impl Executor for ProcessInputExec {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = ProcessInputCommand::try_from(command)?;
            let resizing = cmd.cols.is_some() || cmd.rows.is_some();
            if cmd.input.is_empty() && !cmd.close_stdin && !resizing {
                return Err(ExecError::InvalidInput(
                    "input is empty (send text, close_stdin: true, or cols/rows for a tty)"
                        .to_owned(),
                ));
            }
            if cmd.cols == Some(0) || cmd.rows == Some(0) {
                return Err(ExecError::InvalidInput(
                    "cols and rows must be at least 1".to_owned(),
                ));
            }
            let process = self.table.get(&ctx.scope, &cmd.process_id)?;
            if let Some(name) = process.session() {
                return Err(ExecError::InvalidInput(format!(
                    "{} is the shell of session '{name}': run commands in it with BASH_EXEC and session",
                    process.id
                )));
            }
            let from = process.log.end();
            let resized = if resizing {
                Some(resize(&process, cmd.cols, cmd.rows)?)
            } else {
                None
            };
            let yield_for = cmd
                .yield_ms
                .map_or(DEFAULT_INPUT_YIELD, Duration::from_millis);
            if !cmd.input.is_empty() || cmd.close_stdin {
                // A process that stops reading fails the write after `yield_ms` without
                // progress, rather than holding its input (and this command) for ever.
                let write =
                    process.write_input_within(cmd.input.as_bytes(), cmd.close_stdin, yield_for);
                tokio::select! {
                    written = write => written?,
                    () = ctx.cancel.cancelled() => return Err(ExecError::Cancelled),
                }
            }
            let deadline = tokio::time::Instant::now() + yield_for;
            // Collect until the yield is over or the process has exited.
            while !process.log.is_closed() {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                let end = process.log.end();
                tokio::select! {
                    _ = process.log.wait_beyond(end, left) => {}
                    () = ctx.cancel.cancelled() => return Err(ExecError::Cancelled),
                }
            }
            let slice = process.log.read(from, MAX_REPLY);
            process.set_read_offset(slice.next_offset);
            let state = process.state();
            let ended = match (cmd.close_stdin, process.terminal().is_some()) {
                (false, _) => "",
                (true, false) => " and closed its stdin",
                (true, true) => " and typed end-of-file (^D)",
            };
            let resized = resized.map_or_else(String::new, |size| {
                format!(", terminal resized to {}x{}", size.cols, size.rows)
            });
            let outcome = Outcome::succeeded(format!(
                "Wrote {} bytes to {}{ended}{resized} ({}).{}",
                cmd.input.len(),
                process.id,
                state.describe(),
                super::rest_note(&process, slice.next_offset)
            ))
            .with_data(slice.text);
            Ok(report(
                outcome,
                &process,
                state,
                slice.next_offset,
                slice.truncated_before,
            ))
        })
    }
}

/// Resizes the terminal of `process` (a size not given stays); the new size.
fn resize(process: &Process, cols: Option<u16>, rows: Option<u16>) -> Result<TermSize, ExecError> {
    let Some(pty) = process.terminal() else {
        return Err(ExecError::InvalidInput(format!(
            "cols and rows resize a terminal: {} was not started with tty: true",
            process.id
        )));
    };
    if process.state() != ProcessState::Running {
        return Err(ExecError::ProcessExited {
            id: process.id.clone(),
            code: process.state().exit_code(),
        });
    }
    let now = pty.size().unwrap_or_default();
    let size = TermSize {
        cols: cols.unwrap_or(now.cols),
        rows: rows.unwrap_or(now.rows),
    };
    pty.resize(size)
        .map_err(|e| ExecError::InvalidInput(format!("cannot resize {}: {e}", process.id)))?;
    Ok(size)
}
