//! A lenient parser for a unified diff of one file.
//!
//! Tolerates what models write: wrong or missing hunk counts (they are recomputed from
//! the body), bare `@@` headers, missing `---`/`+++` headers, `diff --git`/`index`/mode
//! noise, prose before the diff, a Markdown fence around it, CRLF patch text, and blank
//! lines where an empty context line lost its leading space.

mod body;
mod header;
mod model;
#[cfg(test)]
mod tests;

pub(crate) use model::{recount_note, Hunk, HunkLine, Kind, ParsedPatch, Target};

use super::error::{quote, PatchError};
use body::{
    blank_is_added, check_sides, mark_missing_newline, needs_more_lines, trim_trailing_blanks,
};
use header::{header_name, parse_header};

/// Path that stands for "no file" in `---`/`+++` headers.
const DEV_NULL: &str = "/dev/null";

/// Lines that may sit between or after hunks (git metadata, Markdown fences); one of them
/// ends the hunk before it.
const NOISE_PREFIXES: &[&str] = &[
    "diff ",
    "index ",
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "Binary files ",
    "GIT binary patch",
    "Index: ",
    "Only in ",
    "====",
    "```",
];

/// One `---`/`+++` header pair.
#[derive(Debug, Clone, Copy)]
struct Section<'p> {
    old: Option<&'p str>,
    new: Option<&'p str>,
    line: usize,
}

impl<'p> Section<'p> {
    /// The file this section is about: the new name, or the old one when deleting.
    fn name(&self) -> Option<&'p str> {
        match (self.old, self.new) {
            (_, Some(new)) if new != DEV_NULL => Some(new),
            (Some(old), _) if old != DEV_NULL => Some(old),
            _ => None,
        }
    }
}

/// Parses `patch` as a unified diff of one file.
pub(crate) fn parse(patch: &str) -> Result<ParsedPatch<'_>, PatchError> {
    let (lines, crlf) = split_lines(patch);
    let mut parser = Parser {
        lines,
        pos: 0,
        sections: Vec::new(),
        hunks: Vec::new(),
    };
    parser.run()?;
    parser.finish(crlf)
}

/// The patch's lines without line endings (a final fence and what follows it dropped),
/// and whether most of them ended in `\r\n`.
fn split_lines(patch: &str) -> (Vec<&str>, bool) {
    let mut crlf = 0usize;
    let mut lines: Vec<&str> = patch
        .split_inclusive('\n')
        .map(|raw| {
            let line = raw.strip_suffix('\n').unwrap_or(raw);
            match line.strip_suffix('\r') {
                Some(stripped) => {
                    crlf += 1;
                    stripped
                }
                None => line,
            }
        })
        .collect();
    let is_crlf = crlf * 2 > lines.len();
    let last_text = lines.iter().rposition(|l| !l.trim().is_empty());
    if let Some(last) = last_text {
        if is_closing_fence(&lines, last) {
            lines.truncate(last);
        }
    }
    (lines, is_crlf)
}

/// Whether line `last` closes a Markdown fence: it starts with backticks, and either not
/// with a space or an opening fence comes before the first hunk. Without an opening
/// fence, a space then backticks is a context line: a Markdown file's own fence (fuzz
/// finding: the line was dropped, and an insertion before it went after it).
fn is_closing_fence(lines: &[&str], last: usize) -> bool {
    let is_fence = |l: &&str| l.trim_start().starts_with("```");
    let Some(line) = lines.get(last) else {
        return false;
    };
    if !is_fence(line) {
        return false;
    }
    !line.starts_with(' ')
        || lines
            .iter()
            .take_while(|l| !l.starts_with("@@"))
            .any(is_fence)
}

struct Parser<'p> {
    lines: Vec<&'p str>,
    pos: usize,
    sections: Vec<Section<'p>>,
    hunks: Vec<Hunk<'p>>,
}

impl<'p> Parser<'p> {
    fn run(&mut self) -> Result<(), PatchError> {
        while let Some(&line) = self.lines.get(self.pos) {
            if line.starts_with("@@") {
                let hunk = self.hunk()?;
                self.hunks.push(hunk);
            } else if line.starts_with("--- ") || line.starts_with("+++ ") {
                self.file_header(line);
            } else {
                // Preamble, git metadata, noise between file sections.
                self.pos += 1;
            }
        }
        Ok(())
    }

    /// A `---` line with its `+++` line, or a lone `+++` line.
    fn file_header(&mut self, line: &'p str) {
        let mut section = Section {
            old: None,
            new: None,
            line: self.pos + 1,
        };
        self.pos += 1;
        if let Some(rest) = line.strip_prefix("--- ") {
            section.old = Some(header_name(rest));
            let next = self
                .lines
                .get(self.pos)
                .and_then(|l| l.strip_prefix("+++ "));
            if let Some(rest) = next {
                section.new = Some(header_name(rest));
                self.pos += 1;
            }
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            section.new = Some(header_name(rest));
        }
        self.sections.push(section);
    }

    /// Whether a `---` line followed by a `+++` line starts at `pos`.
    fn file_header_at(&self, pos: usize) -> bool {
        let is = |i: usize, prefix: &str| self.lines.get(i).is_some_and(|l| l.starts_with(prefix));
        is(pos, "--- ") && is(pos + 1, "+++ ")
    }

    /// Whether a `---`/`+++` pair at `self.pos`, inside `hunk`, is the next file's
    /// header rather than a removed line `-- …` and an added line `++ …` (SQL comments,
    /// `++ x`): only when the hunk already has the lines its header counts (or states
    /// none) and a hunk header follows the pair, as it does after every real file header.
    fn next_file_starts(&self, hunk: &Hunk<'p>) -> bool {
        self.file_header_at(self.pos)
            && !needs_more_lines(hunk)
            && self
                .lines
                .get(self.pos + 2)
                .is_some_and(|l| l.starts_with("@@"))
    }

    /// The hunk whose header is at `self.pos`.
    fn hunk(&mut self) -> Result<Hunk<'p>, PatchError> {
        let header_line = self.pos + 1;
        let text = self.lines.get(self.pos).copied().unwrap_or_default();
        let header = parse_header(text, header_line)?;
        let number = self.hunks.len() + 1;
        self.pos += 1;
        let mut hunk = Hunk {
            number,
            header: header.text,
            line: header_line,
            old_start: header.old_start,
            new_start: header.new_start,
            stated_counts: header.counts,
            lines: Vec::new(),
            old_missing_newline: false,
            new_missing_newline: false,
        };
        let blanks = self.body(&mut hunk, header_line)?;
        trim_trailing_blanks(&mut hunk, blanks);
        if hunk.lines.is_empty() {
            return Err(PatchError::invalid(
                header_line,
                format!("hunk #{number} has no lines after its header"),
            ));
        }
        Ok(hunk)
    }

    /// Reads the body lines of `hunk`; returns how many completely empty lines end it.
    fn body(&mut self, hunk: &mut Hunk<'p>, header_line: usize) -> Result<usize, PatchError> {
        let mut blanks = 0;
        while let Some(&line) = self.lines.get(self.pos) {
            if line.starts_with("@@") || self.next_file_starts(hunk) {
                break;
            }
            let tail = line.get(1..).unwrap_or_default();
            let kind = match line.as_bytes().first() {
                // An empty line is an empty context line that lost its space, or an added
                // empty line that lost its `+` when the header says there are no old lines.
                None if blank_is_added(hunk) => Kind::Add,
                None | Some(b' ') => Kind::Context,
                Some(b'-') => Kind::Remove,
                Some(b'+') => Kind::Add,
                Some(b'\\') => {
                    mark_missing_newline(hunk);
                    self.pos += 1;
                    blanks = 0;
                    continue;
                }
                _ if is_noise(line) => break,
                _ => return Err(bad_body_line(line, self.pos + 1, hunk.number, header_line)),
            };
            blanks = if line.is_empty() { blanks + 1 } else { 0 };
            hunk.lines.push(HunkLine { kind, text: tail });
            self.pos += 1;
        }
        Ok(blanks)
    }

    fn finish(self, crlf: bool) -> Result<ParsedPatch<'p>, PatchError> {
        let target = self.target()?;
        let mut hunks = self.hunks;
        check_sides(&mut hunks, target)?;
        Ok(ParsedPatch {
            target,
            hunks,
            crlf,
        })
    }

    /// Create/modify/delete from the headers; rejects patches naming two files.
    fn target(&self) -> Result<Target, PatchError> {
        let mut first: Option<&str> = None;
        for section in &self.sections {
            match (first, section.name()) {
                (None, name) => first = name,
                (Some(a), Some(b)) if a != b => {
                    return Err(PatchError::MultipleFiles {
                        first: a.to_owned(),
                        second: b.to_owned(),
                    })
                }
                _ => {}
            }
        }
        let creates = self.sections.iter().find(|s| s.old == Some(DEV_NULL));
        let deletes = self.sections.iter().find(|s| s.new == Some(DEV_NULL));
        match (creates, deletes) {
            (Some(s), Some(_)) => Err(PatchError::invalid(
                s.line,
                "both `---` and `+++` name /dev/null: the patch neither has an old nor a new file",
            )),
            (Some(_), None) => Ok(Target::Create),
            (None, Some(_)) => Ok(Target::Delete),
            (None, None) => Ok(Target::Modify),
        }
    }
}

fn bad_body_line(line: &str, line_no: usize, hunk: usize, header_line: usize) -> PatchError {
    PatchError::invalid(
        line_no,
        format!(
            "{} is not a hunk line (hunk #{hunk} starts at line {header_line}): every line \
             of a hunk starts with ' ' (context), '-' (removed) or '+' (added); a context \
             line keeps its leading space",
            quote(line)
        ),
    )
}

fn is_noise(line: &str) -> bool {
    NOISE_PREFIXES.iter().any(|p| line.starts_with(p))
}
