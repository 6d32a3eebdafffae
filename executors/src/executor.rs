//! The [`Executor`] trait: what a command type's implementation provides, and the
//! [`ExecContext`] the runtime hands it.
//!
//! An executor only ever sends `RUNNING` messages (through [`OutputSink`]); the terminal
//! message is built by the runtime from what [`Executor::execute`] returns, so no
//! executor can forget it or send it twice.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::ExecError;
use crate::outcome::Outcome;
use crate::protocol::{Command, CommandType, ExecutionStatus, OutputResult};
use crate::scope::Scope;

/// The future an executor returns.
pub type ExecFuture<'a> = Pin<Box<dyn Future<Output = Result<Outcome, ExecError>> + Send + 'a>>;

/// Runs commands of one type. Implementations must be cheap to share: one instance serves
/// every command its actor runs, concurrently.
pub trait Executor: Send + Sync + 'static {
    /// Runs one command to its end.
    ///
    /// Stream output with `ctx.output`; stop promptly (killing whatever was started) when
    /// `ctx.cancel` fires; return the end of the command. Timeouts, cancellation reasons,
    /// panics and the terminal message are the runtime's business.
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_>;
}

/// Ends a scope's processes where they live, for a registry whose executors run them
/// elsewhere (a NATS producer's registry: the processes live on the workers). Set with
/// [`crate::Registry::set_scope_ender`]; [`crate::Registry::end_scope`] calls it after
/// ending the scope's local processes.
pub trait ScopeEnder: Send + Sync + 'static {
    /// Ends `scope` wherever its processes run; resolves once they are gone (or the
    /// ender gave up: it never fails the caller).
    fn end_scope(&self, scope: Scope) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>>;
}

/// What the runtime gives an executor for one command.
#[derive(Debug)]
pub struct ExecContext {
    /// The command's id.
    pub command_id: String,
    /// Where `RUNNING` messages go.
    pub output: OutputSink,
    /// Fires when the command must stop (cancel, timeout, shutdown, reader gone).
    pub cancel: CancellationToken,
    /// The scope it runs in: the processes it starts belong to it, and it sees only the
    /// processes of this scope.
    pub scope: Scope,
}

/// Sends `RUNNING` messages of one command. Sending waits while the reader is behind
/// (back-pressure); it fails once the reader is gone.
#[derive(Debug, Clone)]
pub struct OutputSink {
    tx: mpsc::Sender<OutputResult>,
    command_id: Arc<str>,
    command_type: CommandType,
}

impl OutputSink {
    pub(crate) fn new(
        tx: mpsc::Sender<OutputResult>,
        command_id: Arc<str>,
        command_type: CommandType,
    ) -> Self {
        Self {
            tx,
            command_id,
            command_type,
        }
    }

    /// Sends a `RUNNING` message with `message` and a chunk of `data`.
    pub async fn send(&self, message: &str, data: String) -> Result<(), ExecError> {
        let msg = self.running(message, data);
        self.tx.send(msg).await.map_err(|_| ExecError::ReceiverGone)
    }

    /// Like [`OutputSink::send`], from a blocking thread (never from async code).
    pub fn blocking_send(&self, message: &str, data: String) -> Result<(), ExecError> {
        let msg = self.running(message, data);
        self.tx
            .blocking_send(msg)
            .map_err(|_| ExecError::ReceiverGone)
    }

    /// Relays a `RUNNING` message that came from elsewhere (a worker's), notes included
    /// (`queue`), as this command's.
    pub async fn forward(&self, mut message: OutputResult) -> Result<(), ExecError> {
        message.command_id = self.command_id.to_string();
        message.command_type = self.command_type.as_str().to_owned();
        message.status = ExecutionStatus::Running;
        self.tx
            .send(message)
            .await
            .map_err(|_| ExecError::ReceiverGone)
    }

    /// Sends a `RUNNING` message only if the reader has room; drops it otherwise.
    pub fn try_send(&self, message: &str, data: String) {
        let _ = self.tx.try_send(self.running(message, data));
    }

    fn running(&self, message: &str, data: String) -> OutputResult {
        running_result(
            &self.command_id,
            self.command_type,
            message.to_owned(),
            data,
        )
    }
}

/// A `RUNNING` message of command `command_id` carrying `message` and a chunk of `data`.
pub(crate) fn running_result(
    command_id: &str,
    command_type: CommandType,
    message: String,
    data: String,
) -> OutputResult {
    OutputResult {
        command_id: command_id.to_owned(),
        command_type: command_type.as_str().to_owned(),
        status: ExecutionStatus::Running,
        message,
        result_data: data,
        ..Default::default()
    }
}

/// An executor made from an async closure — handy for tests, benchmarks and small custom
/// executors.
pub struct FnExecutor<F>(pub F);

impl<F, Fut> Executor for FnExecutor<F>
where
    F: Fn(Command, ExecContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, ExecError>> + Send + 'static,
{
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin((self.0)(command, ctx))
    }
}

/// Runs blocking file-system work on tokio's blocking pool; a panic there becomes
/// [`ExecError::Panicked`] like any executor panic.
pub(crate) async fn run_blocking<T, F>(work: F) -> Result<T, ExecError>
where
    F: FnOnce() -> Result<T, ExecError> + Send + 'static,
    T: Send + 'static,
{
    // Registered while its thread runs: `files::watch` tells whether it outlived us.
    let (running, _waiting) = crate::files::watch::start();
    let work = move || {
        let _running = running;
        work()
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".to_owned());
            Err(ExecError::Panicked(text))
        }
        Err(_) => Err(ExecError::Lost),
    }
}
