//! The bounded fuzzy fallback, used only when a hunk matches exactly nowhere.
//!
//! GNU patch's fuzz factor, with the same bound (2), plus whitespace-insensitive matching:
//!
//! - **Fuzz N** lets up to N of the hunk's *leading* context lines and up to N of its
//!   *trailing* context lines differ from the file. Those lines stay as the file has them
//!   (context is never rewritten), so a stale comment or a renamed variable next to the
//!   change does not block it.
//! - **Whitespace**: lines may differ in whitespace (indentation, runs of spaces, trailing
//!   blanks); tokens must be identical. A removed line matched this way removes the
//!   file's line.
//! - Removed lines are always compared, and at least half of the hunk's old side must
//!   match, so a hunk can never float to a spot it merely resembles.
//!
//! Strategies are tried from the most to the least strict, each over the whole allowed
//! range (nearest position first): whitespace only, fuzz 1, fuzz 1 + whitespace, fuzz 2,
//! fuzz 2 + whitespace.

use super::search::{last_start, outward, PreImage};

/// `(fuzz level, ignore whitespace)`, in the order they are tried.
const STRATEGIES: [(usize, bool); 5] = [(0, true), (1, false), (1, true), (2, false), (2, true)];

/// How a hunk was fuzzily matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fuzz {
    /// Context lines at the hunk's edges that did not match and were kept as the file has them.
    pub differing: usize,
    /// Whitespace differences were ignored.
    pub whitespace: bool,
}

impl Fuzz {
    /// Human description for notes, e.g. `2 context lines differed; whitespace ignored`.
    pub(crate) fn describe(&self) -> String {
        let lines = match self.differing {
            0 => None,
            1 => Some("1 context line differed".to_owned()),
            n => Some(format!("{n} context lines differed")),
        };
        let ws = self
            .whitespace
            .then_some("whitespace differences ignored".to_owned());
        lines.into_iter().chain(ws).collect::<Vec<_>>().join("; ")
    }
}

/// The nearest fuzzy match of `pre` to `expected`, at or after `lo`, by the least lenient
/// strategy that finds one.
pub(crate) fn find_fuzzy(
    file: &[&str],
    pre: &PreImage<'_>,
    expected: usize,
    lo: usize,
) -> Option<(usize, Fuzz)> {
    let hi = last_start(file.len(), pre.len())?;
    if pre.is_empty() {
        return None;
    }
    STRATEGIES.iter().find_map(|&(level, whitespace)| {
        outward(expected, lo, hi).find_map(|pos| {
            let window = file.get(pos..pos + pre.len())?;
            let differing = match_window(window, pre, level, whitespace)?;
            Some((
                pos,
                Fuzz {
                    differing,
                    whitespace,
                },
            ))
        })
    })
}

/// How many edge context lines had to be ignored for `pre` to match `window` with this
/// strategy; `None` when it does not match.
fn match_window(
    window: &[&str],
    pre: &PreImage<'_>,
    level: usize,
    whitespace: bool,
) -> Option<usize> {
    let len = pre.len();
    let lead = level.min(pre.lead);
    let trail_from = len.saturating_sub(level.min(pre.trail));
    let mut differing = 0;
    for (i, (want, got)) in pre.texts.iter().zip(window).enumerate() {
        if same(want, got, whitespace) {
            continue;
        }
        if i < lead || i >= trail_from {
            differing += 1;
        } else {
            return None;
        }
    }
    let matching = len - differing;
    (matching > 0 && matching * 2 >= len).then_some(differing)
}

/// Line equality, optionally ignoring whitespace differences (not token boundaries).
fn same(want: &str, got: &str, whitespace: bool) -> bool {
    want == got || (whitespace && want.split_whitespace().eq(got.split_whitespace()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre<'a>(texts: &[&'a str], lead: usize, trail: usize) -> PreImage<'a> {
        PreImage {
            texts: texts.to_vec(),
            lead,
            trail,
        }
    }

    #[test]
    fn edge_context_may_differ_but_not_the_middle() {
        let file = ["a", "b", "c", "OLD", "d", "e", "f"];
        // 3 context, 1 removed, 3 context.
        let hunk = pre(&["A", "b", "c", "OLD", "d", "e", "f"], 3, 3);
        let (pos, fuzz) = find_fuzzy(&file, &hunk, 0, 0).unwrap();
        assert_eq!((pos, fuzz.differing, fuzz.whitespace), (0, 1, false));

        // A context line between two changes is never ignored.
        let file = ["a", "b", "c", "OLD", "d", "OLD2", "e", "f", "g"];
        let middle = pre(&["a", "b", "c", "OLD", "D", "OLD2", "e", "f", "g"], 3, 3);
        assert_eq!(find_fuzzy(&file, &middle, 0, 0).map(|(p, _)| p), None);

        let removed = pre(&["a", "b", "c", "NEW", "d", "OLD2", "e", "f", "g"], 3, 3);
        assert_eq!(find_fuzzy(&file, &removed, 0, 0), None);
    }

    #[test]
    fn whitespace_only_differences_match_but_tokens_must_agree() {
        let file = ["fn x() {", "    let a = 1;", "}"];
        let hunk = pre(&["fn x() {", "  let  a = 1;", "}"], 1, 1);
        let (_, fuzz) = find_fuzzy(&file, &hunk, 0, 0).unwrap();
        assert_eq!(
            fuzz,
            Fuzz {
                differing: 0,
                whitespace: true
            }
        );

        let glued = pre(&["fn x() {", "leta = 1;", "}"], 1, 1);
        assert_eq!(find_fuzzy(&file, &glued, 0, 0), None);
    }

    #[test]
    fn most_of_the_hunk_must_match() {
        let file = ["x", "y", "z"];
        // 2 context lines + an insertion: fuzz 2 would ignore everything.
        let hunk = pre(&["p", "q"], 2, 0);
        assert_eq!(find_fuzzy(&file, &hunk, 0, 0), None);
    }

    #[test]
    fn describe_reads_well() {
        let both = Fuzz {
            differing: 2,
            whitespace: true,
        };
        assert_eq!(
            both.describe(),
            "2 context lines differed; whitespace differences ignored"
        );
        assert_eq!(
            Fuzz {
                differing: 1,
                whitespace: false
            }
            .describe(),
            "1 context line differed"
        );
    }
}
