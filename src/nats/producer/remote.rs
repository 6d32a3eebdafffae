//! [`RemoteExecutor`]: an executor that runs commands on the worker pool.
//!
//! Registered in a local [`Registry`] in place of the local
//! executors, it submits each command over NATS, relays the remote `RUNNING` messages
//! through the local stream, and ends with the remote terminal result — so the agent loop,
//! HTTP and MCP run commands on the pool without knowing where they run. Cancelling the
//! local command (or dropping its stream) cancels the remote one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use cmdr_executors::ErrorCode;
use cmdr_executors::{
    ActorConfig, Command, CommandType, ExecContext, ExecFuture, ExecutionStatus, Executor, Outcome,
    OutputResult, ProcessStatus, Registry, Scope, ScopeEnder, DEFAULT_MAX_CONCURRENT,
    WAITING_ACTOR_LIMIT,
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

    /// A registry whose every command type runs on the worker pool, at most
    /// [`DEFAULT_MAX_CONCURRENT`] commands of a type in flight at once.
    pub fn registry(producer: Producer) -> Registry {
        Self::registry_with_limit(producer, DEFAULT_MAX_CONCURRENT)
    }

    /// Like [`RemoteExecutor::registry`], with at most `max_concurrent` commands of a type
    /// in flight (`REQUEST_USER_INPUT` and the process commands, which mostly wait:
    /// [`WAITING_ACTOR_LIMIT`]); further ones are queued here, and told so.
    pub fn registry_with_limit(producer: Producer, max_concurrent: usize) -> Registry {
        let registry = Registry::new();
        for command_type in CommandType::ALL {
            let max_concurrent = if mostly_waits(command_type) {
                WAITING_ACTOR_LIMIT
            } else {
                max_concurrent
            };
            let config = ActorConfig {
                max_concurrent,
                ..ActorConfig::default()
            };
            registry.register_with(command_type, RemoteExecutor::new(producer.clone()), config);
        }
        registry.set_scope_ender(Arc::new(RemoteScopes(producer)));
        registry
    }
}

/// Ends a front door's scope on the workers too (an MCP session that ends, a conversation
/// archived): its processes and sessions there live in the same client scope.
struct RemoteScopes(Producer);

impl ScopeEnder for RemoteScopes {
    fn end_scope(&self, scope: Scope) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let producer = self.0.clone();
        Box::pin(async move {
            if let Err(e) = producer.end_scope(scope.as_str()).await {
                tracing::warn!(%scope, "ending a scope on the workers: {e}");
            }
        })
    }
}

impl Executor for RemoteExecutor {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let mut remote = match self.producer.submit_in(ctx.scope.as_str(), command).await {
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
                ctx.output.forward(result).await?;
            }
        })
    }
}

/// Whether commands of this type mostly wait (on people, on output) rather than work.
fn mostly_waits(command_type: CommandType) -> bool {
    matches!(
        command_type,
        CommandType::RequestUserInput
            | CommandType::ProcessInput
            | CommandType::ProcessOutput
            | CommandType::ProcessKill
            | CommandType::ProcessList
    )
}

/// The local outcome for the remote terminal result (everything but the id, type and
/// duration, which the local runtime sets), its process fields included.
fn outcome_of(result: OutputResult) -> Outcome {
    let mut outcome = match result.status {
        ExecutionStatus::Succeeded => Outcome::succeeded(result.message),
        _ => Outcome::failed(result.message, result.error),
    };
    outcome.result_data = result.result_data;
    outcome.error_code = result.error_code;
    outcome.exit_code = result.exit_code;
    outcome.final_cwd = result.final_cwd;
    outcome.process = result.process_id.map(|process_id| ProcessStatus {
        process_id,
        state: match result.process_state.as_deref() {
            Some("running") => "running",
            _ => "exited",
        },
        next_offset: result.next_offset,
        truncated_before: result.truncated_before,
        output_bytes: result.output_bytes,
        exited_at: result.exited_at,
        signal: result.signal,
    });
    outcome
}
