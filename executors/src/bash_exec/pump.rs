//! The output pump: reads stdout and stderr concurrently, turns bytes into text, coalesces
//! small writes into chunks, and drives the stop sequence (SIGTERM, grace, SIGKILL).
//!
//! Back-pressure: a full chunk is sent (awaiting a slow reader) before the pipes are read
//! again, so a command that prints without end blocks on its own pipe while memory stays
//! bounded by one chunk plus the result channel.

use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

use super::process::Shell;
use crate::error::ExecError;
use crate::executor::ExecContext;
use crate::utf8::Utf8Decoder;

/// A chunk is sent once it holds this many bytes …
pub const FLUSH_BYTES: usize = 64 * 1024;
/// … or once its first byte is this old, so live output stays live without one message
/// per line.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(20);
/// After the shell exits, output still in flight is read for at most this long: a
/// background grandchild holding the pipes open must not hang the result.
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// Bytes per read from each pipe.
const READ_BUF: usize = 64 * 1024;
/// `message` of output chunks.
const CHUNK_MESSAGE: &str = "Command output";

/// Pumps the shell's output to `ctx.output` until it exits (or is killed) and its pipes
/// are drained; returns its exit status.
pub(super) async fn pump(
    shell: &mut Shell,
    ctx: &ExecContext,
    kill_grace: Duration,
) -> Result<ExitStatus, ExecError> {
    let mut chunk = Chunk::default();
    let (mut stdout, mut stderr) = (shell.stdout.take(), shell.stderr.take());
    let mut out_buf = Vec::with_capacity(READ_BUF);
    let mut err_buf = Vec::with_capacity(READ_BUF);
    let (mut out_text, mut err_text) = (Utf8Decoder::default(), Utf8Decoder::default());
    let mut status: Option<ExitStatus> = None;
    let mut stopping = false;
    let mut kill_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;
    while status.is_none() || stdout.is_some() || stderr.is_some() {
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf) => {
                chunk.take(n, &mut out_buf, &mut out_text, &mut stdout);
            }
            n = read_some(&mut stderr, &mut err_buf) => {
                chunk.take(n, &mut err_buf, &mut err_text, &mut stderr);
            }
            exited = shell.child.wait(), if status.is_none() => {
                let exited = exited.map_err(|e| ExecError::io("/bin/bash".as_ref(), e))?;
                shell.exited = true;
                status = Some(exited);
                if stopping {
                    shell.signal_group(Signal::SIGKILL);
                }
                drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = ctx.cancel.cancelled(), if !stopping => {
                stopping = true;
                shell.signal_group(Signal::SIGTERM);
                kill_at = Some(Instant::now() + kill_grace);
            }
            _ = sleep_until(kill_at), if status.is_none() => {
                shell.signal_group(Signal::SIGKILL);
                kill_at = None;
            }
            _ = sleep_until(chunk.due()) => chunk.flush(ctx, stopping).await?,
            _ = sleep_until(drain_until) => break,
        }
        if chunk.text.len() >= FLUSH_BYTES {
            chunk.flush(ctx, stopping).await?;
        }
    }
    out_text.finish(&mut chunk.text);
    err_text.finish(&mut chunk.text);
    chunk.flush(ctx, stopping).await?;
    status.ok_or(ExecError::Lost)
}

/// Output read but not yet sent.
#[derive(Default)]
struct Chunk {
    text: String,
    since: Option<Instant>,
}

impl Chunk {
    /// Adds what a read returned (and empties `buf`); closes the pipe on EOF or error.
    fn take<P>(
        &mut self,
        read: std::io::Result<usize>,
        buf: &mut Vec<u8>,
        decoder: &mut Utf8Decoder,
        pipe: &mut Option<P>,
    ) {
        match read {
            Ok(n) if n > 0 => {
                // A whole read usually becomes the chunk's text as it is (no copy).
                decoder.decode_from(buf, &mut self.text);
                buf.reserve(READ_BUF);
                self.since.get_or_insert_with(Instant::now);
            }
            Ok(_) => *pipe = None,
            Err(e) => {
                tracing::debug!("reading command output: {e}");
                *pipe = None;
            }
        }
    }

    fn due(&self) -> Option<Instant> {
        self.since.map(|t| t + FLUSH_INTERVAL)
    }

    /// Sends the chunk. While stopping, output is sent only if the reader has room: a
    /// cancelled command must not wait on a reader.
    async fn flush(&mut self, ctx: &ExecContext, stopping: bool) -> Result<(), ExecError> {
        self.since = None;
        if self.text.is_empty() {
            return Ok(());
        }
        let text = std::mem::take(&mut self.text);
        if stopping {
            ctx.output.try_send(CHUNK_MESSAGE, text);
            return Ok(());
        }
        tokio::select! {
            sent = ctx.output.send(CHUNK_MESSAGE, text) => sent,
            _ = ctx.cancel.cancelled() => Ok(()),
        }
    }
}

/// One read into `buf`'s spare capacity (never zero-filled); pending forever once the
/// pipe is closed. (Also the background and session actors'.)
pub(super) async fn read_some<P: AsyncRead + Unpin>(
    pipe: &mut Option<P>,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    match pipe {
        Some(p) => p.read_buf(buf).await,
        None => std::future::pending().await,
    }
}

thread_local! {
    /// The buffer [`read_with`] reads into: one per thread, not one per pipe.
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; READ_BUF].into_boxed_slice());
}

/// One read of at most 64 KiB, handed to `sink` straight from a per-thread buffer: a
/// reader holds no buffer of its own while it waits (100 idle background processes would
/// otherwise keep 100 × 2 × 64 KiB of read buffers, touched and resident). Returns the
/// bytes read (0 at end-of-file); pending forever once the pipe is closed.
pub(super) async fn read_with<P: AsyncRead + Unpin>(
    pipe: &mut Option<P>,
    mut sink: impl FnMut(&[u8]),
) -> std::io::Result<usize> {
    let Some(pipe) = pipe else {
        return std::future::pending().await;
    };
    std::future::poll_fn(|cx| {
        SCRATCH.with_borrow_mut(|buf| {
            let mut read = tokio::io::ReadBuf::new(buf);
            std::task::ready!(std::pin::Pin::new(&mut *pipe).poll_read(cx, &mut read))?;
            sink(read.filled());
            std::task::Poll::Ready(Ok(read.filled().len()))
        })
    })
    .await
}

/// Resolves at `deadline`; never without one.
pub(super) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
