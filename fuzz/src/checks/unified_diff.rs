//! A unified diff built from a known edit script, as `diff -u` writes it, with the
//! mistakes models make available as options.
//!
//! The round-trip target knows the exact edits (it generates them), so no diff algorithm
//! is needed: hunks are the changes with `context` lines around them, merged when their
//! contexts touch, exactly like GNU diff's.

/// One step of an edit script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// A line in both texts.
    Keep(String),
    /// A line of the old text only.
    Delete(String),
    /// A line of the new text only.
    Insert(String),
}

/// How the diff is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// Context lines around each change (GNU's default is 3).
    pub context: usize,
    /// Line ending of the patch text itself.
    pub crlf: bool,
    /// Write `--- a/file` / `+++ b/file` (or `/dev/null`, see `create`/`delete`).
    pub file_headers: bool,
    /// `--- /dev/null`: the patch creates the file.
    pub create: bool,
    /// `+++ /dev/null`: the patch deletes the file.
    pub delete: bool,
    /// Prefix `diff --git` and `index` lines.
    pub git_metadata: bool,
    /// Wrap the diff in a Markdown fence with a sentence before it.
    pub fenced: bool,
    /// Write `@@ -a +c @@` (no counts): the engine must recount.
    pub no_counts: bool,
    /// Write empty context lines without their space (as editors that strip trailing
    /// whitespace do).
    pub bare_blank_context: bool,
    /// Added to every hunk's stated start lines (a model's wrong line numbers).
    pub shift: isize,
}

/// The old or new side of a hunk: 1-based start as `diff` states it, and the count.
fn range(first_index: usize, count: usize) -> (usize, usize) {
    // `diff` states an empty range by the line before it (`-5,0` = after line 5).
    if count == 0 {
        (first_index, 0)
    } else {
        (first_index + 1, count)
    }
}

/// The texts of one side: `old` (keeps and deletions) or new (keeps and insertions).
pub fn side(edits: &[Edit], old: bool) -> Vec<&str> {
    edits
        .iter()
        .filter_map(|e| match (e, old) {
            (Edit::Keep(t), _) | (Edit::Delete(t), true) | (Edit::Insert(t), false) => {
                Some(t.as_str())
            }
            _ => None,
        })
        .collect()
}

/// The hunks as index ranges into `edits`: each change with up to `context` edits of
/// context around it, merged when the gap between changes is at most `2 * context`.
pub fn hunk_ranges(edits: &[Edit], context: usize) -> Vec<(usize, usize)> {
    let changes: Vec<usize> = edits
        .iter()
        .enumerate()
        .filter(|(_, e)| !matches!(e, Edit::Keep(_)))
        .map(|(i, _)| i)
        .collect();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for i in changes {
        let start = i.saturating_sub(context);
        let end = (i + 1 + context).min(edits.len());
        match ranges.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => ranges.push((start, end)),
        }
    }
    ranges
}

/// The unified diff of `edits`. `old_newline`/`new_newline`: whether each side's text
/// ends with a newline (a `\ No newline at end of file` marker is written after the
/// last line of a side that does not).
pub fn unified_diff(edits: &[Edit], old_newline: bool, new_newline: bool, style: Style) -> String {
    let eol = if style.crlf { "\r\n" } else { "\n" };
    let mut out = String::new();
    let mut line = |text: &str| {
        out.push_str(text);
        out.push_str(eol);
    };
    if style.fenced {
        line("Here is the patch:");
        line("");
        line("```diff");
    }
    if style.git_metadata {
        line("diff --git a/file.txt b/file.txt");
        line("index 1234567..89abcde 100644");
    }
    if style.file_headers || style.create || style.delete {
        line(if style.create {
            "--- /dev/null"
        } else {
            "--- a/file.txt"
        });
        line(if style.delete {
            "+++ /dev/null"
        } else {
            "+++ b/file.txt"
        });
    }
    let old_len = side(edits, true).len();
    let new_len = side(edits, false).len();
    let (mut old_index, mut new_index, mut at) = (0usize, 0usize, 0usize);
    for (start, end) in hunk_ranges(edits, style.context) {
        for edit in edits.get(at..start).unwrap_or_default() {
            advance(edit, &mut old_index, &mut new_index);
        }
        let body = edits.get(start..end).unwrap_or_default();
        let old_count = side(body, true).len();
        let new_count = side(body, false).len();
        line(&header(
            range(old_index, old_count),
            range(new_index, new_count),
            style,
        ));
        for edit in body {
            let (prefix, text) = match edit {
                Edit::Keep(t) => (' ', t),
                Edit::Delete(t) => ('-', t),
                Edit::Insert(t) => ('+', t),
            };
            if prefix == ' ' && text.is_empty() && style.bare_blank_context {
                line("");
            } else {
                line(&format!("{prefix}{text}"));
            }
            advance(edit, &mut old_index, &mut new_index);
            let old_last = !matches!(edit, Edit::Insert(_)) && old_index == old_len;
            let new_last = !matches!(edit, Edit::Delete(_)) && new_index == new_len;
            if (old_last && !old_newline) || (new_last && !new_newline) {
                line("\\ No newline at end of file");
            }
        }
        at = end;
    }
    if style.fenced {
        line("```");
    }
    out
}

/// `@@ -a,b +c,d @@` (or without counts), shifted by `style.shift`.
fn header(old: (usize, usize), new: (usize, usize), style: Style) -> String {
    let shift = |n: usize| n.saturating_add_signed(style.shift);
    if style.no_counts {
        format!("@@ -{} +{} @@", shift(old.0), shift(new.0))
    } else {
        format!(
            "@@ -{},{} +{},{} @@",
            shift(old.0),
            old.1,
            shift(new.0),
            new.1
        )
    }
}

fn advance(edit: &Edit, old_index: &mut usize, new_index: &mut usize) {
    match edit {
        Edit::Keep(_) => {
            *old_index += 1;
            *new_index += 1;
        }
        Edit::Delete(_) => *old_index += 1,
        Edit::Insert(_) => *new_index += 1,
    }
}
