//! Reading commands from a byte stream: JSON Lines, or JSON objects spread over several
//! lines (pretty-printed), in any mix.
//!
//! Each line is tried on its own first. A line that is an incomplete object (the JSON
//! ends early) is joined with the following lines until the text parses. If the joined
//! text turns out to be broken, only its first line is reported as malformed and the
//! following lines are read again on their own — so one bad line never swallows the
//! commands after it.

use std::collections::VecDeque;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Splits a stream into the texts of individual JSON values (each one command, or one
/// malformed piece to be reported).
pub struct JsonLines<R> {
    reader: R,
    /// Lines of an object still being joined.
    joined: Vec<String>,
    /// Lines to read again on their own after a failed join.
    replay: VecDeque<String>,
    eof: bool,
}

impl<R: AsyncBufRead + Unpin> JsonLines<R> {
    /// Reads from `reader`.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            joined: Vec::new(),
            replay: VecDeque::new(),
            eof: false,
        }
    }

    /// The next piece of text to decode as a command, `None` at the end.
    pub async fn next_text(&mut self) -> std::io::Result<Option<String>> {
        loop {
            let Some(line) = self.next_line().await? else {
                return Ok(self.flush_joined());
            };
            if self.joined.is_empty() && line.trim().is_empty() {
                continue;
            }
            self.joined.push(line);
            let text = self.joined.join("\n");
            match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
                Ok(_) => {
                    self.joined.clear();
                    return Ok(Some(text));
                }
                Err(e) if e.is_eof() => continue,
                Err(_) if self.joined.len() == 1 => {
                    self.joined.clear();
                    return Ok(Some(text));
                }
                Err(_) => return Ok(self.split_failed_join()),
            }
        }
    }

    /// A join that failed: report its first line alone and replay the rest.
    fn split_failed_join(&mut self) -> Option<String> {
        let mut lines = std::mem::take(&mut self.joined).into_iter();
        let first = lines.next();
        for (i, line) in lines.enumerate() {
            self.replay.insert(i, line);
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

    async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        if let Some(line) = self.replay.pop_front() {
            return Ok(Some(line));
        }
        if self.eof {
            return Ok(None);
        }
        let mut line = String::new();
        if self.reader.read_line(&mut line).await? == 0 {
            self.eof = true;
            return Ok(None);
        }
        let trimmed = line.trim_end_matches(['\n', '\r']).len();
        line.truncate(trimmed);
        Ok(Some(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn texts(input: &str) -> Vec<String> {
        let mut lines = JsonLines::new(input.as_bytes());
        let mut out = Vec::new();
        while let Some(t) = lines.next_text().await.unwrap() {
            out.push(t);
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
}
