//! Locating a hunk exactly: the stated line first, then outward (+1, −1, +2, −2 …).

use super::parse::{Hunk, Kind};

/// A hunk's old side (its context and removed lines), which must be found in the file.
#[derive(Debug)]
pub(crate) struct PreImage<'p> {
    /// The lines' texts, in order.
    pub texts: Vec<&'p str>,
    /// How many context lines come before the first removed/added line.
    pub lead: usize,
    /// How many context lines come after the last removed/added line.
    pub trail: usize,
}

impl<'p> PreImage<'p> {
    /// The old side of `hunk`.
    pub(crate) fn new(hunk: &Hunk<'p>) -> Self {
        let texts: Vec<&str> = hunk
            .lines
            .iter()
            .filter(|l| l.kind != Kind::Add)
            .map(|l| l.text)
            .collect();
        let is_change = |kind: Kind| kind != Kind::Context;
        let lead = hunk.lines.iter().take_while(|l| !is_change(l.kind)).count();
        let trail = hunk
            .lines
            .iter()
            .rev()
            .take_while(|l| !is_change(l.kind))
            .count();
        PreImage {
            lead: lead.min(texts.len()),
            trail: trail.min(texts.len()),
            texts,
        }
    }

    /// Number of lines.
    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    /// Whether the hunk only adds lines.
    pub(crate) fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// Candidate start lines in `lo..=hi`: `center` (clamped) first, then +1, −1, +2, −2 …
/// Empty when `lo > hi`.
pub(crate) fn outward(center: usize, lo: usize, hi: usize) -> impl Iterator<Item = usize> {
    let valid = lo <= hi;
    let center = center.max(lo).min(hi);
    let max_distance = if valid {
        (center - lo).max(hi - center)
    } else {
        0
    };
    let rest = (1..=max_distance).flat_map(move |d| {
        let up = center.checked_add(d).filter(|&p| p <= hi);
        let down = center.checked_sub(d).filter(|&p| p >= lo);
        up.into_iter().chain(down)
    });
    valid.then_some(center).into_iter().chain(rest)
}

/// The last start line at which `len` lines fit in a file of `file_len` lines.
pub(crate) fn last_start(file_len: usize, len: usize) -> Option<usize> {
    file_len.checked_sub(len)
}

/// Whether `pre` matches `file` exactly at `pos`.
pub(crate) fn matches_at(file: &[&str], pos: usize, pre: &[&str]) -> bool {
    match file.get(pos..pos.saturating_add(pre.len())) {
        Some(window) => window == pre,
        None => false,
    }
}

/// The exact match of `pre` nearest to `expected`, at or after `lo`.
pub(crate) fn find_exact(file: &[&str], pre: &[&str], expected: usize, lo: usize) -> Option<usize> {
    let hi = last_start(file.len(), pre.len())?;
    let first = pre.first()?;
    outward(expected, lo, hi).find(|&pos| {
        // Cheap first-line check before comparing the whole window.
        file.get(pos) == Some(first) && matches_at(file, pos, pre)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outward_alternates_and_stays_in_bounds() {
        let order: Vec<usize> = outward(5, 3, 9).collect();
        assert_eq!(order, [5, 6, 4, 7, 3, 8, 9]);
        assert_eq!(outward(0, 0, 0).collect::<Vec<_>>(), [0]);
        assert_eq!(outward(100, 2, 4).collect::<Vec<_>>(), [4, 3, 2]);
        assert!(outward(1, 5, 4).next().is_none());
    }

    #[test]
    fn find_exact_prefers_the_nearest_match() {
        let file = ["a", "x", "b", "x", "b", "a", "x", "b"];
        assert_eq!(find_exact(&file, &["x", "b"], 5, 0), Some(6));
        assert_eq!(find_exact(&file, &["x", "b"], 2, 0), Some(3));
        assert_eq!(find_exact(&file, &["x", "b"], 0, 4), Some(6));
        assert_eq!(find_exact(&file, &["b", "q"], 0, 0), None);
        assert_eq!(find_exact(&file, &["a"; 9], 0, 0), None);
    }
}
