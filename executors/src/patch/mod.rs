//! The patch engine behind `PATCH_FILE`: applies a unified diff of one file to its text.
//!
//! Pure and synchronous: [`apply_patch`] takes the file's current text (or `None` when it
//! does not exist) and the diff, and returns what the file should become
//! ([`PatchedFile`]) or a [`PatchError`] with a stable code. The caller does the I/O; on
//! an error it leaves the file untouched.
//!
//! # What is accepted
//!
//! Diffs are mostly written by models, so the engine is lenient where that is safe and
//! strict where a mistake would damage the file:
//!
//! - One file per patch. `diff --git`, `index`, mode lines, prose before the diff and a
//!   Markdown fence around it are ignored; file names in `---`/`+++` are ignored except
//!   `/dev/null` (`--- /dev/null` creates the file, `+++ /dev/null` deletes it). Bare
//!   `@@ … @@` hunks without file headers are fine.
//! - Hunk counts are recomputed from the body (a note says so when they were wrong);
//!   `@@ -a +b @@` and a bare `@@` (then the hunk is found by its context) are accepted.
//!   Empty lines inside a hunk are empty context lines; empty lines at the end of a hunk
//!   are separators unless the header's counts need them.
//! - `\ No newline at end of file` works both ways. Without one, a file keeps its
//!   final-newline state. A CRLF file stays CRLF: lines match ignoring `\r`, and added
//!   lines get the file's dominant line ending.
//! - Each hunk is tried at its stated line (shifted by the previous hunk's offset), then
//!   outward (+1, −1, +2, −2 …, as GNU patch does), then with a bounded fuzzy fallback
//!   (up to 2 differing leading/trailing context lines, whitespace-only differences; see
//!   `fuzzy.rs`). Hunks apply in order and may share context lines but never change the
//!   same lines. Deletions must match exactly.
//! - A hunk that does not apply fails the whole patch with `PATCH_HUNK_FAILED`, naming the
//!   hunk, its header, the line it was expected at, the closest partial match and the
//!   first differing line (expected vs found; the file's line is quoted only when the
//!   hunk's is close to it, never from a file with NUL bytes: see `diagnose.rs`). A patch that changes nothing fails with
//!   `PATCH_NO_CHANGE`.
//!
//! # Design
//!
//! - **Parsing** is our own (`parse.rs`) rather than `diffy`'s: diffy's parser reads each
//!   hunk body by the header's counts (so wrong counts, the most common model mistake,
//!   break it), requires `@@ -a,b +c,d @@` headers with numbers, rejects hunks whose stated
//!   ranges overlap, and reports no patch line numbers. Recomputing the counts first
//!   would mean re-serialising the patch only to parse it again.
//! - **Applying** is our own too (`apply.rs`): `diffy::apply` and `flickzeug::apply` both
//!   edit a `Vec` of lines with `splice`/`insert`/`remove` per hunk or per line, which is
//!   quadratic on large files. Here every hunk is placed, then its edits are streamed into
//!   the output, copying untouched ranges of the original with one `push_str` each:
//!   linear in file size plus patch size. A 1,000-hunk patch on a 100,000-line file takes
//!   a few milliseconds in release builds (GNU patch: about 20 ms on the same machine).
//! - `flickzeug` is used by the tests only, as a second diff generator for round trips.
//! - **Fuzzy matching** implements GNU patch's fuzz factor itself (`fuzzy.rs`) instead of
//!   calling `flickzeug`: flickzeug only applies whole diffs (it cannot place one hunk and
//!   report where), does not report per-hunk fuzz for the notes, uses the quadratic
//!   applier above, and by default accepts context lines that are merely 80 % similar
//!   (Levenshtein), which can move a hunk onto code it only resembles. Our fallback is
//!   bounded: only edge context lines may differ, removed lines always match (exactly or
//!   up to whitespace), and at least half of the hunk's old side must match.
//!   Whitespace-insensitive comparison keeps token boundaries (`a b` ≠ `ab`), unlike
//!   flickzeug's `ignore_whitespace`, which deletes all whitespace.

mod apply;
mod diagnose;
mod error;
mod file;
mod fuzzy;
mod parse;
mod search;
#[cfg(test)]
mod tests;

pub use error::{Found, HunkFailure, PatchError};

use apply::{apply_hunks, Options};
use file::FileText;
use parse::{Kind, ParsedPatch, Target};

/// At most this many notes are returned; the rest are summarised in the last one.
const MAX_NOTES: usize = 20;

/// What the patch does to the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchedFile {
    /// The file exists and gets this new content.
    Modified(String),
    /// The file is created (it did not exist, or was empty) with this content.
    Created(String),
    /// The file is deleted.
    Deleted,
}

/// A successfully applied patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchApplied {
    /// What to do with the file.
    pub file: PatchedFile,
    /// How many hunks were applied.
    pub hunks: usize,
    /// Human notes about repairs and inexact matches, e.g. `hunk #2 applied at offset +3
    /// lines`, `hunk #3 applied with fuzzy matching (1 context line differed)`,
    /// `recomputed header of hunk #1 from its body (@@ -1,3 +1,4 @@; …)`.
    pub notes: Vec<String>,
}

/// Applies the unified diff `patch` to a file whose current content is `original`
/// (`None` when the file does not exist).
///
/// Returns the file's new state, or an error that says why the patch was refused; the
/// file must then be left untouched. Runs in time linear in the sizes of the file and the
/// patch (plus the distance a moved hunk had to be searched for).
pub fn apply_patch(original: Option<&str>, patch: &str) -> Result<PatchApplied, PatchError> {
    let parsed = parse::parse(patch)?;
    let mut notes = Vec::new();
    if parsed.hunks.is_empty() {
        return match (parsed.target, original) {
            // git writes the deletion of an empty file without hunks.
            (Target::Delete, Some("")) => Ok(PatchApplied {
                file: PatchedFile::Deleted,
                hunks: 0,
                notes,
            }),
            _ => Err(PatchError::Empty),
        };
    }
    let target = resolve_target(&parsed, original, &mut notes)?;
    let text = original.unwrap_or_default();
    let file = FileText::new(text);
    let options = Options {
        fuzzy: target != Target::Delete,
        default_eol: if parsed.crlf { "\r\n" } else { "\n" },
    };
    let applied = apply_hunks(&file, &parsed.hunks, options)?;
    notes.extend(applied.notes);
    cap_notes(&mut notes);
    let hunks = parsed.hunks.len();
    let outcome = match target {
        Target::Create => PatchedFile::Created(applied.text),
        Target::Delete => match applied.first_kept {
            Some(first) if applied.kept_lines > 0 => {
                return Err(PatchError::DeleteIncomplete {
                    remaining: applied.kept_lines,
                    first_line: first + 1,
                })
            }
            _ => PatchedFile::Deleted,
        },
        Target::Modify if applied.text == text => return Err(PatchError::NoChange { hunks }),
        Target::Modify => PatchedFile::Modified(applied.text),
    };
    tracing::debug!(hunks, notes = notes.len(), "patch applied");
    Ok(PatchApplied {
        file: outcome,
        hunks,
        notes,
    })
}

/// Checks the patch's create/modify/delete intent against whether the file exists.
fn resolve_target(
    parsed: &ParsedPatch<'_>,
    original: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<Target, PatchError> {
    match (parsed.target, original) {
        (Target::Create, Some(text)) if !text.is_empty() => Err(PatchError::TargetExists),
        (Target::Delete, None) => Err(PatchError::TargetMissing { action: "deletes" }),
        (Target::Modify, None) => {
            let only_adds = parsed
                .hunks
                .iter()
                .all(|h| h.lines.iter().all(|l| l.kind == Kind::Add));
            if !only_adds {
                return Err(PatchError::TargetMissing { action: "modifies" });
            }
            notes.push(
                "the file did not exist and the patch only adds lines: created it".to_owned(),
            );
            Ok(Target::Create)
        }
        (target, _) => Ok(target),
    }
}

/// Keeps the first notes and summarises the rest.
fn cap_notes(notes: &mut Vec<String>) {
    if notes.len() > MAX_NOTES {
        let more = notes.len() - (MAX_NOTES - 1);
        notes.truncate(MAX_NOTES - 1);
        notes.push(format!("… and {more} more notes like these"));
    }
}
