//! Parser unit tests: the tricky inputs models produce.

use super::header::parse_header;
use super::*;

fn kinds(hunk: &Hunk<'_>) -> String {
    hunk.lines
        .iter()
        .map(|l| match l.kind {
            Kind::Context => ' ',
            Kind::Remove => '-',
            Kind::Add => '+',
        })
        .collect()
}

fn only_hunk(patch: &str) -> Hunk<'_> {
    let parsed = parse(patch).unwrap();
    assert_eq!(parsed.hunks.len(), 1, "{parsed:?}");
    parsed.hunks.into_iter().next().unwrap()
}

#[test]
fn headers_with_and_without_counts() {
    let h = parse_header("@@ -3,4 +5,6 @@ fn main() {", 1).unwrap();
    assert_eq!(
        (h.text, h.old_start, h.counts),
        ("@@ -3,4 +5,6 @@", Some(3), Some((4, 6)))
    );
    let h = parse_header("@@ -3 +5 @@", 1).unwrap();
    assert_eq!((h.old_start, h.counts), (Some(3), Some((1, 1))));
    let h = parse_header("@@ @@", 1).unwrap();
    assert_eq!((h.text, h.old_start, h.counts), ("@@ @@", None, None));
    let h = parse_header("@@", 1).unwrap();
    assert_eq!((h.old_start, h.counts), (None, None));
    let h = parse_header("@@ -1,2 +1,3 def f():", 1).unwrap();
    assert_eq!((h.old_start, h.counts), (Some(1), Some((2, 3))));
    let err = parse_header("@@ -x,2 +1,3 @@", 7).unwrap_err();
    assert!(matches!(err, PatchError::Invalid { line: 7, .. }), "{err}");
    assert!(parse_header("@@@ -1,2 -1,2 +1,3 @@@", 1).is_err());
}

#[test]
fn counts_are_recomputed_and_noted() {
    let hunk = only_hunk("@@ -1,9 +1,1 @@\n a\n-b\n+c\n+d\n");
    assert_eq!((hunk.old_len(), hunk.new_len()), (2, 3));
    let note = recount_note(&hunk).unwrap();
    assert!(note.contains("recomputed header of hunk #1"), "{note}");
    assert!(
        note.contains("@@ -1,2 +1,3 @@; it said @@ -1,9 +1,1 @@"),
        "{note}"
    );
    assert_eq!(
        recount_note(&only_hunk("@@ -1,2 +1,2 @@\n-a\n+b\n c\n")),
        None
    );
}

#[test]
fn empty_lines_inside_are_context_trailing_ones_are_not() {
    let hunk = only_hunk("@@ -1,4 +1,4 @@\n a\n\n-b\n+c\n d\n\n\n");
    assert_eq!(kinds(&hunk), "  -+ ");
    // The counts ask for one more line: one trailing empty line is kept.
    let hunk = only_hunk("@@ -1,3 +1,3 @@\n a\n-b\n+c\n\n\n");
    assert_eq!(kinds(&hunk), " -+ ");
    // Blank separator lines between hunks.
    let parsed = parse("@@ -1,2 +1,2 @@\n-a\n+b\n x\n\n@@ -9,2 +9,2 @@\n-c\n+d\n y\n").unwrap();
    assert_eq!(
        parsed.hunks.iter().map(kinds).collect::<Vec<_>>(),
        ["-+ ", "-+ "]
    );
}

#[test]
fn git_noise_fences_and_prose_are_ignored() {
    let patch = "Here is the fix:\n```diff\ndiff --git a/x.rs b/x.rs\nindex 1..2 100644\n\
                 --- a/x.rs\n+++ b/x.rs\n@@ -1 +1 @@\n-a\n+b\n```\nThanks\n";
    let parsed = parse(patch).unwrap();
    assert_eq!(parsed.target, Target::Modify);
    assert_eq!(parsed.hunks.iter().map(kinds).collect::<Vec<_>>(), ["-+"]);
}

#[test]
fn removed_lines_that_look_like_headers() {
    // `--- x` without a `+++` line after it is a removed `-- x` line.
    let hunk = only_hunk("@@ -1,2 +1,1 @@\n--- SQL comment\n select 1;\n");
    assert_eq!(kinds(&hunk), "- ");
    assert_eq!(hunk.lines[0].text, "-- SQL comment");
}

#[test]
fn header_lookalike_pairs_inside_a_hunk_are_body_lines() {
    // Removing `-- a` and adding `++ b` writes `--- a` then `+++ b` (fuzz finding): the
    // counts say the hunk is not over, so the pair is body, not the next file's header.
    let hunk = only_hunk("@@ -1,2 +1,2 @@\n x\n--- a\n+++ b\n");
    assert_eq!(kinds(&hunk), " -+");
    assert_eq!((hunk.lines[1].text, hunk.lines[2].text), ("-- a", "++ b"));
    // Without counts: a pair not followed by a hunk header is body too.
    let hunk = only_hunk("@@\n x\n--- a\n+++ b\n y\n");
    assert_eq!(kinds(&hunk), " -+ ");
    // A real next file: the counts are met and `@@` follows.
    let two = parse("@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-c\n+d\n").unwrap();
    assert_eq!(two.hunks.len(), 2);
}

#[test]
fn no_newline_markers_follow_their_line() {
    let hunk = only_hunk("@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n");
    assert!(hunk.old_missing_newline && !hunk.new_missing_newline);
    let hunk = only_hunk("@@ -1 +1 @@\n a\n\\ No newline at end of file\n");
    assert!(hunk.old_missing_newline && hunk.new_missing_newline);
}

#[test]
fn crlf_patch_text() {
    let parsed = parse("--- a/f\r\n+++ b/f\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n").unwrap();
    assert!(parsed.crlf);
    let hunk = parsed.hunks.first().unwrap();
    assert_eq!(
        hunk.lines.iter().map(|l| l.text).collect::<Vec<_>>(),
        ["a", "b"]
    );
}

#[test]
fn targets_and_file_counts() {
    let create = parse("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n\n").unwrap();
    assert_eq!(create.target, Target::Create);
    // The blank line is taken as an added empty line (counts ask for 2 new lines).
    assert_eq!(create.hunks.iter().map(kinds).collect::<Vec<_>>(), ["++"]);
    let delete = parse("--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n").unwrap();
    assert_eq!(delete.target, Target::Delete);
    let same_twice =
        "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n--- a/f\n+++ b/f\n@@ -5 +5 @@\n-c\n+d\n";
    assert_eq!(parse(same_twice).unwrap().hunks.len(), 2);
    let two = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-c\n+d\n";
    assert!(matches!(parse(two), Err(PatchError::MultipleFiles { .. })));
    let bad_create = "--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+a\n b\n";
    assert!(matches!(
        parse(bad_create),
        Err(PatchError::Invalid { line: 3, .. })
    ));
}

#[test]
fn invalid_body_lines_name_their_line() {
    let err = parse("@@ -1,3 +1,3 @@\n a\nb\n-c\n+d\n").unwrap_err();
    assert!(matches!(err, PatchError::Invalid { line: 3, .. }), "{err}");
    assert!(err.to_string().contains("`b`"), "{err}");
    let err = parse("@@ -1 +1 @@\n@@ -2 +2 @@\n-a\n").unwrap_err();
    assert!(matches!(err, PatchError::Invalid { line: 1, .. }), "{err}");
}

#[test]
fn patches_without_hunks_parse_to_nothing() {
    assert!(parse("").unwrap().hunks.is_empty());
    assert!(parse("just some text\n--- a/f\n+++ b/f\n")
        .unwrap()
        .hunks
        .is_empty());
}
