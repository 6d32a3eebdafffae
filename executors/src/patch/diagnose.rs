//! Explaining a hunk that does not apply: where it comes closest, which line differs first,
//! and whether the hunk is out of order or already applied.
//!
//! **What is quoted.** A failure may target any file the patch names — a secrets file, a
//! binary — and whoever wrote the patch reads the message. So it quotes at most one line of
//! the file, the first that differs, length-capped, and only when the hunk's own line
//! already has most of it ([`Found`]): the same line but for whitespace or case, or at
//! most [`MAX_NEW_CHARS`] characters (and fewer than half of the line) that the hunk's
//! line does not have at its start or end — a renamed variable, an added argument. A
//! file with a NUL byte is not text and nothing of it is quoted.

use super::error::{Found, HunkFailure, PatchError};
use super::parse::{Hunk, Kind};
use super::search::{find_exact, last_start, outward, PreImage};

/// Upper bound on line comparisons spent looking for the closest partial match, so that a
/// huge hunk against a huge file still fails fast.
const COMPARISON_BUDGET: usize = 4_000_000;

/// Most characters of a file's line a failure may show that the hunk's line does not have.
const MAX_NEW_CHARS: usize = 8;

/// Where the hunk was looked for.
pub(crate) struct Attempt {
    /// 0-based line where the hunk was expected to start.
    pub expected: usize,
    /// First line the hunk may start at (earlier lines belong to earlier hunks).
    pub lo: usize,
}

/// The [`PatchError::HunkFailed`] for `hunk`, which matched nowhere in `file`.
pub(crate) fn hunk_failed(
    file: &[&str],
    hunk: &Hunk<'_>,
    pre: &PreImage<'_>,
    attempt: &Attempt,
) -> PatchError {
    let search_from = if attempt.lo < file.len() {
        attempt.lo
    } else {
        0
    };
    let (closest, matching) = closest_match(file, &pre.texts, attempt.expected, search_from);
    let mismatch = (0..pre.len())
        .find(|&i| file.get(closest + i) != pre.texts.get(i))
        .unwrap_or(pre.len());
    let expected = pre.texts.get(mismatch).copied().unwrap_or_default();
    PatchError::HunkFailed(Box::new(HunkFailure {
        hunk: hunk.number,
        header: hunk.header.to_owned(),
        expected_line: attempt.expected + 1,
        searched_from: search_from + 1,
        closest_line: closest + 1,
        matching,
        total: pre.len(),
        mismatch_line: closest + mismatch + 1,
        expected_text: expected.to_owned(),
        found: found(file, closest + mismatch, expected),
        hint: hint(file, hunk, pre, attempt),
    }))
}

/// What may be quoted of `file`'s line `at`, where the hunk expected `expected`.
fn found(file: &[&str], at: usize, expected: &str) -> Found {
    let Some(line) = file.get(at) else {
        return Found::EndOfFile;
    };
    if file
        .iter()
        .any(|l| memchr::memchr(0, l.as_bytes()).is_some())
    {
        Found::NotText
    } else if resembles(line, expected) {
        Found::Line((*line).to_owned())
    } else {
        Found::Unlike
    }
}

/// Whether the file's `line` adds little to the hunk's `expected` line: compared ignoring
/// case and runs of whitespace, what `line` has beyond the start and end it shares with
/// `expected` is nothing, or at most [`MAX_NEW_CHARS`] characters and less than half of it.
fn resembles(line: &str, expected: &str) -> bool {
    let words = |s: &str| s.chars().filter(|c| !c.is_whitespace()).count();
    // Cheap bound first: a line far longer than the hunk's has too much of its own.
    if words(line) > words(expected) + MAX_NEW_CHARS {
        return false;
    }
    let normal = |s: &str| -> Vec<char> {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
            .chars()
            .collect()
    };
    let (line, expected) = (normal(line), normal(expected));
    let prefix = line
        .iter()
        .zip(&expected)
        .take_while(|(a, b)| a == b)
        .count();
    let room = line.len().min(expected.len()) - prefix;
    let suffix = line
        .iter()
        .rev()
        .zip(expected.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let new = line.len() - prefix - suffix;
    new == 0 || (new <= MAX_NEW_CHARS && new * 2 < line.len())
}

/// The start line (at or after `lo`) where the most lines of `pre` match, nearest to
/// `expected` on ties, with the number of matching lines. Windows may run past the end.
fn closest_match(file: &[&str], pre: &[&str], expected: usize, lo: usize) -> (usize, usize) {
    let hi = file.len().saturating_sub(1);
    let mut best = (expected.max(lo).min(hi), 0);
    let mut spent = 0;
    for pos in outward(expected, lo, hi) {
        let window = file.get(pos..).unwrap_or_default();
        let matching = pre.iter().zip(window).filter(|(a, b)| a == b).count();
        if matching > best.1 {
            best = (pos, matching);
        }
        spent += pre.len();
        if spent > COMPARISON_BUDGET || best.1 == pre.len() {
            break;
        }
    }
    best
}

/// Advice beyond the mismatch itself.
fn hint(file: &[&str], hunk: &Hunk<'_>, pre: &PreImage<'_>, attempt: &Attempt) -> Option<String> {
    if pre.len() > file.len() {
        return Some(format!(
            "The hunk has {} context and removed lines, but the file has only {} lines.",
            pre.len(),
            file.len()
        ));
    }
    if let Some(pos) = match_before(file, &pre.texts, attempt.lo) {
        return Some(format!(
            "It matches at line {}, before the end of the previous hunk's change (line {}): \
             hunks must be in file order and must not change the same lines.",
            pos + 1,
            attempt.lo
        ));
    }
    let post: Vec<&str> = hunk
        .lines
        .iter()
        .filter(|l| l.kind != Kind::Remove)
        .map(|l| l.text)
        .collect();
    let changes = hunk.lines.iter().any(|l| l.kind != Kind::Context);
    if let Some(pos) = find_exact(file, &post, attempt.expected, 0).filter(|_| changes) {
        return Some(format!(
            "The file already contains the hunk's result at line {}: the patch may already \
             have been applied.",
            pos + 1
        ));
    }
    Some(
        "Re-read the file and copy the context and removed lines exactly as they are now."
            .to_owned(),
    )
}

/// An exact match of `pre` that starts before `lo`.
fn match_before(file: &[&str], pre: &[&str], lo: usize) -> Option<usize> {
    let hi = last_start(file.len(), pre.len())?.min(lo.checked_sub(1)?);
    find_exact(file.get(..hi + pre.len())?, pre, hi, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::parse::HunkLine;

    fn hunk<'a>(lines: &[(Kind, &'a str)]) -> Hunk<'a> {
        Hunk {
            number: 2,
            header: "@@ -3,3 +3,3 @@",
            line: 1,
            old_start: Some(3),
            new_start: Some(3),
            stated_counts: Some((3, 3)),
            lines: lines
                .iter()
                .map(|&(kind, text)| HunkLine { kind, text })
                .collect(),
            old_missing_newline: false,
            new_missing_newline: false,
        }
    }

    fn failure(err: PatchError) -> HunkFailure {
        match err {
            PatchError::HunkFailed(f) => *f,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn reports_the_closest_match_and_first_mismatch() {
        let file = ["a", "b", "c", "d", "e", "x", "g", "h"];
        let h = hunk(&[
            (Kind::Context, "e"),
            (Kind::Remove, "f"),
            (Kind::Add, "F"),
            (Kind::Context, "g"),
        ]);
        let pre = PreImage::new(&h);
        let f = failure(hunk_failed(
            &file,
            &h,
            &pre,
            &Attempt { expected: 2, lo: 0 },
        ));
        assert_eq!(
            (f.expected_line, f.closest_line, f.matching, f.total),
            (3, 5, 2, 3)
        );
        assert_eq!((f.mismatch_line, f.expected_text.as_str()), (6, "f"));
        assert_eq!(f.found, Found::Unlike);
    }

    #[test]
    fn hints_at_already_applied_and_out_of_order_hunks() {
        let file = ["a", "F", "c"];
        let h = hunk(&[
            (Kind::Context, "a"),
            (Kind::Remove, "f"),
            (Kind::Add, "F"),
            (Kind::Context, "c"),
        ]);
        let pre = PreImage::new(&h);
        let f = failure(hunk_failed(
            &file,
            &h,
            &pre,
            &Attempt { expected: 0, lo: 0 },
        ));
        assert!(f.hint.unwrap_or_default().contains("already"));

        let file = ["a", "f", "c", "z"];
        let f = failure(hunk_failed(
            &file,
            &h,
            &pre,
            &Attempt { expected: 0, lo: 2 },
        ));
        assert!(f.hint.unwrap_or_default().contains("file order"));
    }

    /// The file's line is quoted only when the hunk's line already has most of it.
    #[test]
    fn quotes_only_lines_close_to_the_hunks() {
        for (line, expected) in [
            ("line 8", "line 8 is different"),
            ("TWO", "two"),
            ("    let x  =  1;", "let x = 1;"),
            ("run(a, b, c);", "run(a, b);"),
            ("let total_count = 0;", "let count = 0;"),
            ("", "anything"),
        ] {
            assert!(resembles(line, expected), "{line:?} ~ {expected:?}");
        }
        for (line, expected) in [
            (
                "aws_secret_access_key = wJalrXUtnFEMI",
                "aws_secret_access_key = ",
            ),
            ("hunter2", "x"),
            ("}", "fn main() {"),
            ("AKIAIOSFODNN7EXAMPLE", "AKIAXXXXXXXXXXXXXXXX"),
            ("a completely different line", "the line the hunk expected"),
        ] {
            assert!(!resembles(line, expected), "{line:?} !~ {expected:?}");
        }
    }

    #[test]
    fn nothing_of_a_file_with_nul_bytes_is_quoted() {
        let file = ["\0header", "secret"];
        let h = hunk(&[(Kind::Remove, "secre"), (Kind::Add, "x")]);
        let pre = PreImage::new(&h);
        let attempt = Attempt { expected: 1, lo: 0 };
        let f = failure(hunk_failed(&file, &h, &pre, &attempt));
        assert_eq!(f.found, Found::NotText);
        let file = ["header", "secret"];
        let f = failure(hunk_failed(&file, &h, &pre, &attempt));
        assert_eq!(f.found, Found::Line("secret".to_owned()));
    }

    #[test]
    fn end_of_file_is_reported_as_missing_text() {
        let file = ["a"];
        let h = hunk(&[(Kind::Context, "a"), (Kind::Remove, "b")]);
        let pre = PreImage::new(&h);
        let f = failure(hunk_failed(
            &file,
            &h,
            &pre,
            &Attempt { expected: 0, lo: 0 },
        ));
        assert_eq!((f.mismatch_line, f.found), (2, Found::EndOfFile));
    }
}
