//! `patch_roundtrip`: a file, an edit of it, the unified diff of that edit (written by
//! [`unified_diff`](super::unified_diff), in the styles models use) — applying the diff
//! to the file must give exactly the edited file.
//!
//! Input: a style byte, a context byte, a line-ending/final-newline byte, a shift byte,
//! then edits: each byte picks keep/delete/insert and a line from a vocabulary chosen to
//! look like diff syntax (`-- x`, `++ y`, `@@`, `\ No newline…`, fences, blank lines),
//! or a raw line taken from the next bytes.
//!
//! Properties (the file and the edited file differ):
//! - with exact line numbers, in every style (file headers or not, git metadata, a
//!   Markdown fence, no counts, empty context lines without their space, CRLF patch
//!   text, CRLF or LF file, with or without final newlines, creation from a missing
//!   file, deletion): the result is exactly the edited file, with one hunk per diff hunk;
//! - with shifted line numbers: the same, when every hunk's old side occurs exactly
//!   once in the file (otherwise only: no panic, a consistent answer);
//! - without counts, a hunk whose last lines are `--- x` `+++ y` right before the next
//!   `@@` is ambiguous (that is a file header): only no panic and a consistent answer.

use cmdr_executors::patch::{apply_patch, PatchedFile};

use super::input::Bytes;
use super::patch::check_applied;
use super::unified_diff::{hunk_ranges, side, unified_diff, Edit, Style};

/// Lines that look like diff syntax once prefixed, or are otherwise awkward.
const VOCABULARY: [&str; 24] = [
    "",
    " ",
    "a",
    "b",
    "c",
    "fn main() {",
    "}",
    "    let x = 1;",
    "\tindented",
    "a  b",
    "-- a",
    "++ b",
    "--- a",
    "+++ b",
    "- c",
    "+ d",
    "@@ -1 +1 @@",
    "\\ No newline at end of file",
    "```",
    "```diff",
    "diff --git a/x b/x",
    "index 1..2",
    "====",
    "é ü",
];

/// At most this many edits (keeps the search cost per input small).
const MAX_EDITS: usize = 400;

/// Checks every property on one input.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    let flags = input.byte();
    let context = usize::from(input.byte() % 5);
    let ends = input.byte();
    let shift_byte = input.byte() as i8;
    let mut edits = read_edits(&mut input);
    let crlf_file = ends & 1 == 1;
    let mut old_newline = ends & 2 == 0;
    let mut new_newline = ends & 4 == 0;
    normalise_ends(&mut edits, &mut old_newline, &mut new_newline);

    let old_lines = side(&edits, true);
    let new_lines = side(&edits, false);
    let eol = if crlf_file { "\r\n" } else { "\n" };
    let old_text = join(&old_lines, eol, old_newline);
    let mut style = Style {
        context,
        crlf: flags & 1 != 0,
        file_headers: flags & 2 != 0,
        git_metadata: flags & 4 != 0,
        fenced: flags & 8 != 0,
        no_counts: flags & 16 != 0,
        ..Style::default()
    };
    // Without counts, blank lines at the end of a hunk are ambiguous: keep their space.
    style.bare_blank_context = flags & 32 != 0 && !style.no_counts;
    style.create = flags & 64 != 0 && old_lines.is_empty();
    style.delete = flags & 64 != 0 && new_lines.is_empty() && !style.create;
    // A file without any line ending takes the patch's for its new lines.
    let new_eol = match (old_text.contains('\n'), style.crlf) {
        (true, _) => eol,
        (false, true) => "\r\n",
        (false, false) => "\n",
    };
    let new_text = join(&new_lines, new_eol, new_newline);
    if old_text == new_text {
        return;
    }
    let shifted = flags & 128 != 0 && shift_byte != 0;
    if shifted {
        style.shift = isize::from(shift_byte);
    }

    let patch = unified_diff(&edits, old_newline, new_newline, style);
    let original = (!style.create).then_some(old_text.as_str());
    let result = apply_patch(original, &patch);
    if let Ok(applied) = &result {
        check_applied(original, applied);
    }
    if shifted && !every_hunk_unique(&edits, context, &old_lines) {
        return;
    }
    if style.no_counts && header_lookalike_before_hunk(&patch) {
        // Without counts, `--- x` `+++ y` `@@` is a file header, whatever wrote it.
        return;
    }
    let expected = if style.create {
        PatchedFile::Created(new_text)
    } else if style.delete {
        PatchedFile::Deleted
    } else {
        PatchedFile::Modified(new_text)
    };
    match result {
        Ok(applied) => {
            assert_eq!(applied.file, expected, "wrong result of patch\n{patch}");
            assert_eq!(applied.hunks, hunk_ranges(&edits, context).len());
        }
        Err(e) => panic!("the diff of an edit did not apply: {e}\npatch:\n{patch}"),
    }
}

/// The edits drawn from the input.
fn read_edits(input: &mut Bytes<'_>) -> Vec<Edit> {
    let mut edits = Vec::new();
    while !input.is_empty() && edits.len() < MAX_EDITS {
        let b = input.byte();
        let pick = usize::from(b >> 2);
        let text = match VOCABULARY.get(pick) {
            Some(text) => (*text).to_owned(),
            None => raw_line(input, pick - VOCABULARY.len()),
        };
        edits.push(match b & 3 {
            0 | 1 => Edit::Keep(text),
            2 => Edit::Delete(text),
            _ => Edit::Insert(text),
        });
    }
    edits
}

/// A line of `len` input bytes (invalid UTF-8 replaced, no line breaks).
fn raw_line(input: &mut Bytes<'_>, len: usize) -> String {
    let bytes: Vec<u8> = (0..len).map(|_| input.byte()).collect();
    String::from_utf8_lossy(&bytes).replace(['\n', '\r'], "")
}

/// Makes the script describe real texts: a side's last line, when empty, has a newline
/// (`"a\n"` + `""` is just `"a\n"`), and a kept line cannot be the last line of one side
/// without a newline unless it is that on both sides too (diff writes it as removed and
/// added again).
fn normalise_ends(edits: &mut Vec<Edit>, old_newline: &mut bool, new_newline: &mut bool) {
    let last_text = |edits: &[Edit], old| side(edits, old).last().map(|t| t.is_empty());
    if last_text(edits, true) == Some(true) {
        *old_newline = true;
    }
    if last_text(edits, false) == Some(true) {
        *new_newline = true;
    }
    let old_last = edits.iter().rposition(|e| !matches!(e, Edit::Insert(_)));
    let new_last = edits.iter().rposition(|e| !matches!(e, Edit::Delete(_)));
    for (last, newline) in [(old_last, *old_newline), (new_last, *new_newline)] {
        let Some(i) = last else { continue };
        let same_on_both = old_last == new_last && *old_newline == *new_newline;
        if newline || same_on_both {
            continue;
        }
        if let Some(Edit::Keep(text)) = edits.get(i).cloned() {
            edits.splice(i..=i, [Edit::Delete(text.clone()), Edit::Insert(text)]);
            // Indices moved: one pass is enough, the kept line is gone.
            return;
        }
    }
}

/// `lines` joined with `eol`, with a final `eol` when `newline` (and the text is not empty).
fn join(lines: &[&str], eol: &str, newline: bool) -> String {
    let mut text = lines.join(eol);
    if newline && !lines.is_empty() {
        text.push_str(eol);
    }
    text
}

/// Whether the old side of every hunk is non-empty and occurs exactly once in the file.
fn every_hunk_unique(edits: &[Edit], context: usize, old_lines: &[&str]) -> bool {
    hunk_ranges(edits, context).into_iter().all(|(start, end)| {
        let pre = side(edits.get(start..end).unwrap_or_default(), true);
        !pre.is_empty() && old_lines.windows(pre.len()).filter(|w| *w == pre).count() == 1
    })
}

/// Whether a `--- ` line, a `+++ ` line and a `@@` line follow each other in `patch`,
/// after its first hunk header.
fn header_lookalike_before_hunk(patch: &str) -> bool {
    let lines: Vec<&str> = patch.lines().skip_while(|l| !l.starts_with("@@")).collect();
    lines.windows(3).any(|w| {
        w.first().is_some_and(|l| l.starts_with("--- "))
            && w.get(1).is_some_and(|l| l.starts_with("+++ "))
            && w.get(2).is_some_and(|l| l.starts_with("@@"))
    })
}
