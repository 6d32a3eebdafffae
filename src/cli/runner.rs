//! The shared loop of `cmdr exec` and `cmdr submit`: read commands (JSON Lines or
//! pretty-printed objects) from a file, stdin or one argument, start each through a
//! [`Submitter`] (the local registry, or NATS), print every result as a JSON line.
//!
//! Commands start as they are read; `--jobs N` runs up to N at once (1: in order);
//! messages of one command are printed in order; `--combine` prints one result per
//! command. A malformed line yields a `FAILED` result and the rest still run.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cmdr_executors::{combine_output_results, ExecutionStatus, OutputResult};
use futures_core::Stream;
use futures_util::StreamExt;
use tokio::io::{AsyncBufRead, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use super::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE};
use crate::json_lines::JsonLines;

/// Lines buffered for stdout before commands wait for the terminal/pipe.
const OUTPUT_QUEUE: usize = 256;

/// Starts a command given as JSON text; never fails (a refusal is a one-result stream).
pub trait Submitter: Clone + Send + Sync + 'static {
    /// The results of one command.
    type Stream: Stream<Item = OutputResult> + Unpin + Send + 'static;

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
    let run = run_all(input, &submitter, &lines, &all_ok, options);
    let interrupted = tokio::select! {
        () = run => false,
        () = super::shutdown_signal() => true,
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

/// Reads every command and runs it, `--jobs` at a time.
async fn run_all<S: Submitter>(
    input: Input,
    submitter: &S,
    lines: &mpsc::Sender<String>,
    all_ok: &Arc<AtomicBool>,
    options: RunOptions,
) {
    let mut reader = match input {
        Input::Literal(text) => JsonLines::new(Box::new(std::io::Cursor::new(text.into_bytes()))
            as Box<dyn AsyncBufRead + Unpin + Send>),
        Input::Stream(stream) => JsonLines::new(stream),
    };
    let jobs = Arc::new(Semaphore::new(options.jobs.max(1) as usize));
    let mut running = JoinSet::new();
    loop {
        let text = match reader.next_text().await {
            Ok(Some(text)) => text,
            Ok(None) => break,
            Err(e) => {
                eprintln!("cmdr exec: reading commands: {e}");
                all_ok.store(false, Ordering::Release);
                break;
            }
        };
        let Ok(permit) = jobs.clone().acquire_owned().await else {
            break;
        };
        if lines.is_closed() {
            // stdout is gone: nobody can see further results.
            all_ok.store(false, Ordering::Release);
            break;
        }
        let stream = submitter.submit(text).await;
        let (lines, all_ok, combine) = (lines.clone(), all_ok.clone(), options.combine);
        running.spawn(async move {
            let ok = forward(stream, &lines, combine).await;
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
    mut stream: impl Stream<Item = OutputResult> + Unpin,
    lines: &mpsc::Sender<String>,
    combine: bool,
) -> bool {
    if combine {
        let result = combine_output_results(stream, None).await;
        let ok = result.status == ExecutionStatus::Succeeded;
        return print(lines, &result).await && ok;
    }
    let mut ok = false;
    while let Some(message) = stream.next().await {
        ok = message.status == ExecutionStatus::Succeeded;
        if !print(lines, &message).await {
            return false;
        }
    }
    ok
}

async fn print(lines: &mpsc::Sender<String>, result: &OutputResult) -> bool {
    match serde_json::to_string(result) {
        Ok(line) => lines.send(line).await.is_ok(),
        Err(e) => {
            tracing::error!("encoding a result: {e}");
            false
        }
    }
}

/// One task owns stdout: lines are written in the order received and flushed whenever the
/// queue runs dry. Resolves to false if stdout failed (e.g. a closed pipe).
fn spawn_printer() -> (mpsc::Sender<String>, tokio::task::JoinHandle<bool>) {
    let (tx, mut rx) = mpsc::channel::<String>(OUTPUT_QUEUE);
    let task = tokio::spawn(async move {
        let mut out = tokio::io::BufWriter::new(tokio::io::stdout());
        while let Some(line) = rx.recv().await {
            let written = async {
                out.write_all(line.as_bytes()).await?;
                out.write_all(b"\n").await?;
                if rx.is_empty() {
                    out.flush().await?;
                }
                std::io::Result::Ok(())
            };
            if let Err(e) = written.await {
                // Usually a closed pipe (`cmdr exec … | head`): not worth a warning.
                tracing::debug!("writing results to stdout: {e}");
                return false;
            }
        }
        out.flush().await.is_ok()
    });
    (tx, task)
}
