//! [`TtyInput`]: answers `REQUEST_USER_INPUT` on the controlling terminal (`/dev/tty`),
//! so it works even when stdin carries the commands and stdout the results.
//!
//! With no terminal (CI, a daemon) the question fails at once with a clear error.
//! Questions are asked one at a time.
//!
//! **One reader owns the terminal.** The first question opens `/dev/tty` and starts one
//! thread that reads it line by line for the rest of the process; each question takes the
//! next line. A question that timed out or was cancelled leaves nothing behind that could
//! swallow the answer to the next one, and a line typed after one question ended and
//! before the next was shown is discarded (an answer must be to a question the person
//! saw). Lines typed ahead of the first question (a script feeding the terminal) answer it.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::time::Instant;

use cmdr_executors::{InputBroker, InputError, InputFuture, InputRequest};
use tokio::sync::{mpsc, Mutex};

/// The terminal device.
const TTY: &str = "/dev/tty";

/// Lines typed but not yet taken; more are dropped (nobody asked for them).
const TYPED_AHEAD: usize = 16;

/// The terminal input broker.
#[derive(Debug, Clone, Default)]
pub struct TtyInput {
    /// The terminal, opened by the first question; held by the question being asked.
    terminal: Arc<Mutex<Option<Terminal>>>,
}

/// The open terminal: where prompts go, and the lines its reader thread read.
#[derive(Debug)]
struct Terminal {
    writer: File,
    /// Each line with the moment it was read.
    lines: mpsc::Receiver<(Instant, String)>,
    /// Whether a question was asked before (then lines read before a prompt are stale).
    asked: bool,
}

impl InputBroker for TtyInput {
    fn request(&self, request: InputRequest) -> InputFuture<'_> {
        Box::pin(async move {
            let mut terminal = self.terminal.lock().await;
            if terminal.is_none() {
                *terminal = Some(Terminal::open()?);
            }
            let Some(open) = terminal.as_mut() else {
                return Err(unavailable("no terminal"));
            };
            open.ask(&request).await
        })
    }
}

impl Terminal {
    /// Opens the terminal and starts its one reader thread (a plain thread, not the
    /// blocking pool: a read nobody answers must not keep the runtime from shutting down).
    fn open() -> Result<Self, InputError> {
        let tty = OpenOptions::new()
            .read(true)
            .write(true)
            .open(TTY)
            .map_err(|e| unavailable(&format!("no terminal to ask on ({TTY}: {e})")))?;
        let writer = tty
            .try_clone()
            .map_err(|e| unavailable(&format!("{TTY}: {e}")))?;
        let (tx, lines) = mpsc::channel(TYPED_AHEAD);
        std::thread::Builder::new()
            .name("cmdr-tty-reader".to_owned())
            .spawn(move || read_lines(tty, &tx))
            .map_err(|e| unavailable(&format!("cannot start the terminal reader: {e}")))?;
        Ok(Self {
            writer,
            lines,
            asked: false,
        })
    }

    /// Shows the prompt and takes the next line (after the first question: the next one
    /// read after the prompt was shown).
    async fn ask(&mut self, request: &InputRequest) -> Result<String, InputError> {
        write!(self.writer, "\n[cmdr] {}\n> ", request.prompt)
            .and_then(|()| self.writer.flush())
            .map_err(|e| unavailable(&format!("{TTY}: {e}")))?;
        let shown = Instant::now();
        let stale_before = std::mem::replace(&mut self.asked, true).then_some(shown);
        loop {
            let (read, line) = self
                .lines
                .recv()
                .await
                .ok_or_else(|| unavailable("the terminal closed"))?;
            if stale_before.is_none_or(|at| read >= at) {
                return Ok(line);
            }
        }
    }
}

/// The reader thread: every line of the terminal into `tx`, until end of file, an error,
/// or nobody listens any more. A full queue drops the line (nobody asked for it).
fn read_lines(tty: File, tx: &mpsc::Sender<(Instant, String)>) {
    let mut reader = BufReader::new(tty);
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) => {
                let line = line.trim_end_matches(['\n', '\r']).to_owned();
                if let Err(mpsc::error::TrySendError::Closed(_)) =
                    tx.try_send((Instant::now(), line))
                {
                    return;
                }
            }
            Err(e) => {
                tracing::debug!("reading {TTY}: {e}");
                return;
            }
        }
    }
}

fn unavailable(why: &str) -> InputError {
    InputError::Unavailable(why.to_owned())
}
