//! [`FileText`]: the original file split into lines once, without copying it.

/// The original file as line slices. Each slice also tells where its line starts (its
/// address minus the text's), so untouched ranges can be copied to the output with one
/// `push_str` without a second index.
#[derive(Debug)]
pub(crate) struct FileText<'a> {
    text: &'a str,
    /// Each line without its `\n` and without a `\r` before it (matching ignores CRLF).
    lines: Vec<&'a str>,
    /// The dominant line ending; `None` when the file has no `\n` at all.
    eol: Option<&'static str>,
}

impl<'a> FileText<'a> {
    /// Splits `text` into lines (one pass with `memchr`).
    pub(crate) fn new(text: &'a str) -> Self {
        let mut lines = Vec::with_capacity(text.len() / 32 + 1);
        let (mut start, mut crlf, mut lf) = (0, 0usize, 0usize);
        for newline in memchr::memchr_iter(b'\n', text.as_bytes()) {
            let line = text.get(start..newline).unwrap_or_default();
            let line = match line.strip_suffix('\r') {
                Some(stripped) => {
                    crlf += 1;
                    stripped
                }
                None => {
                    lf += 1;
                    line
                }
            };
            lines.push(line);
            start = newline + 1;
        }
        if start < text.len() {
            lines.push(text.get(start..).unwrap_or_default());
        }
        let eol = match (crlf, lf) {
            (0, 0) => None,
            (crlf, lf) if crlf > lf => Some("\r\n"),
            _ => Some("\n"),
        };
        FileText { text, lines, eol }
    }

    /// The lines, without line endings.
    pub(crate) fn lines(&self) -> &[&'a str] {
        &self.lines
    }

    /// Number of lines (a last line without `\n` counts).
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    /// Byte offset where line `index` starts (the text's length for `index >= len`).
    pub(crate) fn start(&self, index: usize) -> usize {
        match self.lines.get(index) {
            // Every line is a subslice of `text`, so the difference is its byte offset.
            Some(line) => (line.as_ptr() as usize).saturating_sub(self.text.as_ptr() as usize),
            None => self.text.len(),
        }
    }

    /// The text between two byte offsets from [`FileText::start`].
    pub(crate) fn slice(&self, from: usize, to: usize) -> &'a str {
        self.text.get(from..to).unwrap_or_default()
    }

    /// The whole text.
    pub(crate) fn text(&self) -> &'a str {
        self.text
    }

    /// The dominant line ending, if the file has any.
    pub(crate) fn eol(&self) -> Option<&'static str> {
        self.eol
    }

    /// Whether the file ends with a newline (an empty file counts as yes).
    pub(crate) fn ends_with_newline(&self) -> bool {
        self.text.is_empty() || self.text.ends_with('\n')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_and_detects_endings() {
        let file = FileText::new("a\r\nb\r\nc");
        assert_eq!(file.lines(), ["a", "b", "c"]);
        assert_eq!(file.eol(), Some("\r\n"));
        assert!(!file.ends_with_newline());
        assert_eq!(file.slice(file.start(1), file.start(3)), "b\r\nc");
        assert_eq!(file.start(99), 7);

        let empty = FileText::new("");
        assert_eq!(empty.len(), 0);
        assert_eq!(empty.eol(), None);
        assert!(empty.ends_with_newline());

        let lf = FileText::new("x\n\ny\n");
        assert_eq!(lf.lines(), ["x", "", "y"]);
        assert_eq!(lf.eol(), Some("\n"));
    }
}
