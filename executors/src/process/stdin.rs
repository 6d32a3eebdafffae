//! [`Stdin`]: where `PROCESS_INPUT` writes — a background process's stdin pipe, or the
//! master side of its pseudo-terminal.

use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;

use super::pty::Pty;

/// A background process's input.
#[derive(Debug)]
pub enum Stdin {
    /// A pipe: closing it gives the process end-of-file.
    Pipe(pipe::Sender),
    /// A pseudo-terminal: input is typed (line discipline, `^C`, `^D`); it stays open.
    Terminal(Arc<Pty>),
}

impl From<pipe::Sender> for Stdin {
    fn from(pipe: pipe::Sender) -> Self {
        Stdin::Pipe(pipe)
    }
}

impl Stdin {
    /// Writes as much of `input` as the pipe or terminal takes, once it takes any: how
    /// many bytes went in. Cancel-safe: dropped while waiting, nothing was written.
    pub async fn write_some(&mut self, input: &[u8]) -> std::io::Result<usize> {
        match self {
            Stdin::Pipe(pipe) => match pipe.write(input).await? {
                0 if !input.is_empty() => Err(std::io::ErrorKind::WriteZero.into()),
                n => Ok(n),
            },
            Stdin::Terminal(pty) => pty.write_some(input).await,
        }
    }

    /// After the input: with `close`, gives the process end-of-file. Returns whether it
    /// stays writable (a pipe is closed then; a terminal gets `^D` and stays open).
    pub async fn finish(&mut self, close: bool) -> std::io::Result<bool> {
        match self {
            Stdin::Pipe(pipe) => {
                pipe.flush().await?;
                Ok(!close)
            }
            Stdin::Terminal(pty) => {
                if close {
                    pty.end_of_file().await?;
                }
                Ok(true)
            }
        }
    }

    /// The pseudo-terminal, for a `tty` process.
    pub fn terminal(&self) -> Option<&Arc<Pty>> {
        match self {
            Stdin::Pipe(_) => None,
            Stdin::Terminal(pty) => Some(pty),
        }
    }
}
