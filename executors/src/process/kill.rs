//! `PROCESS_KILL`: stop a background process and its whole tree (the signal, then
//! SIGKILL after `grace_ms`); ends once it is gone.

use std::time::Duration;

use nix::sys::signal::Signal;

use super::{report, KillSignal, ProcessState, ProcessTable};
use crate::error::ExecError;
use crate::executor::{ExecContext, ExecFuture, Executor};
use crate::outcome::Outcome;
use crate::protocol::{Command, ProcessKillCommand};

/// Time between the signal and SIGKILL by default.
pub const DEFAULT_GRACE: Duration = Duration::from_millis(2000);

/// The `PROCESS_KILL` executor.
#[derive(Debug, Clone)]
pub struct ProcessKillExec {
    table: ProcessTable,
}

impl ProcessKillExec {
    /// Stops the processes of `table`.
    pub fn new(table: ProcessTable) -> Self {
        Self { table }
    }
}

/// The signal `name` asks for (default `TERM`; see [`KillSignal`]).
fn parse_signal(name: Option<&str>) -> Result<Signal, ExecError> {
    let signal = match name {
        None => KillSignal::default(),
        Some(name) => name
            .parse::<KillSignal>()
            .map_err(|e| ExecError::InvalidInput(e.to_string()))?,
    };
    Ok(signal.to_signal())
}

impl Executor for ProcessKillExec {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = ProcessKillCommand::try_from(command)?;
            let signal = parse_signal(cmd.signal.as_deref())?;
            let process = self.table.get(&ctx.scope, &cmd.process_id)?;
            let grace = cmd.grace_ms.map_or(DEFAULT_GRACE, Duration::from_millis);
            let was = process.state();
            if was == ProcessState::Running {
                process.kill(signal, grace).await;
            }
            let state = tokio::select! {
                state = process.wait_exit(grace + Duration::from_secs(5)) => state,
                () = ctx.cancel.cancelled() => return Err(ExecError::Cancelled),
            };
            let end = process.log.end();
            let message = match (was, state) {
                (ProcessState::Running, ProcessState::Running) => {
                    return Err(ExecError::InvalidInput(format!(
                        "process '{}' is still running after SIGKILL",
                        process.id
                    )))
                }
                (ProcessState::Running, _) => {
                    format!("Stopped {} ({}).", process.id, state.describe())
                }
                _ => format!("{} had already exited ({}).", process.id, state.describe()),
            };
            Ok(report(
                Outcome::succeeded(message),
                &process,
                state,
                end,
                None,
            ))
        })
    }
}
