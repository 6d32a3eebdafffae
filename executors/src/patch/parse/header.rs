//! Hunk headers (`@@ -a,b +c,d @@`) and file headers (`--- a/x`).

use super::DEV_NULL;
use crate::patch::error::{quote, PatchError};

/// The parsed parts of a `@@ -a,b +c,d @@ section` line.
#[derive(Debug)]
pub(super) struct Header<'p> {
    /// The header up to its closing `@@`.
    pub text: &'p str,
    /// Old-side start line.
    pub old_start: Option<usize>,
    /// New-side start line.
    pub new_start: Option<usize>,
    /// Old/new counts, when both ranges are given.
    pub counts: Option<(usize, usize)>,
}

/// Parses a hunk header leniently: counts may be missing (`-a +c`), numbers may be
/// missing altogether (`@@ @@`, `@@`), and anything after the closing `@@` is ignored.
pub(super) fn parse_header(line: &str, line_no: usize) -> Result<Header<'_>, PatchError> {
    let rest = line.get(2..).unwrap_or_default();
    if rest.starts_with('@') {
        return Err(PatchError::invalid(
            line_no,
            "combined diffs (`@@@`) are not supported; send a plain unified diff",
        ));
    }
    let closing = rest.find("@@");
    let (ranges, text) = match closing {
        Some(i) => (
            rest.get(..i).unwrap_or_default(),
            line.get(..i + 4).unwrap_or(line),
        ),
        None => (rest, line.trim_end()),
    };
    let mut old = None;
    let mut new = None;
    for token in ranges.split_whitespace() {
        let (slot, range) = match (token.strip_prefix('-'), token.strip_prefix('+')) {
            (Some(range), _) if old.is_none() => (&mut old, range),
            (_, Some(range)) if new.is_none() => (&mut new, range),
            // Without a closing `@@`, the first other token starts the section text.
            _ if closing.is_none() && (old.is_some() || new.is_some()) => break,
            _ => return Err(bad_header(line, line_no, token)),
        };
        match parse_range(range) {
            Some(parsed) => *slot = Some(parsed),
            None if closing.is_none() && (old.is_some() || new.is_some()) => break,
            None => return Err(bad_header(line, line_no, token)),
        }
    }
    Ok(Header {
        text: text.trim(),
        old_start: old.map(|(start, _)| start),
        new_start: new.map(|(start, _)| start),
        counts: old.zip(new).map(|((_, o), (_, n))| (o, n)),
    })
}

/// `a,b` or `a` (count 1) as `(start, count)`.
fn parse_range(range: &str) -> Option<(usize, usize)> {
    match range.split_once(',') {
        Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
        None => Some((range.parse().ok()?, 1)),
    }
}

fn bad_header(line: &str, line_no: usize, token: &str) -> PatchError {
    PatchError::invalid(
        line_no,
        format!(
            "cannot parse hunk header {} (at {}): expected `@@ -OLD_START,OLD_COUNT \
             +NEW_START,NEW_COUNT @@`, `@@ -OLD_START +NEW_START @@` or a bare `@@`",
            quote(line),
            quote(token)
        ),
    )
}

/// The file name in a `---`/`+++` header: quotes, timestamps and `a/`/`b/` dropped.
pub(super) fn header_name(rest: &str) -> &str {
    let rest = rest.trim_start();
    let name = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().unwrap_or(quoted),
        None => rest.split_whitespace().next().unwrap_or_default(),
    };
    if name == DEV_NULL {
        return name;
    }
    name.strip_prefix("a/")
        .or_else(|| name.strip_prefix("b/"))
        .unwrap_or(name)
}
