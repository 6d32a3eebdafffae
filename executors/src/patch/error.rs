//! [`PatchError`]: why a patch could not be applied, with a stable code per kind.

use std::fmt;

use crate::ErrorCode;
/// Longest line excerpt quoted in an error message, in characters.
const MAX_QUOTE_CHARS: usize = 160;

/// Why [`apply_patch`](super::apply_patch) refused a patch. The file must be left untouched.
///
/// [`PatchError::code`] gives the stable string code sent to clients; the `Display` text
/// is written for the one who wrote the patch (usually a model) and says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch text is not a unified diff that can be understood.
    #[error("invalid patch: line {line} of the patch: {reason}")]
    Invalid {
        /// 1-based line number in the patch text.
        line: usize,
        /// What is wrong with that line.
        reason: String,
    },
    /// The patch holds no hunks, so there is nothing to apply.
    #[error(
        "the patch contains no hunks: expected a unified diff with at least one `@@ … @@` \
         hunk of ' ' (context), '-' (removed) and '+' (added) lines"
    )]
    Empty,
    /// The patch touches more than one file.
    #[error(
        "the patch touches more than one file (`{first}` and `{second}`); PATCH_FILE \
         patches exactly one file: send one PATCH_FILE command per file"
    )]
    MultipleFiles {
        /// The first file named in the patch.
        first: String,
        /// The first other file named in the patch.
        second: String,
    },
    /// A hunk's context and removed lines were not found in the file.
    #[error("{0}")]
    HunkFailed(Box<HunkFailure>),
    /// A deletion patch (`+++ /dev/null`) does not remove every line of the file. The
    /// remaining lines are not quoted: the patch says nothing about them, so a quote would
    /// only read the file out.
    #[error(
        "the patch deletes the file (`+++ /dev/null`) but its removed lines do not cover \
         the whole file: {remaining} line(s) would remain, starting at line {first_line}; \
         the removed lines must be exactly the file's content: re-read the file"
    )]
    DeleteIncomplete {
        /// How many lines of the file the patch does not remove.
        remaining: usize,
        /// 1-based number of the first line the patch does not remove.
        first_line: usize,
    },
    /// The patch creates the file (`--- /dev/null`) but the file exists and is not empty.
    #[error(
        "the patch creates the file (`--- /dev/null`) but the file already exists and is \
         not empty; to change it, send a diff against its current content"
    )]
    TargetExists,
    /// The patch modifies or deletes a file that does not exist.
    #[error(
        "the file does not exist, but the patch {action} it; to create a file, use a patch \
         with `--- /dev/null` and only added ('+') lines"
    )]
    TargetMissing {
        /// `"modifies"` or `"deletes"`.
        action: &'static str,
    },
    /// The patch applies but the result is identical to the original.
    #[error(
        "the patch applies but changes nothing ({hunks} hunk(s)): the file already has this \
         content"
    )]
    NoChange {
        /// How many hunks were applied.
        hunks: usize,
    },
}

impl PatchError {
    /// The stable code of this error (`PATCH_INVALID`, `PATCH_EMPTY`, `PATCH_MULTIPLE_FILES`,
    /// `PATCH_HUNK_FAILED`, `PATCH_TARGET_EXISTS`, `PATCH_TARGET_MISSING`, `PATCH_NO_CHANGE`).
    pub fn code(&self) -> ErrorCode {
        match self {
            PatchError::Invalid { .. } => ErrorCode::PatchInvalid,
            PatchError::Empty => ErrorCode::PatchEmpty,
            PatchError::MultipleFiles { .. } => ErrorCode::PatchMultipleFiles,
            PatchError::HunkFailed(_) | PatchError::DeleteIncomplete { .. } => {
                ErrorCode::PatchHunkFailed
            }
            PatchError::TargetExists => ErrorCode::PatchTargetExists,
            PatchError::TargetMissing { .. } => ErrorCode::PatchTargetMissing,
            PatchError::NoChange { .. } => ErrorCode::PatchNoChange,
        }
    }

    /// Shorthand for [`PatchError::Invalid`].
    pub(crate) fn invalid(line: usize, reason: impl Into<String>) -> Self {
        PatchError::Invalid {
            line,
            reason: reason.into(),
        }
    }
}

/// Where and why a hunk failed to apply (the payload of [`PatchError::HunkFailed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkFailure {
    /// 1-based number of the hunk in the patch.
    pub hunk: usize,
    /// The hunk's header as written, e.g. `@@ -10,4 +10,5 @@`.
    pub header: String,
    /// 1-based file line where the hunk was expected to start (its header, adjusted by the
    /// offset of the hunks before it; right after the previous hunk when it has no numbers).
    pub expected_line: usize,
    /// 1-based first file line the hunk was allowed to start at (after earlier hunks).
    pub searched_from: usize,
    /// 1-based file line where the closest partial match of the hunk starts.
    pub closest_line: usize,
    /// How many of the hunk's context and removed lines match there.
    pub matching: usize,
    /// How many context and removed lines the hunk has.
    pub total: usize,
    /// 1-based file line of the first line that does not match at `closest_line`.
    pub mismatch_line: usize,
    /// What the hunk expects on `mismatch_line`.
    pub expected_text: String,
    /// What the file has on `mismatch_line`, as far as it may be quoted.
    pub found: Found,
    /// Extra advice (hunk order, already-applied change …), if any.
    pub hint: Option<String>,
}

/// What the file has where a failed hunk first differs. A failure quotes at most this one
/// line of the file (length-capped), and only when the hunk's own line already has most of
/// it: a patch is not a way to read a file it does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The file ends before that line.
    EndOfFile,
    /// The file's line, close to the hunk's (see `diagnose.rs`).
    Line(String),
    /// A line of a file that is not text (it has NUL bytes): nothing of it is quoted.
    NotText,
    /// A line that shares too little with the hunk's line to be quoted.
    Unlike,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::EndOfFile => f.write_str("end of file"),
            Found::Line(text) => f.write_str(&quote(text)),
            Found::NotText => f.write_str(
                "a line of a file that is not text (it has NUL bytes; nothing of it is quoted)",
            ),
            Found::Unlike => f.write_str(
                "a different line (not quoted: it shares too little with the hunk's line; \
                 re-read the file)",
            ),
        }
    }
}

impl fmt::Display for HunkFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hunk #{} ({}) does not apply: its context and removed lines are not in the file \
             (searched outward from line {}). ",
            self.hunk, self.header, self.expected_line
        )?;
        if self.matching == 0 {
            write!(
                f,
                "None of its lines match at any position from line {} on; ",
                self.searched_from
            )?;
        } else {
            write!(
                f,
                "Closest match at line {} ({} of {} lines match); ",
                self.closest_line, self.matching, self.total
            )?;
        }
        write!(
            f,
            "first mismatch at line {}: expected {}, found {}.",
            self.mismatch_line,
            quote(&self.expected_text),
            self.found,
        )?;
        if let Some(hint) = &self.hint {
            write!(f, " {hint}")?;
        }
        Ok(())
    }
}

/// `text` in backticks, shortened to [`MAX_QUOTE_CHARS`] characters.
pub(crate) fn quote(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTE_CHARS) {
        Some((cut, _)) => format!("`{}…`", text.get(..cut).unwrap_or(text)),
        None => format!("`{text}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_shortens_long_lines_on_char_boundaries() {
        let long = "é".repeat(MAX_QUOTE_CHARS + 5);
        let quoted = quote(&long);
        assert!(quoted.ends_with("…`"));
        assert_eq!(quoted.chars().count(), MAX_QUOTE_CHARS + 3);
        assert_eq!(quote("abc"), "`abc`");
    }

    #[test]
    fn codes_are_stable() {
        assert_eq!(PatchError::Empty.code(), crate::ErrorCode::PatchEmpty);
        assert_eq!(
            PatchError::invalid(3, "x").code(),
            crate::ErrorCode::PatchInvalid
        );
        assert_eq!(
            PatchError::TargetExists.code(),
            crate::ErrorCode::PatchTargetExists
        );
        assert_eq!(
            PatchError::NoChange { hunks: 1 }.code(),
            crate::ErrorCode::PatchNoChange
        );
        let missing = PatchError::TargetMissing { action: "modifies" };
        assert_eq!(missing.code(), crate::ErrorCode::PatchTargetMissing);
    }
}
