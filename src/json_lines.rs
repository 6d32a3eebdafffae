//! Reading commands from a byte stream: JSON Lines, or JSON objects spread over several
//! lines (pretty-printed), in any mix.
//!
//! Each line is tried on its own first. A line that is an incomplete object (the JSON
//! ends early) is joined with the following lines until the text parses. If the joined
//! text turns out to be broken, only its first line is reported as malformed and the
//! following lines are read again on their own — so one bad line never swallows the
//! commands after it. A line that is not UTF-8 is reported as such ([`Piece::NotUtf8`]),
//! with its number, and reading goes on.

use std::collections::VecDeque;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One piece of input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// The text of one JSON value (a command, or a malformed piece to be reported).
    Json(String),
    /// A line that is not valid UTF-8 (so not JSON).
    NotUtf8 {
        /// Its number, from 1.
        line: u64,
        /// The line with invalid bytes replaced (to salvage a `command_id` for the answer).
        lossy: String,
        /// What is wrong, e.g. `invalid utf-8 sequence of 1 bytes from index 12`.
        error: String,
    },
}

/// One line as read.
#[derive(Debug)]
enum Line {
    Text(String),
    NotUtf8 { lossy: String, error: String },
}

/// Splits a stream into [`Piece`]s.
pub struct JsonLines<R> {
    reader: R,
    /// Lines of an object still being joined.
    joined: Vec<String>,
    /// Lines to read again on their own after a failed join, with their numbers.
    replay: VecDeque<(u64, Line)>,
    /// Lines read from `reader` so far.
    read: u64,
    eof: bool,
}

impl<R: AsyncBufRead + Unpin> JsonLines<R> {
    /// Reads from `reader`.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            joined: Vec::new(),
            replay: VecDeque::new(),
            read: 0,
            eof: false,
        }
    }

    /// The text of the next JSON value, or the next line that is not UTF-8; `None` at the
    /// end.
    pub async fn next_piece(&mut self) -> std::io::Result<Option<Piece>> {
        loop {
            let Some((number, line)) = self.next_line().await? else {
                return Ok(self.flush_joined().map(Piece::Json));
            };
            let line = match line {
                Line::Text(line) => line,
                Line::NotUtf8 { lossy, error } => {
                    let piece = Piece::NotUtf8 {
                        line: number,
                        lossy,
                        error,
                    };
                    if self.joined.is_empty() {
                        return Ok(Some(piece));
                    }
                    // A broken line ends the join: report the join's first line, then read
                    // the rest again, then this line.
                    let first = self.split_failed_join();
                    if let Piece::NotUtf8 { line, lossy, error } = piece {
                        self.replay
                            .push_back((line, Line::NotUtf8 { lossy, error }));
                    }
                    return Ok(first.map(Piece::Json));
                }
            };
            if self.joined.is_empty() && line.trim().is_empty() {
                continue;
            }
            self.joined.push(line);
            let text = self.joined.join("\n");
            match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
                Ok(_) => {
                    self.joined.clear();
                    return Ok(Some(Piece::Json(text)));
                }
                Err(e) if e.is_eof() => continue,
                Err(_) if self.joined.len() == 1 => {
                    self.joined.clear();
                    return Ok(Some(Piece::Json(text)));
                }
                Err(_) => return Ok(self.split_failed_join().map(Piece::Json)),
            }
        }
    }

    /// A join that failed: report its first line alone and replay the rest (their numbers
    /// only matter for lines that are not UTF-8, which never join).
    fn split_failed_join(&mut self) -> Option<String> {
        let mut lines = std::mem::take(&mut self.joined).into_iter();
        let first = lines.next();
        for (i, line) in lines.enumerate() {
            self.replay.insert(i, (0, Line::Text(line)));
        }
        first
    }

    /// At the end of input: an unfinished object is malformed; its first line is reported
    /// and the rest replayed (they may hold complete commands).
    fn flush_joined(&mut self) -> Option<String> {
        match self.joined.len() {
            0 => None,
            1 => self.joined.pop(),
            _ => self.split_failed_join(),
        }
    }

    async fn next_line(&mut self) -> std::io::Result<Option<(u64, Line)>> {
        if let Some(line) = self.replay.pop_front() {
            return Ok(Some(line));
        }
        if self.eof {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        if self.reader.read_until(b'\n', &mut bytes).await? == 0 {
            self.eof = true;
            return Ok(None);
        }
        self.read += 1;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        let line = match String::from_utf8(bytes) {
            Ok(text) => Line::Text(text),
            Err(e) => Line::NotUtf8 {
                error: e.utf8_error().to_string(),
                lossy: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            },
        };
        Ok(Some((self.read, line)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn texts(input: &str) -> Vec<String> {
        let mut lines = JsonLines::new(input.as_bytes());
        let mut out = Vec::new();
        while let Some(piece) = lines.next_piece().await.unwrap() {
            match piece {
                Piece::Json(t) => out.push(t),
                Piece::NotUtf8 { line, .. } => out.push(format!("<line {line}: not UTF-8>")),
            }
        }
        out
    }

    #[tokio::test]
    async fn json_lines_and_pretty_objects_mix() {
        let input = "{\"a\":1}\n\n{\n  \"b\": 2\n}\n{\"c\":3}\n";
        assert_eq!(
            texts(input).await,
            vec!["{\"a\":1}", "{\n  \"b\": 2\n}", "{\"c\":3}"]
        );
    }

    #[tokio::test]
    async fn a_truncated_line_does_not_swallow_the_next() {
        let input = "{\"a\":1,\n{\"b\":2}\nnot json\n{\"c\":3}\n{\"d\":";
        assert_eq!(
            texts(input).await,
            vec!["{\"a\":1,", "{\"b\":2}", "not json", "{\"c\":3}", "{\"d\":"]
        );
    }

    #[tokio::test]
    async fn a_line_that_is_not_utf8_is_reported_with_its_number_and_reading_goes_on() {
        let mut input = b"{\"a\":1}\n{\"command_id\":\"x\",\"b\":\"".to_vec();
        input.extend_from_slice(b"\xff\"}\n{\"c\":3}\n{\n\"d\":\xfe\n{\"e\":5}\n");
        let mut lines = JsonLines::new(&input[..]);
        let mut pieces = Vec::new();
        while let Some(piece) = lines.next_piece().await.unwrap() {
            pieces.push(piece);
        }
        assert_eq!(pieces.len(), 6, "{pieces:?}");
        assert_eq!(pieces[0], Piece::Json("{\"a\":1}".into()));
        let Piece::NotUtf8 { line, lossy, error } = &pieces[1] else {
            panic!("{pieces:?}")
        };
        assert_eq!(*line, 2);
        assert!(lossy.contains("\"command_id\":\"x\""), "{lossy}");
        assert!(error.contains("utf-8"), "{error}");
        assert_eq!(pieces[2], Piece::Json("{\"c\":3}".into()));
        assert_eq!(pieces[3], Piece::Json("{".into()));
        assert!(
            matches!(pieces[4], Piece::NotUtf8 { line: 5, .. }),
            "{pieces:?}"
        );
        assert_eq!(pieces[5], Piece::Json("{\"e\":5}".into()));
    }
}
