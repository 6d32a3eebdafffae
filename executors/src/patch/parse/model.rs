//! What a parsed patch is made of.

/// What a hunk line does to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// ` ` : kept (must match).
    Context,
    /// `-` : removed (must match).
    Remove,
    /// `+` : added.
    Add,
}

/// One body line of a hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HunkLine<'p> {
    /// What the line does.
    pub kind: Kind,
    /// Its text, without the prefix character, the line ending or a trailing `\r`.
    pub text: &'p str,
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk<'p> {
    /// 1-based number in the patch.
    pub number: usize,
    /// The header up to its closing `@@`, for messages.
    pub header: &'p str,
    /// 1-based line of the header in the patch.
    pub line: usize,
    /// Old-side start line from the header (1-based; 0 for "before the first line").
    pub old_start: Option<usize>,
    /// New-side start line from the header.
    pub new_start: Option<usize>,
    /// Old/new line counts from the header, when it has both ranges.
    pub stated_counts: Option<(usize, usize)>,
    /// The body.
    pub lines: Vec<HunkLine<'p>>,
    /// A `\ No newline at end of file` marker follows the last old-side line.
    pub old_missing_newline: bool,
    /// A `\ No newline at end of file` marker follows the last new-side line.
    pub new_missing_newline: bool,
}

impl Hunk<'_> {
    /// Old-side line count recomputed from the body.
    pub(crate) fn old_len(&self) -> usize {
        self.lines.iter().filter(|l| l.kind != Kind::Add).count()
    }

    /// New-side line count recomputed from the body.
    pub(crate) fn new_len(&self) -> usize {
        self.lines.iter().filter(|l| l.kind != Kind::Remove).count()
    }
}

/// What the patch does to the file as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Changes an existing file.
    Modify,
    /// `--- /dev/null`: creates the file.
    Create,
    /// `+++ /dev/null`: deletes the file.
    Delete,
}

/// A parsed one-file patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedPatch<'p> {
    /// Create, modify or delete.
    pub target: Target,
    /// The hunks in patch order (possibly none).
    pub hunks: Vec<Hunk<'p>>,
    /// Most patch lines end in `\r\n`.
    pub crlf: bool,
}

/// A note when the header's counts disagree with the body.
pub(crate) fn recount_note(hunk: &Hunk<'_>) -> Option<String> {
    let stated = hunk.stated_counts?;
    let actual = (hunk.old_len(), hunk.new_len());
    if stated == actual {
        return None;
    }
    let old_start = hunk.old_start.unwrap_or(0);
    let new_start = hunk.new_start.unwrap_or(old_start);
    Some(format!(
        "recomputed header of hunk #{} from its body (@@ -{old_start},{} +{new_start},{} @@; \
         it said {})",
        hunk.number, actual.0, actual.1, hunk.header
    ))
}
