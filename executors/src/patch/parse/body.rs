//! Repairs and checks on hunk bodies.

use super::model::{Hunk, HunkLine, Kind, Target};
use crate::patch::error::PatchError;

/// Applies a `\ No newline at end of file` marker to the line before it.
pub(super) fn mark_missing_newline(hunk: &mut Hunk<'_>) {
    match hunk.lines.last().map(|l| l.kind) {
        Some(Kind::Context) => {
            hunk.old_missing_newline = true;
            hunk.new_missing_newline = true;
        }
        Some(Kind::Remove) => hunk.old_missing_newline = true,
        Some(Kind::Add) => hunk.new_missing_newline = true,
        None => {}
    }
}

/// Whether the header says the hunk has no old lines (`-5,0`), so that an empty body line
/// must be an added line.
pub(super) fn blank_is_added(hunk: &Hunk<'_>) -> bool {
    hunk.stated_counts.is_some_and(|(old, _)| old == 0)
}

/// Whether the header states counts that the body read so far does not reach yet.
pub(super) fn needs_more_lines(hunk: &Hunk<'_>) -> bool {
    hunk.stated_counts
        .is_some_and(|(old, new)| hunk.old_len() < old || hunk.new_len() < new)
}

/// Empty lines at the end of a hunk are separators, not empty body lines, unless the
/// header's counts need them: then as many as the counts call for are kept.
pub(super) fn trim_trailing_blanks(hunk: &mut Hunk<'_>, blanks: usize) {
    if blanks == 0 {
        return;
    }
    let keep_len = hunk.lines.len().saturating_sub(blanks);
    hunk.lines.truncate(keep_len);
    let kind = if blank_is_added(hunk) {
        Kind::Add
    } else {
        Kind::Context
    };
    let keep = hunk.stated_counts.map_or(0, |(old, new)| {
        let missing_old = old.saturating_sub(hunk.old_len());
        let missing_new = new.saturating_sub(hunk.new_len());
        match kind {
            Kind::Add => blanks.min(missing_new),
            _ => blanks.min(missing_old).min(missing_new),
        }
    });
    for _ in 0..keep {
        hunk.lines.push(HunkLine { kind, text: "" });
    }
}

/// Creation patches may only add lines (an empty line without its `+` is taken as an
/// added empty line); deletion patches may only remove lines.
pub(super) fn check_sides(hunks: &mut [Hunk<'_>], target: Target) -> Result<(), PatchError> {
    for hunk in hunks.iter_mut() {
        let bad = match target {
            Target::Modify => None,
            Target::Create => {
                for line in &mut hunk.lines {
                    if line.kind == Kind::Context && line.text.is_empty() {
                        line.kind = Kind::Add;
                    }
                }
                let has_old = hunk.lines.iter().any(|l| l.kind != Kind::Add);
                has_old.then_some(
                    "a patch that creates the file (`--- /dev/null`) can only add lines ('+')",
                )
            }
            Target::Delete => {
                let has_new = hunk.lines.iter().any(|l| l.kind == Kind::Add);
                has_new.then_some(
                    "a patch that deletes the file (`+++ /dev/null`) can only remove lines ('-')",
                )
            }
        };
        if let Some(reason) = bad {
            let reason = format!("hunk #{}: {reason}", hunk.number);
            return Err(PatchError::invalid(hunk.line, reason));
        }
    }
    Ok(())
}
