//! Incremental detection of the loop's tags — `<shell>…</shell>` commands, `<ask>…</ask>`
//! questions and the process tags — in the model's streamed text (docs/contract.md §4,
//! docs/agents.md).
//!
//! The model's reply arrives as small text deltas; [`ShellTagDetector::feed`] takes them
//! one at a time and reports each command as soon as its closing tag has arrived, even
//! when a tag is split across deltas. The detector only observes: the text is never
//! modified, and it keeps only the content of the command that is open (plus the bytes of
//! a possibly-partial opening tag that ended the last chunk, at most [`MAX_OPEN_TAG`]),
//! never the whole text.
//!
//! # Grammar
//!
//! A command is what this regular expression finds, scanning left to right without
//! overlaps, outside Markdown code fences, where `NAME` is one of `shell`, `ask`,
//! `process-output`, `process-input`, `process-kill` and an opening tag is at most
//! [`MAX_OPEN_TAG`] bytes:
//!
//! ```text
//! <NAME(?:[ \t]+ATTR)*[ \t]*(/?)>      then, unless (/) was there,   (?s)(.*?)</NAME>
//! ATTR = [A-Za-z][A-Za-z0-9_-]*(?:=(?:"[^"<\r\n]*"|'[^'<\r\n]*'|[^ \t\r\n"'<>=/]+))?
//! ```
//!
//! - Tag names are exact and case-sensitive; lookalikes (`<Shell>`, `< shell>`,
//!   `<shellx>`, `</shel>`, `<shell a="x"b>`) are ordinary text. Closing tags are exact
//!   (`</shell>`, no attributes, no whitespace).
//! - Attributes are `name="value"`, `name='value'`, `name=value` (no spaces, quotes,
//!   `<`, `>`, `=` or `/`) or a bare `name`; an opening tag never holds a `<` or a line
//!   break. What they mean is not the detector's business (the loop checks them).
//! - `<NAME …/>` is a whole command with empty content.
//! - A command's content is everything up to the *first* closing tag of its name after
//!   its opening tag (non-greedy): any other tag inside it is content (no nesting); a
//!   closing tag outside a command is ordinary text.
//! - The content is trimmed of leading and trailing whitespace ([`str::trim`]). A
//!   `<shell>` or `<ask>` whose trimmed content is empty is skipped: not reported, only
//!   logged with `tracing::debug!` (process tags are reported: the loop tells the model
//!   what is missing).
//! - Offsets are byte offsets in the whole text fed since the detector was created (or
//!   last [finished](ShellTagDetector::finish)): [`DetectedCommand::start`] is that of the
//!   `<` of the opening tag, [`DetectedCommand::end`] is just past the `>` of the closing
//!   tag (of the opening tag when it closes itself).
//! - An opening tag still open when the text ends is unterminated: its content is
//!   ignored, and [`ShellTagDetector::finish`] returns its offset.
//!
//! Where the text is cut into chunks never changes the result: feeding it whole, char by
//! char, or split anywhere else gives the same commands with the same offsets.
//!
//! # Speed
//!
//! Every tag starts with `<` and holds no other `<`, so the scan jumps from one `<` to
//! the next with `memchr` (SIMD) and only compares a few bytes at each. Text between tags
//! is copied only inside an open command.

use tracing::debug;

/// Above this capacity, the content buffer is freed once its command is done (a huge
/// command should not pin its memory for the rest of the reply).
const KEEP_CAPACITY: usize = 64 * 1024;

/// The longest opening tag, attributes included, in bytes: a longer one is text.
pub const MAX_OPEN_TAG: usize = 512;

/// The grammar's opening tag as a regular expression (the references of the tests, the
/// fuzz target and the bench): group 1 the name, 2 the attributes, 3 the `/` of a tag
/// that closes itself.
pub const OPEN_TAG_PATTERN: &str = concat!(
    r"<(shell|ask|process-output|process-input|process-kill)",
    r"((?:[ \t]+[A-Za-z][A-Za-z0-9_-]*",
    r#"(?:=(?:"[^"<\r\n]*"|'[^'<\r\n]*'|[^ \t\r\n"'<>=/]+))?)*)"#,
    r"[ \t]*(/?)>"
);

/// One attribute of [`OPEN_TAG_PATTERN`]'s group 2: group 1 the name, 2, 3 or 4 the
/// value (double-quoted, single-quoted, unquoted).
pub const ATTRIBUTE_PATTERN: &str = concat!(
    r"([A-Za-z][A-Za-z0-9_-]*)",
    r#"(?:=(?:"([^"<\r\n]*)"|'([^'<\r\n]*)'|([^ \t\r\n"'<>=/]+)))?"#
);

/// What a tag pair asks for (in events: `"shell"`, `"ask"`, `"process-output"`,
/// `"process-input"` or `"process-kill"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TagKind {
    /// `<shell>…</shell>`: a command to run (in the background with `background`).
    Shell,
    /// `<ask>…</ask>`: a question for the person.
    Ask,
    /// `<process-output id="p1"/>`: read a background process's new output.
    ProcessOutput,
    /// `<process-input id="p1">…</process-input>`: type into a background process.
    ProcessInput,
    /// `<process-kill id="p1"/>`: stop a background process.
    ProcessKill,
}

impl TagKind {
    /// Every kind, in the order their opening tags are tried.
    pub const ALL: [TagKind; 5] = [
        TagKind::Shell,
        TagKind::Ask,
        TagKind::ProcessOutput,
        TagKind::ProcessInput,
        TagKind::ProcessKill,
    ];

    /// The tag's name (`shell`, `process-output` …).
    pub fn name(self) -> &'static str {
        match self {
            TagKind::Shell => "shell",
            TagKind::Ask => "ask",
            TagKind::ProcessOutput => "process-output",
            TagKind::ProcessInput => "process-input",
            TagKind::ProcessKill => "process-kill",
        }
    }

    /// `<` and the name: how every opening tag of this kind starts.
    fn open_prefix(self) -> &'static str {
        match self {
            TagKind::Shell => "<shell",
            TagKind::Ask => "<ask",
            TagKind::ProcessOutput => "<process-output",
            TagKind::ProcessInput => "<process-input",
            TagKind::ProcessKill => "<process-kill",
        }
    }

    /// The closing tag.
    pub fn close_tag(self) -> &'static str {
        match self {
            TagKind::Shell => "</shell>",
            TagKind::Ask => "</ask>",
            TagKind::ProcessOutput => "</process-output>",
            TagKind::ProcessInput => "</process-input>",
            TagKind::ProcessKill => "</process-kill>",
        }
    }

    /// Whether a blank command of this kind is skipped (`<shell>`, `<ask>`).
    fn skips_blank(self) -> bool {
        matches!(self, TagKind::Shell | TagKind::Ask)
    }
}

/// One attribute of an opening tag, as written (quotes removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Its name.
    pub name: String,
    /// Its value; `None` for a bare name (`<shell background>`).
    pub value: Option<String>,
}

/// One complete command (or question) found in the model's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetectedCommand {
    /// What the tag asks for.
    pub kind: TagKind,
    /// The text between the tags, trimmed (leading/trailing whitespace removed); empty
    /// for a tag that closes itself.
    pub command: String,
    /// The opening tag's attributes, in order.
    pub attributes: Vec<Attribute>,
    /// Byte offset of the opening tag in the whole text fed so far.
    pub start: usize,
    /// Byte offset just past the closing tag.
    pub end: usize,
}

/// Finds the loop's tags (`<shell>`, `<ask>`, the process tags) in text fed chunk by
/// chunk, outside Markdown code fences.
///
/// See the module documentation for the grammar: exact, case-sensitive tag names with
/// optional attributes; the content runs to the first closing tag of its kind (any
/// other tag inside it is content); the command is the content trimmed, and blank
/// `<shell>`/`<ask>` are skipped. Offsets count bytes of the whole text fed so far.
/// Where the text is cut into chunks never changes the result. The text is only
/// observed; only the open command's content and at most [`MAX_OPEN_TAG`] undecided
/// bytes are kept.
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
#[derive(Debug)]
pub struct ShellTagDetector {
    /// Bytes fed so far: the offset of the next chunk's first byte.
    fed: usize,
    /// The open command: its opening tag's offset, kind and attributes.
    open: Option<(usize, TagKind, Vec<Attribute>)>,
    /// The open command's content so far.
    content: String,
    /// The end of the last chunk, not yet decided: what may be the start of a tag or of
    /// a fence line. Scanned again with the next chunk.
    held: String,
    /// The open fence (its character and length), outside commands.
    fence: Option<(u8, usize)>,
    /// The next byte scanned starts a line (outside commands).
    line_start: bool,
}

impl Default for ShellTagDetector {
    fn default() -> Self {
        Self {
            fed: 0,
            open: None,
            content: String::new(),
            held: String::new(),
            fence: None,
            line_start: true,
        }
    }
}

/// What is at a `<`.
enum TagMatch {
    /// A whole opening tag of this many bytes.
    Open(OpenTag, usize),
    /// The closing tag of the open command, of this many bytes.
    Close(usize),
    /// The text ends inside what may still become a tag.
    Partial,
    /// Ordinary text.
    Text,
}

/// A whole opening tag.
struct OpenTag {
    kind: TagKind,
    attributes: Vec<Attribute>,
    /// `<NAME …/>`: a whole command by itself.
    self_closing: bool,
}

/// What is at the start of a line.
enum LineStart {
    /// A fence marker: its character and run length.
    Fence(u8, usize),
    /// Not a fence marker.
    Text,
    /// The text ends before this can be told.
    Undecided,
}

impl ShellTagDetector {
    /// A detector at the start of a text, no command open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk of the model's text; pushes every command whose closing tag
    /// arrived in it onto `out`, in order.
    pub fn feed(&mut self, chunk: &str, out: &mut Vec<DetectedCommand>) {
        let held = std::mem::take(&mut self.held);
        let base = self.fed - held.len();
        self.fed += chunk.len();
        if held.is_empty() {
            self.scan(chunk, base, out);
        } else {
            let mut joined = held + chunk;
            self.scan(&joined, base, out);
            if self.held.is_empty() && joined.capacity() <= KEEP_CAPACITY {
                // Keep the buffer for the next held tail (no allocation per partial tag).
                joined.clear();
                self.held = joined;
            }
        }
    }

    /// Scans `text`, which starts at offset `base` of the whole text.
    fn scan(&mut self, text: &str, base: usize, out: &mut Vec<DetectedCommand>) {
        let bytes = text.as_bytes();
        let mut pos = 0;
        let mut copy_from = 0;
        loop {
            if self.open.is_none() && self.line_start {
                match line_start(bytes.get(pos..).unwrap_or_default()) {
                    LineStart::Undecided => {
                        self.hold(text, pos);
                        return;
                    }
                    LineStart::Fence(ch, len) => self.fence_line(ch, len),
                    LineStart::Text => {}
                }
                self.line_start = false;
            }
            let rest = bytes.get(pos..).unwrap_or_default();
            let next = if self.open.is_some() {
                memchr::memchr(b'<', rest)
            } else if self.fence.is_some() {
                memchr::memchr(b'\n', rest)
            } else {
                memchr::memchr2(b'<', b'\n', rest)
            };
            let Some(at) = next.map(|i| pos + i) else {
                break;
            };
            if bytes.get(at) == Some(&b'\n') {
                pos = at + 1;
                self.line_start = true;
                continue;
            }
            match self.tag_at(bytes.get(at..).unwrap_or_default()) {
                TagMatch::Open(tag, len) => {
                    pos = at + len;
                    copy_from = pos;
                    self.opened(tag, base + at, base + pos, out);
                }
                TagMatch::Close(len) => {
                    self.content
                        .push_str(text.get(copy_from..at).unwrap_or_default());
                    pos = at + len;
                    copy_from = pos;
                    self.closed(base + pos, out);
                }
                TagMatch::Partial => {
                    if self.open.is_some() {
                        self.content
                            .push_str(text.get(copy_from..at).unwrap_or_default());
                    }
                    self.hold(text, at);
                    return;
                }
                TagMatch::Text => pos = at + 1,
            }
        }
        if self.open.is_some() {
            self.content
                .push_str(text.get(copy_from..).unwrap_or_default());
        }
    }

    /// Keeps `text[from..]` for the next chunk.
    fn hold(&mut self, text: &str, from: usize) {
        self.held.push_str(text.get(from..).unwrap_or_default());
    }

    /// A fence marker line outside commands: opens a fence, or closes the open one when
    /// it is made of the same character, at least as long.
    fn fence_line(&mut self, ch: u8, len: usize) {
        self.fence = match self.fence {
            None => Some((ch, len)),
            Some((open, open_len)) if open == ch && len >= open_len => None,
            still => still,
        };
    }

    /// What the text at a `<` is, given what is looked for now.
    fn tag_at(&self, here: &[u8]) -> TagMatch {
        if let Some((_, kind, _)) = &self.open {
            let tag = kind.close_tag().as_bytes();
            return if here.starts_with(tag) {
                TagMatch::Close(tag.len())
            } else if here.len() < tag.len() && tag.starts_with(here) {
                TagMatch::Partial
            } else {
                TagMatch::Text
            };
        }
        for kind in TagKind::ALL {
            let prefix = kind.open_prefix().as_bytes();
            if here.starts_with(prefix) {
                return open_tag(kind, here);
            }
            if here.len() < prefix.len() && prefix.starts_with(here) {
                return TagMatch::Partial;
            }
        }
        TagMatch::Text
    }

    /// Ends the text. Returns the byte offset of an unterminated opening tag if one is
    /// open (its content is ignored and logged with `tracing::debug!`).
    ///
    /// The detector is then back at the start of a new text (offsets from 0 again).
    pub fn finish(&mut self) -> Option<usize> {
        let open = self.open.as_ref().map(|(start, _, _)| *start);
        if let Some(start) = open {
            debug!(
                start,
                content_bytes = self.content.len() + self.held.len(),
                "unterminated command at the end of the text: ignored"
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

    /// A whole opening tag spans `start..end` of the text: opens a command, or reports
    /// it at once when the tag closes itself.
    fn opened(&mut self, tag: OpenTag, start: usize, end: usize, out: &mut Vec<DetectedCommand>) {
        self.open = Some((start, tag.kind, tag.attributes));
        if tag.self_closing {
            self.closed(end, out);
        }
    }

    /// The open command's closing tag ends at `end`: reports it unless it is blank.
    fn closed(&mut self, end: usize, out: &mut Vec<DetectedCommand>) {
        let Some((start, kind, attributes)) = self.open.take() else {
            return;
        };
        let command = self.content.trim();
        if command.is_empty() && kind.skips_blank() {
            debug!(start, end, "empty command: skipped");
        } else {
            out.push(DetectedCommand {
                kind,
                command: command.to_owned(),
                attributes,
                start,
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

/// The opening tag of `kind` that `here` starts with (it starts with `<NAME`), per the
/// grammar: a whole tag, a tag the text may still complete, or text.
fn open_tag(kind: TagKind, here: &[u8]) -> TagMatch {
    let mut state = OpenState::AfterName;
    let mut attributes = Vec::new();
    let mut name_at = 0;
    let mut value_at = 0;
    let from = kind.open_prefix().len();
    for (i, &b) in here.iter().enumerate().skip(from).take(MAX_OPEN_TAG - from) {
        if b == b'<' || b == b'\n' || b == b'\r' {
            return TagMatch::Text;
        }
        let blank = b == b' ' || b == b'\t';
        state = match state {
            OpenState::AfterName | OpenState::AfterValue => match b {
                _ if blank => OpenState::Space,
                b'>' => return whole(kind, attributes, i, false),
                b'/' => OpenState::Slash,
                _ => return TagMatch::Text,
            },
            OpenState::Space => match b {
                _ if blank => OpenState::Space,
                b'>' => return whole(kind, attributes, i, false),
                b'/' => OpenState::Slash,
                _ if b.is_ascii_alphabetic() => {
                    name_at = i;
                    OpenState::Name
                }
                _ => return TagMatch::Text,
            },
            OpenState::Name => match b {
                _ if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' => OpenState::Name,
                b'=' => {
                    value_at = i + 1;
                    OpenState::Equals
                }
                _ => {
                    attributes.push(attribute(here, name_at, i, None));
                    match b {
                        _ if blank => OpenState::Space,
                        b'>' => return whole(kind, attributes, i, false),
                        b'/' => OpenState::Slash,
                        _ => return TagMatch::Text,
                    }
                }
            },
            OpenState::Equals => match b {
                b'"' | b'\'' => {
                    value_at = i + 1;
                    OpenState::Quoted(b)
                }
                _ if unquoted(b) => OpenState::Unquoted,
                _ => return TagMatch::Text,
            },
            OpenState::Quoted(quote) if b == quote => {
                let value = Some((value_at, i));
                attributes.push(attribute(here, name_at, value_at - 2, value));
                OpenState::AfterValue
            }
            OpenState::Quoted(quote) => OpenState::Quoted(quote),
            OpenState::Unquoted if unquoted(b) => OpenState::Unquoted,
            OpenState::Unquoted => {
                let value = Some((value_at, i));
                attributes.push(attribute(here, name_at, value_at - 1, value));
                match b {
                    _ if blank => OpenState::Space,
                    b'>' => return whole(kind, attributes, i, false),
                    b'/' => OpenState::Slash,
                    _ => return TagMatch::Text,
                }
            }
            OpenState::Slash if b == b'>' => return whole(kind, attributes, i, true),
            OpenState::Slash => return TagMatch::Text,
        };
    }
    if here.len() < MAX_OPEN_TAG {
        TagMatch::Partial
    } else {
        TagMatch::Text
    }
}

/// Where the scan of an opening tag is.
#[derive(Clone, Copy)]
enum OpenState {
    /// Just after `<NAME`.
    AfterName,
    /// In blanks between attributes.
    Space,
    /// In an attribute's name.
    Name,
    /// Just after `name=`.
    Equals,
    /// In a value quoted with this byte.
    Quoted(u8),
    /// In an unquoted value.
    Unquoted,
    /// Just after a quoted value's closing quote.
    AfterValue,
    /// Just after a `/`: only `>` may follow.
    Slash,
}

/// A byte an unquoted value may hold.
fn unquoted(b: u8) -> bool {
    !matches!(
        b,
        b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'\'' | b'<' | b'>' | b'=' | b'/'
    )
}

/// The attribute whose name spans `name_at..name_end` of `here`, with the value spanning
/// `value` (the tag holds no `<`, and its bytes so far were checked, so every index is
/// in range and on a character boundary).
fn attribute(
    here: &[u8],
    name_at: usize,
    name_end: usize,
    value: Option<(usize, usize)>,
) -> Attribute {
    let text = |from: usize, to: usize| {
        String::from_utf8_lossy(here.get(from..to).unwrap_or_default()).into_owned()
    };
    Attribute {
        name: text(name_at, name_end),
        value: value.map(|(from, to)| text(from, to)),
    }
}

/// The opening tag ends with the `>` at `gt`.
fn whole(kind: TagKind, attributes: Vec<Attribute>, gt: usize, self_closing: bool) -> TagMatch {
    let tag = OpenTag {
        kind,
        attributes,
        self_closing,
    };
    TagMatch::Open(tag, gt + 1)
}

/// Whether a line starting with `line` is a fence marker: any indentation (spaces, tabs),
/// then three or more backticks or tildes.
fn line_start(line: &[u8]) -> LineStart {
    let indent = line
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let Some(&ch) = line.get(indent) else {
        return LineStart::Undecided;
    };
    if ch != b'`' && ch != b'~' {
        return LineStart::Text;
    }
    let rest = line.get(indent..).unwrap_or_default();
    let run = rest.iter().take_while(|&&b| b == ch).count();
    if run == rest.len() {
        // The run may go on in the next chunk.
        return LineStart::Undecided;
    }
    if run >= 3 {
        LineStart::Fence(ch, run)
    } else {
        LineStart::Text
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The reference (for texts without fences), by regular expression: the earliest
    /// opening tag of any kind (at most [`MAX_OPEN_TAG`] bytes), then the first closing
    /// tag of its kind after it; blank `<shell>`/`<ask>` dropped; an opening tag never
    /// closed is the unterminated one (it takes the rest of the text).
    fn reference(text: &str) -> (Vec<DetectedCommand>, Option<usize>) {
        let open = regex::Regex::new(&format!("^(?:{OPEN_TAG_PATTERN})")).unwrap();
        let attribute = regex::Regex::new(ATTRIBUTE_PATTERN).unwrap();
        let mut commands = Vec::new();
        let mut pos = 0;
        while let Some(i) = text[pos..].find('<') {
            let start = pos + i;
            let found = open
                .captures(&text[start..])
                .filter(|c| c[0].len() <= MAX_OPEN_TAG);
            let Some(tag) = found else {
                pos = start + 1;
                continue;
            };
            let kind = TagKind::ALL
                .into_iter()
                .find(|k| k.name() == &tag[1])
                .unwrap();
            let attributes = attribute
                .captures_iter(&tag[2])
                .map(|a| Attribute {
                    name: a[1].to_owned(),
                    value: a
                        .get(2)
                        .or(a.get(3))
                        .or(a.get(4))
                        .map(|v| v.as_str().to_owned()),
                })
                .collect();
            let from = start + tag[0].len();
            let (content, end) = if &tag[3] == "/" {
                ("", from)
            } else {
                let Some(i) = text[from..].find(kind.close_tag()) else {
                    return (commands, Some(start));
                };
                (&text[from..from + i], from + i + kind.close_tag().len())
            };
            let command = content.trim();
            if !command.is_empty() || !kind.skips_blank() {
                commands.push(DetectedCommand {
                    kind,
                    command: command.to_owned(),
                    attributes,
                    start,
                    end,
                });
            }
            pos = end;
        }
        (commands, None)
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
            kind: TagKind::Shell,
            command: command.to_owned(),
            attributes: Vec::new(),
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
        "<ask>which file?</ask>",
        "<shell>ls</shell> then <ask> Proceed? </ask> and <shell>pwd</shell>",
        "<shell>echo '<ask>x</ask>'</shell>",
        "<ask>run <shell>ls</shell>?</ask>",
        "<as>x</as> <ask >y</ask> <ask>unterminated",
        "<shell>open <ask>x</ask> still open",
        "<shell background>npm run dev</shell>",
        "<shell background ready=\"listening on\" port=8000>python3 -m http.server</shell>",
        "<process-output id=\"p1\"/> <process-kill id='p1' signal=INT />",
        "<process-input id=p1>y</process-input><process-input id=\"p2\" key=\"ctrl-c\"/>",
        "<process-output>p1</process-output><process-kill>p2</process-kill>",
        "<process-output id=\"p1\"> never closed",
        "<shell a=\"x\"b>no</shell> <shell a=>no</shell> <shell a = 1>no</shell>",
        "<shell a=\"x<y\">no</shell> <shell a=\"x>y\">yes</shell>",
        "<shell/> <ask /> <process-output/> <shell / >x</shell>",
        "<shell\tbackground\t>x</shell> <shell\nbackground>x</shell>",
        "<process-outputs id=p1/> <process-input-x/> <process- output/>",
        "<shell background>a <process-kill id=p1/> b</shell>",
        "<shell é=1>x</shell> <shell a=é>é</shell> <shell a='日本'>x</shell>",
    ];

    #[test]
    fn whole_text_matches_the_reference() {
        for text in CASES {
            assert_eq!(run(&[text]), reference(text), "{text:?}");
        }
    }

    #[test]
    fn every_split_point_matches_the_reference() {
        for text in CASES {
            let expected = reference(text);
            for i in boundaries(text) {
                let (a, b) = text.split_at(i);
                assert_eq!(run(&[a, b]), expected, "{a:?} + {b:?}");
            }
        }
    }

    #[test]
    fn every_pair_of_split_points_matches_the_reference() {
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
    fn char_by_char_matches_the_reference() {
        for text in CASES {
            let chars: Vec<String> = text.chars().map(String::from).collect();
            let chunks: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_eq!(run(&chunks), reference(text), "{text:?}");
        }
    }

    #[test]
    fn random_texts_and_splits_match_the_reference() {
        // Texts built from fragments that make and break tags, cut at random points.
        const PIECES: &[&str] = &[
            "<",
            ">",
            "/",
            "s",
            "h",
            "e",
            "l",
            " ",
            "\n",
            "x",
            "é",
            "🦀",
            "<shell>",
            "</shell>",
            "<sh",
            "ell>",
            "</sh",
            "<she",
            "ll",
            "</",
            "<shel>",
            "<ask>",
            "</ask>",
            "<a",
            "sk>",
            "<shell",
            " background",
            "=",
            "\"",
            "'",
            "id",
            "p1",
            "/>",
            "<process-kill",
            "<process-output",
            "<process-input",
            "</process-input>",
            "</process-output>",
            "\t",
            "ready",
            "<process-",
            "-",
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
            "<shell\n>ls</shell>",
            "<shell a=\"x\"b>ls</shell>",
            "<shell a=>ls</shell>",
            "<shell a = \"x\">ls</shell>",
            "<shell 1=x>ls</shell>",
            "<shell a=\"<\">ls</shell>",
            "<shell/ >ls</shell>",
            "<process-outputs id=p1/>",
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

    fn attr(name: &str, value: Option<&str>) -> Attribute {
        Attribute {
            name: name.to_owned(),
            value: value.map(str::to_owned),
        }
    }

    #[test]
    fn attributes_are_reported_as_written() {
        let found = split_invariant(
            "<shell background ready=\"Serving HTTP on\" port=8000 x='a b'>python3 -m http.server</shell>",
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].command, "python3 -m http.server");
        assert_eq!(
            found[0].attributes,
            [
                attr("background", None),
                attr("ready", Some("Serving HTTP on")),
                attr("port", Some("8000")),
                attr("x", Some("a b")),
            ]
        );
        // A quoted value may hold `>`; `<` or a line break in a tag makes it text.
        let found = split_invariant("<shell ready=\"=> ok\">x</shell>");
        assert_eq!(found[0].attributes, [attr("ready", Some("=> ok"))]);
    }

    #[test]
    fn self_closing_and_process_tags() {
        let text = "<process-output id=\"p1\"/> then <process-input id=p1>y</process-input>\
                    <process-kill id='p1' />";
        let found = split_invariant(text);
        let kinds: Vec<TagKind> = found.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [
                TagKind::ProcessOutput,
                TagKind::ProcessInput,
                TagKind::ProcessKill
            ]
        );
        assert_eq!((found[0].start, found[0].end), (0, 25));
        assert_eq!(found[0].command, "");
        assert_eq!(found[1].command, "y");
        assert_eq!(found[2].attributes, [attr("id", Some("p1"))]);
        // Blank process tags are reported (the loop says what is missing); blank shells
        // are not.
        assert_eq!(
            split_invariant("<shell/><ask></ask><process-kill/>").len(),
            1
        );
    }

    #[test]
    fn an_opening_tag_longer_than_the_limit_is_text() {
        let fits = format!("<shell a=\"{}\">x</shell>", "v".repeat(MAX_OPEN_TAG - 12));
        let whole = run(&[&fits]);
        assert_eq!(whole.0.len(), 1);
        for at in (0..fits.len()).step_by(7) {
            assert_eq!(run(&[&fits[..at], &fits[at..]]), whole);
        }
        let long = format!("<shell a=\"{}\">x</shell>", "v".repeat(MAX_OPEN_TAG - 11));
        assert_eq!(run(&[&long]), (vec![], None));
        // Never more than the limit is held between chunks.
        let mut detector = ShellTagDetector::new();
        let mut out = Vec::new();
        detector.feed(&long[..MAX_OPEN_TAG + 5], &mut out);
        assert!(detector.held.len() <= MAX_OPEN_TAG);
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

    /// Commands of `text` fed whole, and fed split at every pair of points: all the same.
    fn split_invariant(text: &str) -> Vec<DetectedCommand> {
        let whole = run(&[text]);
        let points = boundaries(text);
        for (n, &i) in points.iter().enumerate() {
            for &j in points.get(n..).unwrap_or_default() {
                let chunks = [&text[..i], &text[i..j], &text[j..]];
                assert_eq!(run(&chunks), whole, "{chunks:?}");
            }
        }
        whole.0
    }

    fn commands(text: &str) -> Vec<String> {
        split_invariant(text)
            .into_iter()
            .map(|c| c.command)
            .collect()
    }

    #[test]
    fn tags_inside_code_fences_are_shown_not_run() {
        assert_eq!(
            commands("To list:\n```bash\n<shell>ls</shell>\n```\nNow: <shell>pwd</shell>"),
            ["pwd"]
        );
        assert_eq!(
            commands("~~~\n<ask>q</ask>\n~~~\n<ask>real</ask>"),
            ["real"]
        );
        assert_eq!(
            commands("  ```\n<shell>ls</shell>\n  ```\n<shell>x</shell>"),
            ["x"]
        );
        // A fence is closed only by a run of the same character, at least as long.
        assert_eq!(
            commands("````\n```\n<shell>a</shell>\n~~~\n````\n<shell>b</shell>"),
            ["b"]
        );
        // An unclosed fence hides the rest of the reply.
        assert_eq!(
            commands("```\n<shell>rm -rf x</shell>"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn fence_markers_inside_commands_are_content() {
        assert_eq!(
            commands("<shell>cat > a.md <<'EOF'\n```\ncode\n```\nEOF</shell>\n<shell>ls</shell>"),
            ["cat > a.md <<'EOF'\n```\ncode\n```\nEOF", "ls"]
        );
        // Backticks that are not at a line start, or fewer than three, open nothing.
        assert_eq!(commands("say `ls` or ``x``\n``\n<shell>ls</shell>"), ["ls"]);
        assert_eq!(commands("a ```\n<shell>ls</shell>"), ["ls"]);
    }

    #[test]
    fn questions_are_told_apart_from_commands() {
        let found = split_invariant("<shell>ls</shell><ask>Which one?</ask>");
        let kinds: Vec<TagKind> = found.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, [TagKind::Shell, TagKind::Ask]);
        assert_eq!(found[1].command, "Which one?");
        assert_eq!((found[1].start, found[1].end), (17, 38));
    }
}
