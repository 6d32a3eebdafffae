//! MCP over stdio (`cmdr mcp`): JSON-RPC messages, one per line, on stdin and stdout.
//! Stdout carries only the protocol (logs go to stderr).

use std::time::Duration;

use rmcp::service::ServerInitializeError;
use rmcp::transport::io::stdio_pipes;
use rmcp::ServiceExt;

use super::tools::CmdrMcp;
use crate::server::AppState;

/// How long stopped runs get to persist their `stopped` turns once the client hung up.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How long a session that is over (the client closed stdin, or cmdr was told to stop)
/// waits for rmcp to write its last replies: a client that stopped reading them would
/// otherwise keep the process alive for ever, its write blocked on a full stdout.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Why MCP over stdio stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// The session could not start (the handshake failed).
    #[error("MCP over stdio failed to start: {0}")]
    Start(String),
    /// The session failed while serving.
    #[error("MCP over stdio failed: {0}")]
    Serve(String),
}

/// Serves MCP on stdin/stdout until the client closes stdin (or `state.shutdown` fires);
/// runs still in progress are then stopped, and their `stopped` turns persisted, before
/// this returns.
pub async fn serve_stdio(state: AppState) -> Result<(), StdioError> {
    let shutdown = state.shutdown.clone();
    let handler = CmdrMcp::new(state);
    // Watched from the start: rmcp answers requests before `initialize` too (pings), and
    // a client that floods them unread can block its handshake just as well.
    let mut over = SessionEnd::new(&shutdown);
    let serving = handler
        .clone()
        .serve_with_ct(stdio_pipes(), shutdown.child_token());
    let Some(served) = over.bound(serving).await else {
        tracing::warn!("the MCP client does not read its replies: ended before initializing");
        return Ok(());
    };
    let running = match served {
        Ok(running) => running,
        // The client left (or we were told to stop) before initializing: nothing to do.
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            return Ok(())
        }
        Err(e) => return Err(StdioError::Start(e.to_string())),
    };
    let quit = over.bound(running.waiting()).await;
    handler.stop_calls(STOP_GRACE).await;
    // The connection was the session: its processes go with it.
    handler.end_session().await;
    match quit {
        Some(Ok(reason)) => {
            tracing::debug!(?reason, "MCP stdio session ended");
            Ok(())
        }
        Some(Err(e)) => Err(StdioError::Serve(e.to_string())),
        None => {
            tracing::warn!("the MCP client does not read its replies: ending without them");
            Ok(())
        }
    }
}

/// The end of a stdio session: cmdr was told to stop, or the client closed its end of
/// stdin (whether or not rmcp has read all it sent before). Once it has come, whatever
/// the session still waits for gets [`DRAIN_GRACE`] from that moment, then is given up.
struct SessionEnd {
    over: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    deadline: Option<tokio::time::Instant>,
}

impl SessionEnd {
    fn new(shutdown: &tokio_util::sync::CancellationToken) -> Self {
        let shutdown = shutdown.clone();
        Self {
            over: Box::pin(async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = stdin_hung_up() => {}
                }
            }),
            deadline: None,
        }
    }

    /// `work`'s output, or `None` when the session ended and `work` did not finish
    /// within the grace.
    async fn bound<T>(&mut self, work: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::pin!(work);
        if self.deadline.is_none() {
            tokio::select! {
                done = &mut work => return Some(done),
                () = &mut self.over => {
                    self.deadline = Some(tokio::time::Instant::now() + DRAIN_GRACE);
                }
            }
        }
        let deadline = self.deadline?;
        tokio::time::timeout_at(deadline, work).await.ok()
    }
}

/// Resolves when stdin's writer has hung up, seen by `poll` without reading anything (on
/// a thread of its own, not the runtime's blocking pool, whose shutdown would wait for
/// it): a pipe reports `POLLHUP` once no writer is left, a socket `POLLRDHUP` once its
/// peer shut its side; nothing else is asked for, so data waiting to be read does not
/// wake it. Never resolves where stdin cannot hang up (a file, `/dev/null`: rmcp reads
/// their end itself) or cannot be polled.
async fn stdin_hung_up() {
    let (tell, told) = tokio::sync::oneshot::channel();
    let watcher = std::thread::Builder::new()
        .name("stdin-hang-up".to_owned())
        .spawn(move || {
            let _ = tell.send(poll_stdin_hang_up());
        });
    if watcher.is_err() || !matches!(told.await, Ok(true)) {
        std::future::pending::<()>().await;
    }
}

/// Blocks until stdin hangs up (true), or `poll` fails (false).
fn poll_stdin_hang_up() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    // Linux's peer-shutdown flag, which nix does not name.
    let rdhup = PollFlags::from_bits_retain(nix::libc::POLLRDHUP);
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), rdhup)];
    let ended = PollFlags::POLLHUP | PollFlags::POLLERR | rdhup;
    loop {
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => return fds[0].revents().is_some_and(|r| r.intersects(ended)),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}
