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
//! saw). "Shown" is marked just *before* the prompt is written, so an answer typed the
//! instant the prompt appears is never taken for a stale line. Lines typed ahead of the
//! first question (a script feeding the terminal) answer it.

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
struct Terminal {
    /// Where prompts go (the terminal; something else in tests).
    writer: Box<dyn Write + Send>,
    /// Each line with the moment it was read.
    lines: mpsc::Receiver<(Instant, String)>,
    /// Whether a question was asked before (then lines read before a prompt are stale).
    asked: bool,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("asked", &self.asked)
            .finish_non_exhaustive()
    }
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
        Ok(Self::new(Box::new(writer), lines))
    }

    /// A terminal that writes prompts to `writer` and takes the lines of `lines`.
    fn new(writer: Box<dyn Write + Send>, lines: mpsc::Receiver<(Instant, String)>) -> Self {
        Self {
            writer,
            lines,
            asked: false,
        }
    }

    /// Shows the prompt and takes the next line (after the first question: the next one
    /// read since the prompt began to be written).
    ///
    /// The mark is taken *before* the prompt is written: an answer typed (or pasted) the
    /// moment the prompt appears, and read while the write is still returning, is an
    /// answer to this question, not a stale line.
    async fn ask(&mut self, request: &InputRequest) -> Result<String, InputError> {
        let shown = Instant::now();
        write!(self.writer, "\n[cmdr] {}\n> ", request.prompt)
            .and_then(|()| self.writer.flush())
            .map_err(|e| unavailable(&format!("{TTY}: {e}")))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A screen on which the person types `answer` the moment `prompt` appears: the line
    /// is read (and stamped) while the prompt is still being written, and the write
    /// returns only once the clock has moved past that stamp.
    struct TypesWhileShown {
        prompt: &'static str,
        answer: &'static str,
        keyboard: mpsc::Sender<(Instant, String)>,
    }

    impl Write for TypesWhileShown {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if String::from_utf8_lossy(buf).contains(self.prompt) {
                let read = Instant::now();
                self.keyboard
                    .try_send((read, self.answer.to_owned()))
                    .map_err(std::io::Error::other)?;
                while Instant::now() <= read {
                    std::hint::spin_loop();
                }
            }
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn request(prompt: &str) -> InputRequest {
        InputRequest {
            command_id: prompt.to_owned(),
            prompt: prompt.to_owned(),
            description: None,
        }
    }

    /// Issue 33: an answer read while the prompt was being written was stamped before
    /// "shown" and dropped as stale, and the question timed out. The line typed between
    /// two questions is still stale.
    #[tokio::test]
    async fn an_answer_typed_as_the_prompt_appears_answers_it() {
        let (keyboard, lines) = mpsc::channel(TYPED_AHEAD);
        let screen = TypesWhileShown {
            prompt: "second?",
            answer: "Ada",
            keyboard: keyboard.clone(),
        };
        let mut terminal = Terminal::new(Box::new(screen), lines);
        keyboard
            .try_send((Instant::now(), "typed ahead".to_owned()))
            .unwrap();
        let first = terminal.ask(&request("first?")).await.unwrap();
        assert_eq!(first, "typed ahead");
        let between = Instant::now();
        keyboard.try_send((between, "stale".to_owned())).unwrap();
        while Instant::now() <= between {
            std::hint::spin_loop();
        }
        let second =
            tokio::time::timeout(Duration::from_secs(30), terminal.ask(&request("second?")))
                .await
                .expect("the answer typed as the prompt appeared was dropped")
                .unwrap();
        assert_eq!(second, "Ada");
    }
}
