//! One command's output as the loop keeps it: bounded memory however much is printed,
//! with the exact head and tail, and the size of what was dropped in between.

/// Characters of a result kept in the `tool` message the model sees (head + tail).
pub const TOOL_RESULT_LIMIT: usize = 2000;

/// Bytes kept at each end of a command's output for its `tool-result` event.
pub const CAPTURE_KEEP: usize = 256 * 1024;

/// The head and tail of a stream of text; the middle is counted, not kept.
#[derive(Debug, Default, Clone)]
pub struct OutputCapture {
    head: String,
    tail: String,
    total_chars: usize,
    dropped_chars: usize,
    keep: usize,
}

impl OutputCapture {
    /// A capture keeping [`CAPTURE_KEEP`] bytes at each end.
    pub fn new() -> Self {
        Self::with_keep(CAPTURE_KEEP)
    }

    /// A capture keeping about `keep` bytes at each end (at least
    /// [`TOOL_RESULT_LIMIT`] characters' worth).
    pub fn with_keep(keep: usize) -> Self {
        Self {
            // Both ends must hold `TOOL_RESULT_LIMIT` characters of up to 4 bytes each.
            keep: keep.max((TOOL_RESULT_LIMIT + 1) * 4),
            ..Self::default()
        }
    }

    /// Adds the next chunk.
    pub fn push(&mut self, chunk: &str) {
        self.total_chars += chunk.chars().count();
        let room = self.keep.saturating_sub(self.head.len());
        if room > 0 && self.tail.is_empty() {
            let split = floor_char_boundary(chunk, room);
            self.head.push_str(&chunk[..split]);
            self.tail.push_str(&chunk[split..]);
        } else {
            self.tail.push_str(chunk);
        }
        if self.tail.len() > 2 * self.keep {
            let cut = floor_char_boundary(&self.tail, self.tail.len() - self.keep);
            self.dropped_chars += self.tail[..cut].chars().count();
            self.tail.drain(..cut);
        }
    }

    /// Characters seen in all.
    pub fn total_chars(&self) -> usize {
        self.total_chars
    }

    /// The output, with a marker where the middle was dropped.
    pub fn text(&self) -> String {
        if self.dropped_chars == 0 {
            return format!("{}{}", self.head, self.tail);
        }
        format!(
            "{}{}{}",
            self.head,
            omitted_marker(self.dropped_chars),
            self.tail
        )
    }

    /// The output cut to `limit` characters: the first `limit / 2` and the last
    /// `limit - limit / 2`, with a marker saying how many characters were cut between.
    pub fn truncated(&self, limit: usize) -> String {
        if self.total_chars <= limit {
            return self.text();
        }
        let head_n = limit / 2;
        let tail_n = limit - head_n;
        let kept = || self.head.chars().chain(self.tail.chars());
        let head: String = kept().take(head_n).collect();
        let tail: String = if self.dropped_chars == 0 {
            kept().skip(self.total_chars - tail_n).collect()
        } else {
            let tail_chars = self.tail.chars().count();
            self.tail
                .chars()
                .skip(tail_chars.saturating_sub(tail_n))
                .collect()
        };
        format!("{head}{}{tail}", omitted_marker(self.total_chars - limit))
    }
}

/// The marker put where characters were cut.
pub fn omitted_marker(chars: usize) -> String {
    format!("\n[… {chars} characters omitted …]\n")
}

/// The largest char boundary of `s` at or below `index`.
fn floor_char_boundary(s: &str, index: usize) -> usize {
    if index >= s.len() {
        return s.len();
    }
    let mut i = index;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(text: &str, keep: usize, chunk: usize) -> OutputCapture {
        let mut c = OutputCapture::with_keep(keep);
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(chunk) {
            c.push(&piece.iter().collect::<String>());
        }
        c
    }

    #[test]
    fn short_output_is_kept_whole() {
        let c = capture("hello\nworld\n", 0, 3);
        assert_eq!(c.text(), "hello\nworld\n");
        assert_eq!(c.truncated(TOOL_RESULT_LIMIT), "hello\nworld\n");
    }

    #[test]
    fn truncation_keeps_exact_head_and_tail() {
        let text: String = (0..5000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        for chunk in [1, 7, 4096, 10_000] {
            let c = capture(&text, 0, chunk);
            let t = c.truncated(2000);
            let expected = format!("{}{}{}", &text[..1000], omitted_marker(3000), &text[4000..]);
            assert_eq!(t, expected, "chunk {chunk}");
        }
    }

    #[test]
    fn huge_output_keeps_bounded_memory_and_exact_ends() {
        let line = "0123456789abcdef\n";
        let mut c = OutputCapture::with_keep(16 * 1024);
        let mut all = String::new();
        for _ in 0..100_000 {
            c.push(line);
        }
        for _ in 0..100_000 {
            all.push_str(line);
        }
        assert!(c.head.len() + c.tail.len() <= 3 * 16 * 1024);
        assert_eq!(c.total_chars(), all.len());
        let t = c.truncated(2000);
        let expected = format!(
            "{}{}{}",
            &all[..1000],
            omitted_marker(all.len() - 2000),
            &all[all.len() - 1000..]
        );
        assert_eq!(t, expected);
        let text = c.text();
        assert!(text.starts_with(&all[..16 * 1024]));
        assert!(text.ends_with(&all[all.len() - 16 * 1024..]));
        assert!(text.contains("characters omitted"));
    }

    #[test]
    fn multibyte_characters_are_counted_as_characters() {
        let text = "é".repeat(3000);
        let c = capture(&text, 0, 5);
        let t = c.truncated(2000);
        assert_eq!(
            t,
            format!(
                "{}{}{}",
                "é".repeat(1000),
                omitted_marker(1000),
                "é".repeat(1000)
            )
        );
    }
}
