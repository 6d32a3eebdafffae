//! `patch`: the patch engine (`cmdr_executors::patch::apply_patch`) on arbitrary patch
//! text against arbitrary file text.
//!
//! Input: one flag byte (bit 0: the file does not exist), then the text; the file's
//! content is the text before the first NUL, the patch what follows it (without a NUL, the
//! file is empty and the whole text is the patch).
//!
//! Properties:
//! - nothing panics (debug assertions and overflow checks are on in fuzz builds);
//! - the same input gives the same answer twice;
//! - an error has a stable `PATCH_*` code and a message;
//! - a success is consistent: `Modified` only for an existing file and never equal to
//!   it, `Created` only for a missing or empty file, `Deleted` only for an existing one;
//!   at least one hunk (git's hunk-less deletion of an empty file excepted); at most 20
//!   notes; a file whose lines all end in CRLF gets no bare LF.

use cmdr_executors::patch::{apply_patch, PatchApplied, PatchedFile};
use cmdr_executors::ErrorCode;

use super::input::Bytes;

/// Codes the engine may answer with.
pub const PATCH_CODES: [ErrorCode; 7] = [
    ErrorCode::PatchInvalid,
    ErrorCode::PatchEmpty,
    ErrorCode::PatchMultipleFiles,
    ErrorCode::PatchHunkFailed,
    ErrorCode::PatchTargetExists,
    ErrorCode::PatchTargetMissing,
    ErrorCode::PatchNoChange,
];

/// The most notes a success may carry.
const MAX_NOTES: usize = 20;

/// Checks every property on one input.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    let missing = input.byte() & 1 == 1;
    let text = input.rest_text();
    let (file, patch) = text.split_once('\0').unwrap_or(("", text.as_str()));
    let original = (!missing).then_some(file);

    let result = apply_patch(original, patch);
    assert_eq!(result, apply_patch(original, patch), "not deterministic");
    match result {
        Ok(applied) => check_applied(original, &applied),
        Err(e) => {
            assert!(PATCH_CODES.contains(&e.code()), "unknown code {}", e.code());
            assert!(!e.to_string().is_empty(), "an error without a message");
        }
    }
}

/// The consistency of a success.
pub fn check_applied(original: Option<&str>, applied: &PatchApplied) {
    assert!(
        applied.notes.len() <= MAX_NOTES,
        "{} notes",
        applied.notes.len()
    );
    match &applied.file {
        PatchedFile::Modified(text) => {
            let Some(before) = original else {
                panic!("modified a file that does not exist");
            };
            assert_ne!(text, before, "`Modified` without a change");
            assert!(applied.hunks > 0, "modified by no hunk");
            if is_crlf(before) {
                assert!(!has_bare_lf(text), "bare LF added to a CRLF file: {text:?}");
            }
        }
        PatchedFile::Created(_) => {
            assert!(original.is_none_or(str::is_empty), "created over a file");
            assert!(applied.hunks > 0, "created by no hunk");
        }
        PatchedFile::Deleted => {
            assert!(original.is_some(), "deleted a file that does not exist");
            assert!(
                applied.hunks > 0 || original == Some(""),
                "deleted a non-empty file without a hunk"
            );
        }
    }
}

/// Whether `text` has line endings and every one is CRLF.
fn is_crlf(text: &str) -> bool {
    text.contains('\n') && !has_bare_lf(text)
}

/// Whether some `\n` of `text` has no `\r` before it.
fn has_bare_lf(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || bytes.get(i - 1) != Some(&b'\r')))
}
