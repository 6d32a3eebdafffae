//! Incremental detection of `<shell>…</shell>` commands in the model's streamed text
//! (docs/contract.md §4).
//!
//! The model's reply arrives as small text deltas; [`ShellTagDetector::feed`] takes them
//! one at a time and reports each command as soon as its closing tag has arrived, even
//! when a tag is split across deltas. The detector only observes: the text is never
//! modified, and it keeps only the content of the command that is open (plus how many
//! bytes of a possibly-partial tag ended the last chunk — no copy of those bytes, the tags
//! are constants), never the whole text.
//!
//! # Grammar
//!
//! A command is exactly what the regular expression `(?s)<shell>(.*?)</shell>` finds,
//! scanning left to right without overlaps:
//!
//! - The tags are exactly `<shell>` and `</shell>`: case-sensitive, no attributes, no
//!   whitespace inside the tag. Lookalikes (`<Shell>`, `<shell x>`, `< shell>`,
//!   `<shellx>`, `</shel>`) are ordinary text.
//! - A command opens at the first `<shell>`; its content is everything up to the *first*
//!   `</shell>` after it (non-greedy). A `<shell>` inside an open command is part of its
//!   content (no nesting); a `</shell>` outside a command is ordinary text.
//! - The command is the content trimmed of leading and trailing whitespace
//!   ([`str::trim`]). A command whose trimmed content is empty (`<shell>  </shell>`) is
//!   skipped: not reported, only logged with `tracing::debug!`.
//! - Offsets are byte offsets in the whole text fed since the detector was created (or
//!   last [finished](ShellTagDetector::finish)): [`DetectedCommand::start`] is that of the
//!   `<` of `<shell>`, [`DetectedCommand::end`] is just past the `>` of `</shell>`.
//! - A `<shell>` still open when the text ends is unterminated: its content is ignored,
//!   and [`ShellTagDetector::finish`] returns its offset.
//!
//! Where the text is cut into chunks never changes the result: feeding it whole, char by
//! char, or split anywhere else gives the same commands with the same offsets.
//!
//! # Speed
//!
//! Both tags start with `<` and contain no other `<`, so the scan jumps from one `<` to
//! the next with `memchr` (SIMD) and only compares a few bytes at each; a failed partial match never has to be
//! re-scanned (the next possible tag start is the byte that broke it). Text between tags
//! is copied only inside an open command.

use tracing::debug;

/// The opening tag.
const OPEN: &str = "<shell>";
/// The closing tag.
const CLOSE: &str = "</shell>";
/// Above this capacity, the content buffer is freed once its command is done (a huge
/// command should not pin its memory for the rest of the reply).
const KEEP_CAPACITY: usize = 64 * 1024;

/// One complete command found in the model's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetectedCommand {
    /// The text between the tags, trimmed (leading/trailing whitespace removed).
    pub command: String,
    /// Byte offset of the opening `<shell>` in the whole text fed so far.
    pub start: usize,
    /// Byte offset just past the closing `</shell>`.
    pub end: usize,
}

/// Finds `<shell>…</shell>` commands in text fed chunk by chunk.
///
/// A command is what `(?s)<shell>(.*?)</shell>` matches, left to right: exact,
/// case-sensitive tags; the content runs to the first `</shell>` (a `<shell>` inside it is
/// content); the command is the content trimmed, and blank ones are skipped. Offsets count
/// bytes of the whole text fed so far. Where the text is cut into chunks never changes the
/// result. The text is only observed, and only the open command's content is kept.
///
/// ```
/// use cmdr::agent::ShellTagDetector;
///
/// let mut detector = ShellTagDetector::new();
/// let mut found = Vec::new();
/// for chunk in ["I'll look: <sh", "ell> ls -la </sh", "ell> done"] {
///     detector.feed(chunk, &mut found);
/// }
/// assert_eq!(detector.finish(), None);
/// assert_eq!(found.len(), 1);
/// assert_eq!(found[0].command, "ls -la");
/// assert_eq!((found[0].start, found[0].end), (11, 34));
/// ```
#[derive(Debug, Default)]
pub struct ShellTagDetector {
    /// Bytes fed so far: the offset of the next chunk's first byte.
    fed: usize,
    /// Offset of the `<shell>` of the open command, if one is open.
    open: Option<usize>,
    /// The open command's content so far (without a possibly-partial closing tag).
    content: String,
    /// How many bytes of the tag being looked for (`<shell>` outside a command,
    /// `</shell>` inside one) ended the last chunk; 0 when none did.
    partial: usize,
}

impl ShellTagDetector {
    /// A detector at the start of a text, no command open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk of the model's text; pushes every command whose closing tag
    /// arrived in it onto `out`, in order.
    pub fn feed(&mut self, chunk: &str, out: &mut Vec<DetectedCommand>) {
        let base = self.fed;
        self.fed += chunk.len();
        let bytes = chunk.as_bytes();
        // Where scanning goes on.
        let mut pos = 0;
        if self.partial > 0 {
            let tag = self.tag().as_bytes();
            let want = tag.get(self.partial..).unwrap_or_default();
            let n = want.len().min(bytes.len());
            if bytes.get(..n) == want.get(..n) {
                if n < want.len() {
                    // Still a prefix of the tag: the whole chunk belongs to it.
                    self.partial += n;
                    return;
                }
                let tag_start = base - self.partial;
                self.partial = 0;
                self.tag_found(tag_start, base + n, out);
                pos = n;
            } else {
                // Not the tag after all: its held bytes were ordinary text. The byte
                // that broke the match may start a tag itself, so scanning starts at 0
                // (the bytes before it matched the tag's tail, which has no `<`).
                if self.open.is_some() {
                    self.content
                        .push_str(CLOSE.get(..self.partial).unwrap_or_default());
                }
                self.partial = 0;
            }
        }
        let mut copy_from = pos;
        while let Some(lt) = find_lt(chunk, pos) {
            let tag = self.tag().as_bytes();
            let here = bytes.get(lt..).unwrap_or_default();
            if here.starts_with(tag) {
                if self.open.is_some() {
                    self.content
                        .push_str(chunk.get(copy_from..lt).unwrap_or_default());
                }
                pos = lt + tag.len();
                copy_from = pos;
                self.tag_found(base + lt, base + pos, out);
            } else if here.len() < tag.len() && tag.starts_with(here) {
                // The chunk ends inside what may be a tag: remember how much of it.
                if self.open.is_some() {
                    self.content
                        .push_str(chunk.get(copy_from..lt).unwrap_or_default());
                }
                self.partial = here.len();
                return;
            } else {
                pos = lt + 1;
            }
        }
        if self.open.is_some() {
            self.content
                .push_str(chunk.get(copy_from..).unwrap_or_default());
        }
    }

    /// Ends the text. Returns the byte offset of an unterminated `<shell>` if one is open
    /// (its content is ignored and logged with `tracing::debug!`).
    ///
    /// The detector is then back at the start of a new text (offsets from 0 again).
    pub fn finish(&mut self) -> Option<usize> {
        let open = self.open;
        if let Some(start) = open {
            debug!(
                start,
                content_bytes = self.content.len() + self.partial,
                "unterminated <shell> at the end of the text: ignored"
            );
        }
        *self = Self::default();
        open
    }

    /// Convenience: all commands of a complete text (feed + finish).
    pub fn detect_all(text: &str) -> Vec<DetectedCommand> {
        let mut detector = Self::new();
        let mut out = Vec::new();
        detector.feed(text, &mut out);
        detector.finish();
        out
    }

    /// The tag being looked for: `</shell>` inside a command, `<shell>` outside.
    fn tag(&self) -> &'static str {
        if self.open.is_some() {
            CLOSE
        } else {
            OPEN
        }
    }

    /// A whole tag spans `start..end` of the text: opens a command, or closes the open
    /// one (reporting it unless it is blank).
    fn tag_found(&mut self, start: usize, end: usize, out: &mut Vec<DetectedCommand>) {
        let Some(open) = self.open.take() else {
            self.open = Some(start);
            return;
        };
        let command = self.content.trim();
        if command.is_empty() {
            debug!(start = open, end, "empty <shell></shell> command: skipped");
        } else {
            out.push(DetectedCommand {
                command: command.to_owned(),
                start: open,
                end,
            });
        }
        if self.content.capacity() > KEEP_CAPACITY {
            self.content = String::new();
        } else {
            self.content.clear();
        }
    }
}

/// The offset of the first `<` at or after `from` in `text`.
///
/// `<` is ASCII, so any byte equal to it is the char; `memchr` scans with SIMD (about
/// 1.45× the standard library's `str::find` on prose, measured).
#[inline]
fn find_lt(text: &str, from: usize) -> Option<usize> {
    memchr::memchr(b'<', text.as_bytes().get(from..)?).map(|i| from + i)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use regex::Regex;

    use super::*;

    /// The reference: the regex of the grammar, blank commands dropped; plus the offset of
    /// the unterminated `<shell>` (the first one after the last match), if any.
    fn reference(text: &str) -> (Vec<DetectedCommand>, Option<usize>) {
        let re = Regex::new(r"(?s)<shell>(.*?)</shell>").unwrap();
        let mut commands = Vec::new();
        let mut last_end = 0;
        for caps in re.captures_iter(text) {
            let whole = caps.get(0).unwrap();
            last_end = whole.end();
            let command = caps.get(1).unwrap().as_str().trim();
            if !command.is_empty() {
                commands.push(DetectedCommand {
                    command: command.to_owned(),
                    start: whole.start(),
                    end: whole.end(),
                });
            }
        }
        let unterminated = text[last_end..].find(OPEN).map(|i| last_end + i);
        (commands, unterminated)
    }

    /// Feeds `chunks` in order; the commands and what `finish` returned.
    fn run(chunks: &[&str]) -> (Vec<DetectedCommand>, Option<usize>) {
        let mut detector = ShellTagDetector::new();
        let mut out = Vec::new();
        for chunk in chunks {
            detector.feed(chunk, &mut out);
        }
        (out, detector.finish())
    }

    /// The char boundaries of `text`, 0 and `len` included.
    fn boundaries(text: &str) -> Vec<usize> {
        (0..=text.len())
            .filter(|&i| text.is_char_boundary(i))
            .collect()
    }

    fn cmd(command: &str, start: usize, end: usize) -> DetectedCommand {
        DetectedCommand {
            command: command.to_owned(),
            start,
            end,
        }
    }

    /// Inputs for the split tests: every corner of the grammar.
    const CASES: &[&str] = &[
        "",
        "no tags at all, but a < b and c <= d",
        "<shell>ls</shell>",
        "before <shell>ls -la</shell> after",
        "<shell>ls</shell> <shell>ls</shell>",
        "<shell>echo one</shell><shell>echo two</shell>\n<shell>  echo three \n</shell>",
        "<shell>cat <shell> x</shell> then </shell>",
        "<shell>echo '<shell>'</shell>",
        "<shell>a </ shell> b </shel> c </shell>",
        "<shell>if [ $a -lt 3 ]; then echo \"<\"; fi < in.txt</shell>",
        "<shell>  </shell>",
        "<shell>\n\t</shell><shell>x</shell>",
        "<shell></shell>",
        "<shel>ls</shel> <shellx>ls</shellx> < shell>ls</shell> <Shell>ls</Shell>",
        "</shell> stray close <shell>ok</shell> </shell>",
        "<<shell>>ls<</shell>>",
        "<sh<shell>ls</sh</shell>",
        "<shell<shell>ls</shell",
        "text <shell>unterminated",
        "<shell>done</shell> and <shell>open",
        "<shell>open <shell> twice",
        "trailing partial <she",
        "trailing partial close <shell>x</she",
        "é<shell>ü ls 日本</shell>🎉<shell>🦀</shell>",
        "日本語<shell>\u{3000}echo 日本\u{3000}</shell>語",
        "<shell>multi\nline\ncommand</shell>",
    ];

    #[test]
    fn whole_text_matches_the_regex() {
        for text in CASES {
            assert_eq!(run(&[text]), reference(text), "{text:?}");
        }
    }

    #[test]
    fn every_split_point_matches_the_regex() {
        for text in CASES {
            let expected = reference(text);
            for i in boundaries(text) {
                let (a, b) = text.split_at(i);
                assert_eq!(run(&[a, b]), expected, "{a:?} + {b:?}");
            }
        }
    }

    #[test]
    fn every_pair_of_split_points_matches_the_regex() {
        for text in CASES {
            let expected = reference(text);
            let points = boundaries(text);
            for (n, &i) in points.iter().enumerate() {
                for &j in points.get(n..).unwrap_or_default() {
                    let chunks = [&text[..i], &text[i..j], &text[j..]];
                    assert_eq!(run(&chunks), expected, "{chunks:?}");
                }
            }
        }
    }

    #[test]
    fn char_by_char_matches_the_regex() {
        for text in CASES {
            let chars: Vec<String> = text.chars().map(String::from).collect();
            let chunks: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_eq!(run(&chunks), reference(text), "{text:?}");
        }
    }

    #[test]
    fn random_texts_and_splits_match_the_regex() {
        // Texts built from fragments that make and break tags, cut at random points.
        const PIECES: &[&str] = &[
            "<", ">", "/", "s", "h", "e", "l", " ", "\n", "x", "é", "🦀", "<shell>", "</shell>",
            "<sh", "ell>", "</sh", "<she", "ll", "</", "<shel>",
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |bound: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % bound
        };
        for _ in 0..2_000 {
            let len = next(40);
            let text: String = (0..len).map(|_| PIECES[next(PIECES.len())]).collect();
            let expected = reference(&text);
            assert_eq!(run(&[&text]), expected, "{text:?}");
            let points = boundaries(&text);
            let mut cuts: Vec<usize> = (0..next(6)).map(|_| points[next(points.len())]).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([text.len()]) {
                chunks.push(&text[from..cut]);
                from = cut;
            }
            assert_eq!(run(&chunks), expected, "{chunks:?}");
        }
    }

    #[test]
    fn offsets_are_those_of_the_tags() {
        let text = "ab <shell> ls </shell> cd <shell>pwd</shell>";
        assert_eq!(
            ShellTagDetector::detect_all(text),
            [cmd("ls", 3, 22), cmd("pwd", 26, 44)]
        );
        assert_eq!(&text[3..10], "<shell>");
        assert_eq!(&text[14..22], "</shell>");
        assert_eq!(&text[36..44], "</shell>");
    }

    #[test]
    fn offsets_count_across_chunks() {
        let (commands, open) = run(&["0123", "<sh", "ell>ls</sh", "ell>", " <shell>x"]);
        assert_eq!(commands, [cmd("ls", 4, 21)]);
        assert_eq!(open, Some(22));
    }

    #[test]
    fn tag_split_inside_both_tags() {
        assert_eq!(
            run(&["<sh", "ell>ls</sh", "ell>"]),
            (vec![cmd("ls", 0, 17)], None)
        );
    }

    #[test]
    fn several_commands_in_one_chunk_in_order() {
        let mut detector = ShellTagDetector::new();
        let mut out = Vec::new();
        detector.feed(
            "x <shell>a</shell><shell>b</shell> <shell>c</shell> <shell>d",
            &mut out,
        );
        let names: Vec<&str> = out.iter().map(|c| c.command.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        detector.feed("</shell>", &mut out);
        assert_eq!(out.last(), Some(&cmd("d", 52, 68)));
        assert_eq!(detector.finish(), None);
    }

    #[test]
    fn feed_reports_only_what_closed_in_that_chunk() {
        let mut detector = ShellTagDetector::new();
        let mut out = Vec::new();
        detector.feed("<shell>ls", &mut out);
        assert!(out.is_empty());
        detector.feed(" -l</", &mut out);
        assert!(out.is_empty());
        detector.feed("shell>", &mut out);
        assert_eq!(out, [cmd("ls -l", 0, 20)]);
    }

    #[test]
    fn duplicates_are_reported_twice() {
        assert_eq!(
            ShellTagDetector::detect_all("<shell>ls</shell> <shell>ls</shell>"),
            [cmd("ls", 0, 17), cmd("ls", 18, 35)]
        );
    }

    #[test]
    fn nested_open_tag_is_content_and_first_close_ends() {
        assert_eq!(
            ShellTagDetector::detect_all("<shell>a <shell>b</shell> c</shell>"),
            [cmd("a <shell>b", 0, 25)]
        );
    }

    #[test]
    fn unterminated_command_is_reported_by_finish() {
        let mut detector = ShellTagDetector::new();
        let mut out = Vec::new();
        detector.feed("ok <shell>ls</shell> then <shell>rm -rf", &mut out);
        assert_eq!(out, [cmd("ls", 3, 20)]);
        assert_eq!(detector.finish(), Some(26));
        // `finish` starts a new text: offsets from 0, nothing open.
        detector.feed("<shell>pwd</shell>", &mut out);
        assert_eq!(out.last(), Some(&cmd("pwd", 0, 18)));
        assert_eq!(detector.finish(), None);
    }

    #[test]
    fn unterminated_with_partial_close_tag() {
        assert_eq!(run(&["<shell>ls</she"]), (vec![], Some(0)));
        assert_eq!(run(&["a<shel"]), (vec![], None));
    }

    #[test]
    fn blank_commands_are_skipped() {
        assert_eq!(
            ShellTagDetector::detect_all("<shell>  </shell><shell></shell><shell>\n</shell>"),
            []
        );
        assert_eq!(
            ShellTagDetector::detect_all("<shell> </shell><shell> ls </shell>"),
            [cmd("ls", 16, 35)]
        );
    }

    #[test]
    fn lookalike_tags_are_text() {
        for text in [
            "<shel>ls</shel>",
            "<shellx>ls</shellx>",
            "< shell>ls</shell>",
            "<Shell>ls</Shell>",
            "<SHELL>ls</SHELL>",
            "<shell >ls</shell>",
            "<shell cwd=\"/\">ls</shell>",
            "</shell>ls</shell>",
        ] {
            assert_eq!(run(&[text]), (vec![], None), "{text:?}");
        }
        // Inside a command, a lookalike closing tag is content.
        assert_eq!(
            ShellTagDetector::detect_all("<shell>a</shel> b </shellx> c</ shell></shell>"),
            [cmd("a</shel> b </shellx> c</ shell>", 0, 46)]
        );
    }

    #[test]
    fn multibyte_text_around_and_inside_tags() {
        let text = "é<shell>ü ls 日本</shell>🎉";
        let commands = ShellTagDetector::detect_all(text);
        assert_eq!(commands, [cmd("ü ls 日本", 2, 29)]);
        assert_eq!(
            &text[commands[0].start..commands[0].end],
            "<shell>ü ls 日本</shell>"
        );
        // Unicode whitespace (ideographic space) is trimmed too.
        assert_eq!(
            ShellTagDetector::detect_all("<shell>\u{3000}ls\u{3000}</shell>"),
            [cmd("ls", 0, 23)]
        );
    }

    #[test]
    fn memory_is_released_after_a_huge_command() {
        let mut detector = ShellTagDetector::new();
        let mut out = Vec::new();
        let big = "x".repeat(KEEP_CAPACITY * 2);
        detector.feed("<shell>", &mut out);
        detector.feed(&big, &mut out);
        detector.feed("</shell>", &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(detector.content.capacity(), 0);
        // Text outside a command is never kept.
        detector.feed(&big, &mut out);
        assert_eq!(detector.content.capacity(), 0);
    }
}
