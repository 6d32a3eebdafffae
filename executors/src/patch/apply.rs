//! Placing hunks and building the patched text in one pass.
//!
//! Hunks are placed in order. Each one is searched for at the line its header states
//! (shifted by the offset at which the previous hunk applied), then outward, then with the
//! bounded fuzzy fallback. As soon as a hunk is placed its edits are streamed into the
//! output: the untouched file text before each edit is copied with one `push_str`, removed
//! lines are skipped, added lines are written. The total cost is linear in the file size
//! plus the patch size (plus the search distance of hunks that moved).
//!
//! A later hunk must start after the last line an earlier hunk removed and must not put
//! lines before an earlier hunk's insertion; it may share context lines with it.

use super::diagnose::{hunk_failed, Attempt};
use super::error::PatchError;
use super::file::FileText;
use super::fuzzy::{find_fuzzy, Fuzz};
use super::parse::{recount_note, Hunk, Kind};
use super::search::{find_exact, PreImage};

/// What [`apply_hunks`] produced.
#[derive(Debug)]
pub(crate) struct Applied {
    /// The patched text.
    pub text: String,
    /// Offsets, fuzzy matches and other repairs, one note each.
    pub notes: Vec<String>,
    /// How many lines of the original the patch did not remove.
    pub kept_lines: usize,
    /// 0-based index of the first original line the patch did not remove (if any).
    pub first_kept: Option<usize>,
}

/// How hunks may be placed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Allow the fuzzy fallback (off for deletions, which must match exactly).
    pub fuzzy: bool,
    /// Line ending for added lines when the file has none of its own.
    pub default_eol: &'static str,
}

/// Applies `hunks` to `file`.
pub(crate) fn apply_hunks(
    file: &FileText<'_>,
    hunks: &[Hunk<'_>],
    options: Options,
) -> Result<Applied, PatchError> {
    let mut applier = Applier {
        file,
        eol: file.eol().unwrap_or(options.default_eol),
        fuzzy: options.fuzzy,
        out: String::with_capacity(file.text().len() + 256),
        cursor: 0,
        removed_end: 0,
        op_end: 0,
        offset: 0,
        removed: 0,
        removed_prefix: 0,
        eof_newline: None,
        notes: Vec::new(),
    };
    for hunk in hunks {
        applier.hunk(hunk)?;
    }
    Ok(applier.finish())
}

struct Applier<'f, 'a> {
    file: &'f FileText<'a>,
    eol: &'static str,
    fuzzy: bool,
    out: String,
    /// Byte offset in the original up to which it has been copied or skipped.
    cursor: usize,
    /// Line index just past the last removed line.
    removed_end: usize,
    /// Line index of the last edit (past the last removed line, or the last insertion point).
    op_end: usize,
    /// Where the previous hunk applied relative to its header.
    offset: isize,
    /// Lines removed so far.
    removed: usize,
    /// Lines removed contiguously from the start of the file.
    removed_prefix: usize,
    /// What the patch says about the final newline, if anything.
    eof_newline: Option<bool>,
    notes: Vec<String>,
}

impl Applier<'_, '_> {
    fn hunk(&mut self, hunk: &Hunk<'_>) -> Result<(), PatchError> {
        self.notes.extend(recount_note(hunk));
        let pre = PreImage::new(hunk);
        let lo = self.removed_end.max(self.op_end.saturating_sub(pre.lead));
        let stated = hunk.old_start.map(|start| match pre.len() {
            // `-5,0` means "after line 5"; `-5,3` starts at line 5.
            0 => start,
            _ => start.saturating_sub(1),
        });
        let expected = stated.map_or(lo, |s| s.saturating_add_signed(self.offset));
        let attempt = Attempt { expected, lo };
        let (pos, fuzz) = self.locate(hunk, &pre, &attempt)?;
        self.note_placement(hunk, stated, pos, fuzz);
        if let Some(stated) = stated {
            self.offset = pos as isize - stated as isize;
        }
        self.emit(hunk, pos);
        self.end_of_file(hunk, pos + pre.len() == self.file.len());
        Ok(())
    }

    /// Where the hunk applies: exactly (nearest first), else fuzzily, else an error.
    fn locate(
        &self,
        hunk: &Hunk<'_>,
        pre: &PreImage<'_>,
        attempt: &Attempt,
    ) -> Result<(usize, Option<Fuzz>), PatchError> {
        let lines = self.file.lines();
        if pre.is_empty() {
            return self.insertion_point(hunk, attempt);
        }
        if let Some(pos) = find_exact(lines, &pre.texts, attempt.expected, attempt.lo) {
            return Ok((pos, None));
        }
        if self.fuzzy {
            if let Some((pos, fuzz)) = find_fuzzy(lines, pre, attempt.expected, attempt.lo) {
                return Ok((pos, Some(fuzz)));
            }
        }
        Err(hunk_failed(lines, hunk, pre, attempt))
    }

    /// A hunk without context or removed lines goes where its header says.
    fn insertion_point(
        &self,
        hunk: &Hunk<'_>,
        attempt: &Attempt,
    ) -> Result<(usize, Option<Fuzz>), PatchError> {
        let len = self.file.len();
        if hunk.old_start.is_none() && len > 0 {
            return Err(PatchError::invalid(
                hunk.line,
                format!(
                    "hunk #{} only adds lines and has no line numbers, so nothing tells where \
                     to insert them: add a few context lines (' ') or a header like \
                     `@@ -5,0 +6,2 @@`",
                    hunk.number
                ),
            ));
        }
        Ok((attempt.expected.max(attempt.lo).min(len), None))
    }

    fn note_placement(
        &mut self,
        hunk: &Hunk<'_>,
        stated: Option<usize>,
        pos: usize,
        fuzz: Option<Fuzz>,
    ) {
        if self.file.len() == 0 {
            // Creating or filling an empty file: there is nothing to be off from.
            return;
        }
        let number = hunk.number;
        let mut note = match stated {
            Some(stated) if pos != stated => {
                let offset = pos as isize - stated as isize;
                let unit = if offset.abs() == 1 { "line" } else { "lines" };
                format!("hunk #{number} applied at offset {offset:+} {unit}")
            }
            Some(_) => format!("hunk #{number} applied"),
            None if hunk.lines.iter().all(|l| l.kind == Kind::Add) => return,
            None => format!(
                "hunk #{number} (no line numbers) applied at line {}",
                pos + 1
            ),
        };
        match fuzz {
            Some(fuzz) => note.push_str(&format!(" with fuzzy matching ({})", fuzz.describe())),
            None if stated == Some(pos) => return,
            None => {}
        }
        self.notes.push(note);
    }

    /// Streams the hunk's edits at `pos` into the output.
    fn emit(&mut self, hunk: &Hunk<'_>, pos: usize) {
        let mut line = pos;
        for hunk_line in &hunk.lines {
            match hunk_line.kind {
                Kind::Context => line += 1,
                Kind::Remove => {
                    self.copy_to(line);
                    self.cursor = self.file.start(line + 1);
                    if line == self.removed_prefix {
                        self.removed_prefix += 1;
                    }
                    self.removed += 1;
                    line += 1;
                    self.removed_end = line;
                    self.op_end = line;
                }
                Kind::Add => {
                    self.copy_to(line);
                    self.push_line(hunk_line.text);
                    self.op_end = line;
                }
            }
        }
    }

    /// Copies the original text up to the start of line `line`.
    fn copy_to(&mut self, line: usize) {
        let start = self.file.start(line);
        debug_assert!(start >= self.cursor, "hunk edits out of order");
        if start > self.cursor {
            self.out.push_str(self.file.slice(self.cursor, start));
            self.cursor = start;
        }
    }

    fn push_line(&mut self, text: &str) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            // The original's last line had no newline and now has lines after it.
            self.out.push_str(self.eol);
        }
        self.out.push_str(text);
        self.out.push_str(self.eol);
    }

    /// Records what a `\ No newline at end of file` marker says, if the hunk ends the file.
    fn end_of_file(&mut self, hunk: &Hunk<'_>, at_end: bool) {
        let marked = hunk.old_missing_newline || hunk.new_missing_newline;
        if !marked {
            return;
        }
        if !at_end {
            self.notes.push(format!(
                "ignored `\\ No newline at end of file` in hunk #{}: the hunk does not end at \
                 the end of the file",
                hunk.number
            ));
            return;
        }
        self.eof_newline = Some(!hunk.new_missing_newline);
    }

    fn finish(mut self) -> Applied {
        let text = self.file.text();
        self.out.push_str(self.file.slice(self.cursor, text.len()));
        // Without a marker in the patch, the file keeps its final-newline state.
        let wants_newline = self.eof_newline.unwrap_or(self.file.ends_with_newline());
        if wants_newline {
            if !self.out.is_empty() && !self.out.ends_with('\n') {
                self.out.push_str(self.eol);
            }
        } else if let Some(stripped) = self.out.strip_suffix('\n') {
            let keep = stripped.strip_suffix('\r').unwrap_or(stripped).len();
            self.out.truncate(keep);
        }
        let len = self.file.len();
        Applied {
            text: self.out,
            notes: self.notes,
            kept_lines: len - self.removed.min(len),
            first_kept: (self.removed_prefix < len).then_some(self.removed_prefix),
        }
    }
}
