//! `cmdr exec [FILE|-|JSON]`: run commands, print every `OutputResult` as a JSON line.
//!
//! Input: a file, `-` (or nothing) for stdin, or a single JSON object as the argument;
//! one object or JSON Lines. Commands start as they are read (a producer can pipe them
//! in). `--jobs N` runs up to N at once (default 1: one after another, in order); messages
//! of one command are always printed in order. A malformed line prints a `FAILED` result
//! (with its `command_id` when one can be read) and the rest still run. Exit status 0 only
//! if every command succeeded.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cmdr_executors::{
    combine_output_results, ExecutionStatus, OutputResult, Registry, RegistryConfig,
};
use tokio::io::{AsyncBufRead, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use super::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE};
use crate::json_lines::JsonLines;
use crate::tty_input::TtyInput;

/// Lines buffered for stdout before commands wait for the terminal/pipe.
const OUTPUT_QUEUE: usize = 256;

/// Arguments of `cmdr exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// A file of commands, `-` for stdin (the default), or one JSON command.
    pub input: Option<String>,
    /// Print one combined result per command instead of every message.
    #[arg(long)]
    pub combine: bool,
    /// Run up to N commands at once.
    #[arg(long, short = 'j', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub jobs: u32,
    /// Default timeout of BASH_EXEC commands without `timeout_ms`, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
}

/// Runs `cmdr exec`; returns the exit status.
pub async fn run(args: ExecArgs) -> u8 {
    let input = match open_input(args.input.as_deref()).await {
        Ok(input) => input,
        Err(message) => {
            eprintln!("cmdr exec: {message}");
            return EXIT_USAGE;
        }
    };
    let mut config = RegistryConfig {
        input_broker: Arc::new(TtyInput::default()),
        ..RegistryConfig::default()
    };
    if let Some(ms) = args.timeout_ms {
        config.bash.default_timeout = Some(Duration::from_millis(ms));
    }
    let registry = Registry::with_config(config);
    let (lines, printer) = spawn_printer();
    let all_ok = Arc::new(AtomicBool::new(true));
    let run = run_all(input, &registry, &lines, &all_ok, &args);
    let interrupted = tokio::select! {
        () = run => false,
        () = interrupted() => true,
    };
    if interrupted {
        registry.shutdown(Duration::ZERO).await;
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
async fn run_all(
    input: Input,
    registry: &Registry,
    lines: &mpsc::Sender<String>,
    all_ok: &Arc<AtomicBool>,
    args: &ExecArgs,
) {
    let mut reader = match input {
        Input::Literal(text) => JsonLines::new(Box::new(std::io::Cursor::new(text.into_bytes()))
            as Box<dyn AsyncBufRead + Unpin + Send>),
        Input::Stream(stream) => JsonLines::new(stream),
    };
    let jobs = Arc::new(Semaphore::new(args.jobs as usize));
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
        let stream = registry.execute_json(&text).await;
        let (lines, all_ok, combine) = (lines.clone(), all_ok.clone(), args.combine);
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
    mut stream: cmdr_executors::ResultStream,
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

/// Resolves on SIGINT or SIGTERM.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
