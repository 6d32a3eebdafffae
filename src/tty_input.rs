//! [`TtyInput`]: answers `REQUEST_USER_INPUT` on the controlling terminal (`/dev/tty`),
//! so it works even when stdin carries the commands and stdout the results.
//!
//! With no terminal (CI, a daemon) the question fails at once with a clear error.
//! Questions are asked one at a time.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;

use cmdr_executors::{InputBroker, InputError, InputFuture, InputRequest};
use tokio::sync::{oneshot, Mutex};

/// The terminal device.
const TTY: &str = "/dev/tty";

/// The terminal input broker.
#[derive(Debug, Clone, Default)]
pub struct TtyInput {
    /// One question on the terminal at a time.
    turn: Arc<Mutex<()>>,
}

impl InputBroker for TtyInput {
    fn request(&self, request: InputRequest) -> InputFuture<'_> {
        Box::pin(async move {
            let _turn = self.turn.lock().await;
            let (tx, rx) = oneshot::channel();
            // A plain thread, not the blocking pool: a read nobody answers must not keep
            // the runtime from shutting down.
            std::thread::spawn(move || {
                let _ = tx.send(ask(&request));
            });
            rx.await
                .unwrap_or_else(|_| Err(InputError::Unavailable("terminal reader failed".into())))
        })
    }
}

fn ask(request: &InputRequest) -> Result<String, InputError> {
    let unavailable =
        |e: std::io::Error| InputError::Unavailable(format!("no terminal to ask on ({TTY}: {e})"));
    let tty = OpenOptions::new()
        .read(true)
        .write(true)
        .open(TTY)
        .map_err(unavailable)?;
    let mut writer = tty.try_clone().map_err(unavailable)?;
    write!(writer, "\n[cmdr] {}\n> ", request.prompt).map_err(unavailable)?;
    writer.flush().map_err(unavailable)?;
    let mut line = String::new();
    let read = BufReader::new(tty)
        .read_line(&mut line)
        .map_err(unavailable)?;
    if read == 0 {
        return Err(InputError::Unavailable("the terminal closed".to_owned()));
    }
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}
