//! [`StopScanner`]: ends a reply where the model, after its commands, starts writing what
//! only cmdr writes.
//!
//! Small models often go on after `</shell>` with made-up results (`<tool_results>…`,
//! `[exit status 0]`). The loop sends [`STOP_SEQUENCES`] as the request's `stop` (each
//! starts with a line break, so a stopped reply keeps its closing tag and an answer that
//! merely begins by quoting the results is not cut to nothing), and because a provider may
//! ignore `stop`, enforces [`STOP_MARKERS`] on the stream: once a command or question has
//! closed (`</shell>`, `</ask>`, a process tag), the reply ends just before the first marker, which is
//! neither shown nor stored. A delta's tail that could be the start of a closing tag or a
//! marker is held back until the next delta tells.

/// The request's `stop` texts.
pub const STOP_SEQUENCES: [&str; 2] = ["\n<tool_results>", "\n[exit status"];

/// Where a reply ends once a command has closed: texts only cmdr writes in a conversation
/// (the wrapper of command results and the note of a failed command).
pub const STOP_MARKERS: [&str; 2] = ["<tool_results>", "[exit status"];

/// The ends of tags after which [`STOP_MARKERS`] end the reply: the closing tags, and
/// the `/>` of a process tag that closes itself (`<process-output id="p1"/>`).
const CLOSE_TAGS: [&str; 6] = [
    "</shell>",
    "</ask>",
    "</process-input>",
    "</process-output>",
    "</process-kill>",
    "/>",
];

/// Finds the first stop marker after a command in a streamed reply.
#[derive(Debug, Default)]
pub struct StopScanner {
    /// Text received but not released: it may be the start of a tag or a marker.
    held: String,
    /// A closing tag went by: markers count from now on.
    armed: bool,
    /// A marker was found: everything after it is dropped.
    stopped: bool,
}

impl StopScanner {
    /// A scanner for a new reply.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a marker was found (the reply is over).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Takes the next delta; returns the text that is certainly part of the reply.
    pub fn feed(&mut self, delta: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.held.push_str(delta);
        let mut from = 0;
        if !self.armed {
            match first_of(&self.held, &CLOSE_TAGS, 0) {
                Some((at, len)) => {
                    self.armed = true;
                    from = at + len;
                }
                None => return self.release(partial_len(&self.held, &CLOSE_TAGS)),
            }
        }
        if let Some((at, _)) = first_of(&self.held, &STOP_MARKERS, from) {
            self.stopped = true;
            let mut text = std::mem::take(&mut self.held);
            text.truncate(at);
            return text;
        }
        let keep = partial_len(self.held.get(from..).unwrap_or_default(), &STOP_MARKERS);
        self.release(keep)
    }

    /// The reply ended: the text still held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Releases all the held text but its last `keep` bytes.
    fn release(&mut self, keep: usize) -> String {
        let rest = self.held.split_off(self.held.len() - keep);
        std::mem::replace(&mut self.held, rest)
    }
}

/// The first of `needles` in `text` at or after `from`: its offset and length.
fn first_of(text: &str, needles: &[&str], from: usize) -> Option<(usize, usize)> {
    let hay = text.get(from..)?;
    needles
        .iter()
        .filter_map(|n| hay.find(n).map(|i| (from + i, n.len())))
        .min()
}

/// The length of the longest suffix of `text` that is a proper prefix of one of
/// `needles` (always at a character boundary: they are ASCII and start with one).
fn partial_len(text: &str, needles: &[&str]) -> usize {
    needles
        .iter()
        .flat_map(|n| (1..n.len()).map(move |k| &n[..k]))
        .filter(|prefix| text.ends_with(prefix))
        .map(str::len)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(deltas: &[&str]) -> (String, bool) {
        let mut scanner = StopScanner::new();
        let mut out: String = deltas.iter().map(|d| scanner.feed(d)).collect();
        out.push_str(&scanner.finish());
        (out, scanner.stopped())
    }

    #[test]
    fn text_without_markers_passes_whole() {
        let cmd = "<shell>ls</shell>";
        let (text, stopped) = scan(&[cmd, " a <tool", "s> b [exit", " code"]);
        assert_eq!(
            (text, stopped),
            (format!("{cmd} a <tools> b [exit code"), false)
        );
        assert_eq!(
            scan(&["x</shell> ends with <tool_res"]),
            ("x</shell> ends with <tool_res".to_owned(), false)
        );
    }

    #[test]
    fn before_any_command_markers_are_the_models_answer() {
        let answer = "<tool_results>\n$ wc -l a\n7 a\n</tool_results>\nIt has 7 lines.";
        assert_eq!(scan(&[answer]), (answer.to_owned(), false));
    }

    #[test]
    fn a_marker_after_a_command_ends_the_reply_before_it() {
        let (text, stopped) = scan(&["<shell>ls</she", "ll>\n<tool_", "results>\n$ ls\nmade up"]);
        assert_eq!(text, "<shell>ls</shell>\n");
        assert!(stopped);
        assert_eq!(
            scan(&["<ask>ok?</ask>", "\n[exit ", "status 0]"]),
            ("<ask>ok?</ask>\n".to_owned(), true)
        );
        assert_eq!(
            scan(&["<process-output id=\"p1\"/", ">\n<tool_results>\nmade up"]),
            ("<process-output id=\"p1\"/>\n".to_owned(), true)
        );
    }

    #[test]
    fn held_text_is_released_once_it_cannot_be_a_marker() {
        let mut scanner = StopScanner::new();
        assert_eq!(scanner.feed("é </sh"), "é ");
        assert_eq!(scanner.feed("ell> <tool_r"), "</shell> ");
        assert_eq!(scanner.feed("eally"), "<tool_really");
    }
}
