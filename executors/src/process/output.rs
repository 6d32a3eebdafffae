//! `PROCESS_OUTPUT`: a background process's output from an offset (default: where the
//! last read stopped), waiting up to `wait_ms` when there is none yet.

use std::time::Duration;

use super::{report, ProcessTable};
use crate::error::ExecError;
use crate::executor::{ExecContext, ExecFuture, Executor};
use crate::outcome::Outcome;
use crate::protocol::{Command, ProcessOutputCommand};

/// Bytes returned when `max_bytes` is not given.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024;
/// The most bytes one read returns.
pub const MAX_BYTES_LIMIT: u64 = 4 * 1024 * 1024;

/// The `PROCESS_OUTPUT` executor.
#[derive(Debug, Clone)]
pub struct ProcessOutputExec {
    table: ProcessTable,
}

impl ProcessOutputExec {
    /// Reads the processes of `table`.
    pub fn new(table: ProcessTable) -> Self {
        Self { table }
    }
}

impl Executor for ProcessOutputExec {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = ProcessOutputCommand::try_from(command)?;
            let process = self.table.get(&ctx.scope, &cmd.process_id)?;
            let offset = cmd.offset.unwrap_or_else(|| process.read_offset());
            let max = cmd
                .max_bytes
                .unwrap_or(DEFAULT_MAX_BYTES)
                .clamp(1, MAX_BYTES_LIMIT);
            if let Some(wait) = cmd.wait_ms.filter(|ms| *ms > 0) {
                let wait = Duration::from_millis(wait);
                tokio::select! {
                    _ = process.log.wait_beyond(offset, wait) => {}
                    () = ctx.cancel.cancelled() => return Err(ExecError::Cancelled),
                }
            }
            let slice = process
                .log
                .read(offset, usize::try_from(max).unwrap_or(usize::MAX));
            process.set_read_offset(slice.next_offset);
            let state = process.state();
            let outcome = Outcome::succeeded(format!(
                "{} bytes of output of {} from offset {} ({}).{}",
                slice.next_offset - slice.offset,
                process.id,
                slice.offset,
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
