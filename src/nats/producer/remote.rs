//! [`RemoteExecutor`]: an executor that runs commands on the worker pool.
//!
//! Registered in a local [`Registry`] in place of the local
//! executors, it submits each command over NATS, relays the remote `RUNNING` messages
//! through the local stream, and ends with the remote terminal result — so the agent loop,
//! HTTP and MCP run commands on the pool without knowing where they run. Cancelling the
//! local command (or dropping its stream) cancels the remote one.

use cmdr_executors::ErrorCode;
use cmdr_executors::{
    Command, CommandType, ExecContext, ExecFuture, ExecutionStatus, Executor, Outcome,
    OutputResult, Registry,
};
use futures_util::StreamExt;

use super::Producer;

/// Runs commands remotely through `producer`.
#[derive(Clone)]
pub struct RemoteExecutor {
    producer: Producer,
}

impl RemoteExecutor {
    /// Sends commands through `producer`.
    pub fn new(producer: Producer) -> Self {
        Self { producer }
    }

    /// A registry whose every command type runs on the worker pool.
    pub fn registry(producer: Producer) -> Registry {
        let registry = Registry::new();
        for command_type in CommandType::ALL {
            registry.register(command_type, RemoteExecutor::new(producer.clone()));
        }
        registry
    }
}

impl Executor for RemoteExecutor {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let mut remote = match self.producer.submit(command).await {
                Ok(stream) => stream,
                Err(e) => {
                    return Ok(Outcome::failed(
                        "Command could not be sent to a worker.",
                        e.to_string(),
                    )
                    .with_error_code(e.code()))
                }
            };
            let mut cancel_sent = false;
            loop {
                let next = tokio::select! {
                    next = remote.next() => next,
                    _ = ctx.cancel.cancelled(), if !cancel_sent => {
                        cancel_sent = true;
                        if let Err(e) = self.producer.cancel(&ctx.command_id).await {
                            tracing::warn!(command_id = %ctx.command_id, "forwarding a cancel: {e}");
                        }
                        continue;
                    }
                };
                let Some(result) = next else {
                    return Ok(Outcome::failed(
                        "Lost the remote command.",
                        "the result stream ended early",
                    )
                    .with_error_code(ErrorCode::ExecutorLost));
                };
                if result.status.is_terminal() {
                    return Ok(outcome_of(result));
                }
                ctx.output.send(&result.message, result.result_data).await?;
            }
        })
    }
}

/// The local outcome for the remote terminal result (everything but the id, type and
/// duration, which the local runtime sets).
fn outcome_of(result: OutputResult) -> Outcome {
    let mut outcome = match result.status {
        ExecutionStatus::Succeeded => Outcome::succeeded(result.message),
        _ => Outcome::failed(result.message, result.error),
    };
    outcome.result_data = result.result_data;
    outcome.error_code = result.error_code;
    outcome.exit_code = result.exit_code;
    outcome.final_cwd = result.final_cwd;
    outcome
}
