//! `FILE_READ`: stream a UTF-8 text file in chunks, whole or a line range.
//!
//! The whole read runs in one blocking task with std reads (one `tokio::fs` hop per chunk
//! is several times slower), sending each chunk as a `RUNNING` message; a slow reader
//! makes the blocking task wait (bounded memory). Chunks never split a UTF-8 character.
//! A file that is not UTF-8 text (a NUL byte in the first chunk, or an invalid sequence
//! anywhere) fails with `NOT_TEXT` naming its size; chunks already sent stay sent. Only a
//! regular file is read (`NOT_A_FILE` for a directory, FIFO, socket or device, checked
//! before anything is opened), opened without blocking (`files::open`).

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::confine::PathPolicy;
use crate::error::ExecError;
use crate::executor::{run_blocking, ExecContext, ExecFuture, Executor, OutputSink};
use crate::files::open::{open_regular, require_path};
use crate::outcome::{human_duration, Outcome};
use crate::protocol::{Command, FileReadCommand};

/// Bytes read (and sent) per chunk.
pub const READ_CHUNK_SIZE: usize = 64 * 1024;

/// Bytes inspected for NUL to recognise a binary file before sending anything.
const BINARY_SNIFF_LEN: usize = 8 * 1024;

/// The `FILE_READ` executor.
#[derive(Debug, Clone, Default)]
pub struct FileRead {
    paths: PathPolicy,
}

impl FileRead {
    /// An executor that reads only where `paths` allows.
    pub fn new(paths: PathPolicy) -> Self {
        Self { paths }
    }
}

impl Executor for FileRead {
    fn execute(&self, command: Command, ctx: ExecContext) -> ExecFuture<'_> {
        Box::pin(async move {
            let cmd = FileReadCommand::try_from(command)?;
            require_path(&cmd.file_path, "file_path")?;
            let window = LineWindow::new(cmd.start_line, cmd.end_line)?;
            let started = Instant::now();
            let ExecContext { output, cancel, .. } = ctx;
            let path = cmd.file_path.clone();
            let paths = self.paths.clone();
            let bytes = run_blocking(move || {
                let file = open_regular(&paths, &path, "file_path")?;
                read_file(file, &path, window, &output, &cancel)
            })
            .await?;
            Ok(Outcome::succeeded(format!(
                "File reading finished successfully in {} ({bytes} bytes).",
                human_duration(started.elapsed())
            )))
        })
    }
}

/// Which lines to return: 1-based, inclusive; everything by default.
#[derive(Debug, Clone, Copy)]
struct LineWindow {
    start: u64,
    end: u64,
    /// The 1-based line the next byte belongs to.
    line: u64,
    whole_file: bool,
}

impl LineWindow {
    fn new(start: Option<u64>, end: Option<u64>) -> Result<Self, ExecError> {
        let whole_file = start.is_none() && end.is_none();
        let (start, end) = (start.unwrap_or(1), end.unwrap_or(u64::MAX));
        if start == 0 || end == 0 {
            return Err(ExecError::InvalidInput(
                "start_line and end_line are 1-based".to_owned(),
            ));
        }
        if end < start {
            return Err(ExecError::InvalidInput(format!(
                "end_line {end} is before start_line {start}"
            )));
        }
        Ok(Self {
            start,
            end,
            line: 1,
            whole_file,
        })
    }

    /// The part of `chunk` inside the window, and whether the window is complete.
    fn select<'a>(&mut self, chunk: &'a [u8]) -> (&'a [u8], bool) {
        if self.whole_file {
            return (chunk, false);
        }
        let mut begin = (self.line >= self.start).then_some(0);
        for nl in memchr::memchr_iter(b'\n', chunk) {
            if self.line == self.end {
                let from = begin.unwrap_or(nl);
                return (chunk.get(from..=nl).unwrap_or_default(), true);
            }
            self.line += 1;
            if self.line == self.start {
                begin = Some(nl + 1);
            }
        }
        let selected = begin.and_then(|b| chunk.get(b..)).unwrap_or_default();
        (selected, false)
    }
}

/// Reads the regular `file` (`path`) through `window`, sending chunks; returns the bytes
/// sent.
fn read_file(
    mut file: File,
    path: &Path,
    mut window: LineWindow,
    output: &OutputSink,
    cancel: &CancellationToken,
) -> Result<u64, ExecError> {
    let meta = file.metadata().map_err(|e| ExecError::io(path, e))?;
    let not_text = || ExecError::NotText {
        path: path.to_path_buf(),
        size: meta.len(),
    };
    let mut carry: Vec<u8> = Vec::new();
    let mut sent = 0u64;
    let mut first = true;
    loop {
        if cancel.is_cancelled() {
            return Err(ExecError::Cancelled);
        }
        let mut raw = Vec::with_capacity(READ_CHUNK_SIZE);
        let n = (&mut file)
            .take(READ_CHUNK_SIZE as u64)
            .read_to_end(&mut raw)
            .map_err(|e| ExecError::io(path, e))?;
        if first && memchr::memchr(0, raw.get(..BINARY_SNIFF_LEN).unwrap_or(&raw)).is_some() {
            return Err(not_text());
        }
        first = false;
        let (selected, window_done) = window.select(&raw);
        let bytes = if carry.is_empty() && selected.len() == raw.len() {
            raw
        } else {
            let mut joined = std::mem::take(&mut carry);
            joined.extend_from_slice(selected);
            joined
        };
        let at_end = n == 0 || window_done;
        let text = split_utf8(bytes, &mut carry, at_end).ok_or_else(not_text)?;
        if !text.is_empty() {
            sent += text.len() as u64;
            output.blocking_send("Reading file", text)?;
        }
        if at_end {
            break;
        }
    }
    if !window.whole_file && sent == 0 && window.start > 1 {
        return Err(ExecError::InvalidInput(format!(
            "start_line {} is past the end of the file",
            window.start
        )));
    }
    Ok(sent)
}

/// Validates `bytes` as UTF-8; an incomplete character at the end is moved to `carry`
/// (unless `at_end`). `None` when the bytes are not UTF-8.
fn split_utf8(bytes: Vec<u8>, carry: &mut Vec<u8>, at_end: bool) -> Option<String> {
    // Validated once: the usual whole chunk becomes its text without a copy.
    match crate::utf8::string_from_utf8(bytes) {
        Ok(text) => Some(text),
        Err((mut bytes, valid, None)) if !at_end => {
            *carry = bytes.split_off(valid);
            crate::utf8::string_from_utf8(bytes).ok()
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select_all(start: Option<u64>, end: Option<u64>, chunks: &[&str]) -> String {
        let mut w = LineWindow::new(start, end).unwrap();
        let mut out = String::new();
        for c in chunks {
            let (s, done) = w.select(c.as_bytes());
            out.push_str(std::str::from_utf8(s).unwrap());
            if done {
                break;
            }
        }
        out
    }

    #[test]
    fn line_window_spans_chunks() {
        let chunks = ["a\nb", "\nc\n", "d\ne"];
        assert_eq!(select_all(Some(2), Some(3), &chunks), "b\nc\n");
        assert_eq!(select_all(Some(4), None, &chunks), "d\ne");
        assert_eq!(select_all(None, Some(1), &chunks), "a\n");
        assert_eq!(select_all(Some(5), Some(9), &chunks), "e");
    }

    #[test]
    fn split_utf8_carries_partial_characters() {
        let mut carry = Vec::new();
        let bytes = "hé".as_bytes()[..2].to_vec();
        assert_eq!(split_utf8(bytes, &mut carry, false).as_deref(), Some("h"));
        assert_eq!(carry, vec![0xC3]);
        assert_eq!(split_utf8(vec![0xC3], &mut Vec::new(), true), None);
        assert_eq!(split_utf8(vec![0xFF, b'a'], &mut Vec::new(), false), None);
    }
}
