//! The shared loop of `cmdr exec` and `cmdr submit`: read commands (JSON Lines or
//! pretty-printed objects) from a file, stdin or one argument, start each through a
//! [`Submitter`] (the local registry, or NATS), print every result as a JSON line.
//!
//! Commands start as they are read; `--jobs N` runs up to N at once (1, the default: each
//! starts after the previous one's terminal result); a `process_id` naming the
//! `command_id` of an earlier `BASH_EXEC` stands for the process it started, and its line
//! waits for that command ([`super::process_refs`]);
//! messages of one command are printed in order; `--combine` prints one result per
//! command. A malformed line yields a `FAILED` result and the rest still run.
//!
//! **Interrupted** (SIGINT, SIGTERM): no further command is read or started; every command
//! that had started is cancelled and still ends with its terminal line — `FAILED`
//! `CANCELLED`, its `error` starting with `interrupted` (with `--combine`: one such line per
//! command carrying the data received so far) — then the exit status is 130. A command
//! whose terminal does not come within [`INTERRUPT_GRACE`] gets one made here. A second
//! signal stops waiting at once. Commands not yet started are not run and print nothing.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use cmdr_executors::ErrorCode;
use cmdr_executors::{
    combine_output_results_limited, DecodeFailure, ExecutionStatus, OutputResult,
};
use futures_core::Stream;
use futures_util::StreamExt;
use std::io::Write;

use tokio::io::{AsyncBufRead, BufReader};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::process_refs::{ProcessRefs, Tracker};
use super::stdout::Stdout;
use super::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE};
use crate::json_lines::{JsonLines, Piece};

/// Lines buffered for stdout before commands wait for the terminal/pipe.
const OUTPUT_QUEUE: usize = 256;

/// Bytes of stdout gathered before a write: small lines share one `write`; an output chunk
/// (longer) is written as soon as it is encoded.
const STDOUT_BUFFER: usize = 32 * 1024;

/// Bytes the printer writes from the runtime before it moves to a thread of its own (see
/// [`spawn_printer`]): more than most commands print, less than one read of a large
/// output.
const INLINE_OUTPUT: usize = 64 * 1024;

/// How long an interrupted run waits for a cancelled command's own terminal result (a
/// shell gets SIGTERM, then SIGKILL 2 s later).
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// The results of one started command.
pub trait CommandStream: Stream<Item = OutputResult> + Unpin + Send + 'static {
    /// The command's id.
    fn command_id(&self) -> String;
    /// The command's type, as its results name it.
    fn command_type(&self) -> String;
    /// Asks the command to stop; its terminal result follows.
    fn cancel(&self);
}

/// Starts a command given as JSON text; never fails (a refusal is a one-result stream).
pub trait Submitter: Clone + Send + Sync + 'static {
    /// The results of one command.
    type Stream: CommandStream;

    /// Starts the command.
    fn submit(&self, json: String) -> impl Future<Output = Self::Stream> + Send;

    /// Stops whatever still runs (SIGINT/SIGTERM).
    fn interrupt(&self) -> impl Future<Output = ()> + Send;
}

/// How to run.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// One combined result per command.
    pub combine: bool,
    /// Commands at once.
    pub jobs: u32,
    /// Bytes a combined result keeps (`usize::MAX`: all).
    pub max_output: usize,
}

/// Runs every command of `input` through `submitter`; returns the exit status.
pub async fn run<S: Submitter>(
    input: Option<&str>,
    submitter: S,
    options: RunOptions,
    who: &str,
) -> u8 {
    let input = match open_input(input).await {
        Ok(input) => input,
        Err(message) => {
            eprintln!("cmdr {who}: {message}");
            return EXIT_USAGE;
        }
    };
    let (lines, printer) = spawn_printer();
    let all_ok = Arc::new(AtomicBool::new(true));
    let interrupt = CancellationToken::new();
    let interrupted = {
        let run = run_all(input, &submitter, &lines, &all_ok, options, &interrupt);
        tokio::pin!(run);
        let interrupted = tokio::select! {
            () = &mut run => false,
            () = super::shutdown_signal() => true,
        };
        if interrupted {
            // Every started command is cancelled and prints its terminal; a second signal
            // gives up waiting.
            interrupt.cancel();
            tokio::select! {
                () = &mut run => {}
                () = super::shutdown_signal() => {}
            }
        }
        interrupted
    };
    if interrupted {
        submitter.interrupt().await;
    }
    drop(lines);
    let printed = printer.await.unwrap_or(false);
    if interrupted {
        EXIT_INTERRUPTED
    } else if all_ok.load(Ordering::Acquire) && printed {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

/// Where commands come from.
enum Input {
    Literal(String),
    Stream(Box<dyn AsyncBufRead + Unpin + Send>),
}

async fn open_input(arg: Option<&str>) -> Result<Input, String> {
    match arg {
        None | Some("-") => Ok(Input::Stream(Box::new(BufReader::new(tokio::io::stdin())))),
        Some(text) if text.trim_start().starts_with('{') => Ok(Input::Literal(text.to_owned())),
        Some(path) => {
            let path = PathBuf::from(path);
            let file = tokio::fs::File::open(&path)
                .await
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Ok(Input::Stream(Box::new(BufReader::new(file))))
        }
    }
}

/// Reads every command and runs it, `--jobs` at a time, until the input ends or
/// `interrupt` fires; then waits for the started ones.
async fn run_all<S: Submitter>(
    input: Input,
    submitter: &S,
    lines: &mpsc::Sender<OutputResult>,
    all_ok: &Arc<AtomicBool>,
    options: RunOptions,
    interrupt: &CancellationToken,
) {
    let mut reader = match input {
        Input::Literal(text) => JsonLines::new(Box::new(std::io::Cursor::new(text.into_bytes()))
            as Box<dyn AsyncBufRead + Unpin + Send>),
        Input::Stream(stream) => JsonLines::new(stream),
    };
    let jobs = Arc::new(Semaphore::new(options.jobs.max(1) as usize));
    let refs = ProcessRefs::default();
    let mut running = JoinSet::new();
    loop {
        let next = tokio::select! {
            biased;
            () = interrupt.cancelled() => break,
            next = reader.next_piece() => next,
        };
        let text = match next {
            Ok(Some(Piece::Json(text))) => {
                // A process named by the command that started it: wait for that one.
                tokio::select! {
                    biased;
                    () = interrupt.cancelled() => break,
                    resolved = refs.resolve(&text) => resolved.unwrap_or(text),
                }
            }
            Ok(Some(Piece::NotUtf8 { line, lossy, error })) => {
                let detail = format!("line {line}: {error}");
                let failure = DecodeFailure::not_utf8(&lossy, detail);
                all_ok.store(false, Ordering::Release);
                if !print(lines, failure.to_result()).await {
                    break;
                }
                continue;
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("cmdr exec: reading commands: {e}");
                all_ok.store(false, Ordering::Release);
                break;
            }
        };
        let permit = tokio::select! {
            biased;
            () = interrupt.cancelled() => break,
            permit = jobs.clone().acquire_owned() => permit,
        };
        let Ok(permit) = permit else {
            break;
        };
        if lines.is_closed() {
            // stdout is gone: nobody can see further results.
            all_ok.store(false, Ordering::Release);
            break;
        }
        let stream = tokio::select! {
            biased;
            () = interrupt.cancelled() => break,
            stream = submitter.submit(text) => stream,
        };
        let tracker = refs.track(&stream.command_id(), &stream.command_type());
        let (lines, all_ok) = (lines.clone(), all_ok.clone());
        let interrupt = interrupt.clone();
        running.spawn(async move {
            let ok = forward(stream, &lines, options, &interrupt, tracker).await;
            if !ok {
                all_ok.store(false, Ordering::Release);
            }
            drop(permit);
        });
    }
    while running.join_next().await.is_some() {}
}

/// Prints a command's results; true when it succeeded.
async fn forward(
    stream: impl CommandStream,
    lines: &mpsc::Sender<OutputResult>,
    options: RunOptions,
    interrupt: &CancellationToken,
    tracker: Option<Tracker>,
) -> bool {
    let result = if options.combine {
        combined(stream, interrupt, options.max_output).await
    } else {
        match each(stream, lines, interrupt).await {
            Some(last) => last,
            None => return false,
        }
    };
    let ok = result.status == ExecutionStatus::Succeeded;
    // Queued for printing before the tracker lets the line that waited on it go on, so that
    // line prints after it.
    let process_id = result.process_id.clone();
    let printed = print(lines, result).await;
    if let Some(tracker) = tracker {
        tracker.finish(process_id);
    }
    printed && ok
}

/// The combined result. On interruption the command is cancelled and combined to its end,
/// so the result carries all the output it produced.
async fn combined(
    stream: impl CommandStream,
    interrupt: &CancellationToken,
    limit: usize,
) -> OutputResult {
    let mut stream = Interruptible::new(stream, interrupt);
    let mut result = combine_output_results_limited(&mut stream, None, limit).await;
    if stream.interrupted() {
        if result.command_id.is_empty() {
            result.command_id = stream.inner.command_id();
            result.command_type = stream.inner.command_type();
        }
        if result.error_code.as_deref() == Some(ErrorCode::IncompleteStream.as_str()) {
            let lost = lost(&stream.inner, true);
            (result.error, result.error_code) = (lost.error, lost.error_code);
        }
        mark_interrupted(&mut result);
    }
    result
}

/// Prints every message but the terminal one, which it returns (`None`: stdout failed).
async fn each(
    stream: impl CommandStream,
    lines: &mpsc::Sender<OutputResult>,
    interrupt: &CancellationToken,
) -> Option<OutputResult> {
    let mut stream = Interruptible::new(stream, interrupt);
    while let Some(mut message) = stream.next().await {
        if message.status.is_terminal() {
            if stream.interrupted() {
                mark_interrupted(&mut message);
            }
            return Some(message);
        }
        if !print(lines, message).await {
            return None;
        }
    }
    Some(lost(&stream.inner, stream.interrupted()))
}

/// A command's stream that cancels the command when the run is interrupted, and ends
/// (without a terminal) if none comes within [`INTERRUPT_GRACE`] after that.
struct Interruptible<S> {
    inner: S,
    interrupt: Pin<Box<WaitForCancellationFutureOwned>>,
    give_up: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S: CommandStream> Interruptible<S> {
    fn new(inner: S, interrupt: &CancellationToken) -> Self {
        Self {
            inner,
            interrupt: Box::pin(interrupt.clone().cancelled_owned()),
            give_up: None,
        }
    }

    /// Whether the command was cancelled by the interruption.
    fn interrupted(&self) -> bool {
        self.give_up.is_some()
    }
}

impl<S: CommandStream> Stream for Interruptible<S> {
    type Item = OutputResult;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OutputResult>> {
        let this = &mut *self;
        if this.give_up.is_none() && this.interrupt.as_mut().poll(cx).is_ready() {
            this.inner.cancel();
            this.give_up = Some(Box::pin(tokio::time::sleep(INTERRUPT_GRACE)));
        }
        if let Some(give_up) = &mut this.give_up {
            if give_up.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        this.inner.poll_next_unpin(cx)
    }
}

/// The terminal of a command whose stream ended without one (or did not end in time after
/// an interruption).
fn lost(stream: &impl CommandStream, interrupted: bool) -> OutputResult {
    let (error, code): (String, ErrorCode) = if interrupted {
        (
            format!(
                "interrupted; the command did not end within {}s of being cancelled",
                INTERRUPT_GRACE.as_secs()
            ),
            ErrorCode::Cancelled,
        )
    } else {
        (
            "the stream ended without a terminal result".to_owned(),
            ErrorCode::IncompleteStream,
        )
    };
    OutputResult {
        command_id: stream.command_id(),
        command_type: stream.command_type(),
        status: ExecutionStatus::Failed,
        error,
        error_code: Some(code.into()),
        ..Default::default()
    }
}

/// Says in a failed terminal that the run was interrupted.
fn mark_interrupted(result: &mut OutputResult) {
    if result.status == ExecutionStatus::Failed && !result.error.starts_with("interrupted") {
        result.error = format!("interrupted (SIGINT/SIGTERM): {}", result.error);
    }
}

/// Queues `result` for stdout; false when stdout has failed.
async fn print(lines: &mpsc::Sender<OutputResult>, result: OutputResult) -> bool {
    lines.send(result).await.is_ok()
}

/// One printer owns stdout: results are encoded into one reused buffer, written in the
/// order received, and flushed whenever the queue runs dry or the buffer is full. Resolves
/// to false if stdout failed (e.g. a closed pipe).
///
/// It starts on the runtime, writing through [`Stdout`] (which never blocks it), so a run
/// whose output is small — most commands an agent runs — starts no thread for it. Past
/// [`INLINE_OUTPUT`] bytes it moves to a thread of its own, where a chunk's JSON escaping
/// overlaps the reading of the next one; that thread is also where stdout goes when
/// [`Stdout`] has no way to write it without blocking.
///
/// A plain blocking thread, not `tokio::io::stdout()`: tokio's stdout hands every write to
/// a blocking-pool thread and waits for it (two thread wake-ups per line), which cost more
/// than the writing itself on large output (BENCHMARKS.md, issue 19).
fn spawn_printer() -> (mpsc::Sender<OutputResult>, tokio::task::JoinHandle<bool>) {
    let (tx, rx) = mpsc::channel::<OutputResult>(OUTPUT_QUEUE);
    let task = match Stdout::open() {
        Some(stdout) => tokio::spawn(print_inline(rx, stdout)),
        None => tokio::task::spawn_blocking(move || print_blocking(rx, Vec::new())),
    };
    (tx, task)
}

/// The printer on the runtime, until the output outgrows [`INLINE_OUTPUT`].
async fn print_inline(mut rx: mpsc::Receiver<OutputResult>, stdout: Stdout) -> bool {
    let mut buf = Vec::new();
    let mut written = 0;
    while let Some(mut result) = rx.recv().await {
        if !encode_line(&mut result, &mut buf) {
            return false;
        }
        if written + buf.len() > INLINE_OUTPUT {
            let thread = tokio::task::spawn_blocking(move || print_blocking(rx, buf));
            return thread.await.unwrap_or(false);
        }
        if buf.len() < STDOUT_BUFFER && !rx.is_empty() {
            continue;
        }
        if let Err(e) = stdout.write_all(&buf).await {
            // Usually a closed pipe (`cmdr exec … | head`): not worth a warning.
            tracing::debug!("writing results to stdout: {e}");
            return false;
        }
        written += buf.len();
        buf.clear();
    }
    true
}

/// The printer on a thread of its own; `buf` holds lines encoded but not yet written.
fn print_blocking(mut rx: mpsc::Receiver<OutputResult>, mut buf: Vec<u8>) -> bool {
    // Not locked for the whole run: a stray `println!` elsewhere must not deadlock.
    let mut out = std::io::stdout();
    buf.reserve(STDOUT_BUFFER);
    loop {
        if !buf.is_empty() && (buf.len() >= STDOUT_BUFFER || rx.is_empty()) {
            let written = out.write_all(&buf).and_then(|()| out.flush());
            buf.clear();
            if let Err(e) = written {
                // Usually a closed pipe (`cmdr exec … | head`): not worth a warning.
                tracing::debug!("writing results to stdout: {e}");
                return false;
            }
        }
        let Some(mut result) = rx.blocking_recv() else {
            return true;
        };
        if !encode_line(&mut result, &mut buf) {
            return false;
        }
    }
}

/// Appends `result` as one JSON line; false (logged) if it could not be encoded.
fn encode_line(result: &mut OutputResult, buf: &mut Vec<u8>) -> bool {
    if let Err(e) = crate::result_line::encode(result, buf) {
        tracing::error!("encoding a result: {e}");
        return false;
    }
    buf.push(b'\n');
    true
}
