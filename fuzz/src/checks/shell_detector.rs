//! `shell_detector`: the incremental tag detector of the agent loop
//! (`cmdr::agent::ShellTagDetector`: `<shell>`, `<ask>` and the process tags, with
//! attributes), fed the same text cut into chunks in different ways.
//!
//! Input: one byte `n`, then `n % 16` little-endian `u16` cut positions, then the text
//! (invalid UTF-8 replaced). The detector takes `&str` chunks, so cuts are moved back to
//! the nearest character boundary (a multi-byte character is never split: the caller
//! decodes the model's bytes before feeding them).
//!
//! Properties:
//! - nothing panics;
//! - the commands found (with their attributes), their offsets and the unterminated tag
//!   reported by `finish` are the same whether the text is fed whole, in the fuzzed
//!   chunks, one character at a time, or after the detector was reused;
//! - in texts without code fences (no ```` ``` ```` or `~~~`), they are what the
//!   grammar's regular expression finds (`cmdr::agent::OPEN_TAG_PATTERN` at the earliest
//!   `<` where it matches within `MAX_OPEN_TAG` bytes, then the first closing tag of its
//!   kind after it unless the tag closes itself; blank `<shell>`/`<ask>` dropped), and
//!   each offset range of the text is the opening tag, the command with surrounding
//!   whitespace, the closing tag.

use std::sync::OnceLock;

use cmdr::agent::{
    Attribute, DetectedCommand, ShellTagDetector, TagKind, ATTRIBUTE_PATTERN, MAX_OPEN_TAG,
    OPEN_TAG_PATTERN,
};
use regex::Regex;

use super::input::Bytes;

/// What a detector reports for a whole text.
type Detected = (Vec<DetectedCommand>, Option<usize>);

/// Checks every property on one input.
pub fn check(data: &[u8]) {
    let mut input = Bytes::new(data);
    let cuts = usize::from(input.byte() % 16);
    let raw_cuts: Vec<u16> = (0..cuts).map(|_| input.u16()).collect();
    let text = input.rest_text();
    let chunks = split(&text, &raw_cuts);
    assert_eq!(chunks.concat(), text);

    let whole = feed(&mut ShellTagDetector::new(), [text.as_str()]);
    let chunked = feed(&mut ShellTagDetector::new(), chunks.iter().copied());
    assert_eq!(
        chunked, whole,
        "chunks {chunks:?} changed what was detected"
    );
    let by_char = feed(&mut ShellTagDetector::new(), char_chunks(&text));
    assert_eq!(
        by_char, whole,
        "feeding one char at a time changed the result"
    );

    let mut reused = ShellTagDetector::new();
    feed(&mut reused, ["<shell>left open ", "</sh"]);
    let again = feed(&mut reused, chunks.iter().copied());
    assert_eq!(again, whole, "a detector reused after finish() differs");

    if !text.contains("```") && !text.contains("~~~") {
        assert_eq!(whole, reference(&text), "differs from the grammar");
    }
    for found in &whole.0 {
        let span = text.get(found.start..found.end).unwrap_or_default();
        let tag = patterns().0.find(span).map_or(0, |m| m.end());
        let inner = span
            .get(tag..)
            .unwrap_or_default()
            .strip_suffix(found.kind.close_tag())
            .unwrap_or_default();
        assert!(tag > 0, "{span:?} does not start with an opening tag");
        assert_eq!(inner.trim(), found.command.as_str());
    }
}

/// The grammar's opening tag (anchored) and attribute patterns, compiled once.
fn patterns() -> &'static (Regex, Regex) {
    static PATTERNS: OnceLock<(Regex, Regex)> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let open = Regex::new(&format!("^(?:{OPEN_TAG_PATTERN})"));
        let attribute = Regex::new(ATTRIBUTE_PATTERN);
        match (open, attribute) {
            (Ok(open), Ok(attribute)) => (open, attribute),
            _ => panic!("the grammar's patterns do not compile"),
        }
    })
}

/// `text` cut at `cuts` (each taken modulo the length, moved back to a char boundary).
fn split<'t>(text: &'t str, cuts: &[u16]) -> Vec<&'t str> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|&c| floor_boundary(text, usize::from(c) % (text.len() + 1)))
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut from = 0;
    for point in points {
        chunks.push(text.get(from..point).unwrap_or_default());
        from = point;
    }
    chunks.push(text.get(from..).unwrap_or_default());
    chunks
}

/// The largest char boundary at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Every character as its own chunk.
fn char_chunks(text: &str) -> impl Iterator<Item = &str> {
    text.char_indices()
        .map(move |(i, c)| text.get(i..i + c.len_utf8()).unwrap_or_default())
}

/// Feeds the chunks, then finishes.
fn feed<'c>(
    detector: &mut ShellTagDetector,
    chunks: impl IntoIterator<Item = &'c str>,
) -> Detected {
    let mut found = Vec::new();
    for chunk in chunks {
        detector.feed(chunk, &mut found);
    }
    (found, detector.finish())
}

/// The grammar, by regular expression: the opening tag at the earliest `<` where it
/// matches (within `MAX_OPEN_TAG` bytes), then the first closing tag of its kind after it
/// unless it closes itself; blank `<shell>`/`<ask>` dropped; an opening tag never closed
/// is the unterminated one (it takes the rest of the text).
fn reference(text: &str) -> Detected {
    let (open, attribute) = patterns();
    let mut commands = Vec::new();
    let mut pos = 0;
    while let Some(i) = text.get(pos..).unwrap_or_default().find('<') {
        let start = pos + i;
        let rest = text.get(start..).unwrap_or_default();
        let found = open.captures(rest).filter(|c| c[0].len() <= MAX_OPEN_TAG);
        let Some(tag) = found else {
            pos = start + 1;
            continue;
        };
        let Some(kind) = TagKind::ALL.into_iter().find(|k| k.name() == &tag[1]) else {
            panic!("the pattern matched an unknown tag {:?}", &tag[1]);
        };
        let attributes = attribute
            .captures_iter(&tag[2])
            .map(|a| Attribute {
                name: a[1].to_owned(),
                value: a
                    .get(2)
                    .or(a.get(3))
                    .or(a.get(4))
                    .map(|v| v.as_str().to_owned()),
            })
            .collect();
        let from = start + tag[0].len();
        let (content, end) = if &tag[3] == "/" {
            ("", from)
        } else {
            let after = text.get(from..).unwrap_or_default();
            let Some(i) = after.find(kind.close_tag()) else {
                return (commands, Some(start));
            };
            (
                after.get(..i).unwrap_or_default(),
                from + i + kind.close_tag().len(),
            )
        };
        let command = content.trim();
        let blank_skipped = matches!(kind, TagKind::Shell | TagKind::Ask);
        if !command.is_empty() || !blank_skipped {
            commands.push(DetectedCommand {
                kind,
                command: command.to_owned(),
                attributes,
                start,
                end,
            });
        }
        pos = end;
    }
    (commands, None)
}
