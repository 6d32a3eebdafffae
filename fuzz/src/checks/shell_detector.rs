//! `shell_detector`: the incremental `<shell>…</shell>` detector of the agent loop
//! (`cmdr::agent::ShellTagDetector`), fed the same text cut into chunks in different ways.
//!
//! Input: one byte `n`, then `n % 16` little-endian `u16` cut positions, then the text
//! (invalid UTF-8 replaced). The detector takes `&str` chunks, so cuts are moved back to
//! the nearest character boundary (a multi-byte character is never split: the caller
//! decodes the model's bytes before feeding them).
//!
//! Properties:
//! - nothing panics;
//! - the commands found, their offsets and the unterminated `<shell>` reported by
//!   `finish` are the same whether the text is fed whole, in the fuzzed chunks, one
//!   character at a time, or after the detector was reused;
//! - they are what the grammar's regular expression `(?s)<shell>(.*?)</shell>` finds
//!   (blank commands dropped), and each offset range of the text is `<shell>`, the
//!   command with surrounding whitespace, `</shell>`.

use std::sync::LazyLock;

use cmdr::agent::{DetectedCommand, ShellTagDetector};
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

    assert_eq!(whole, reference(&text), "differs from the grammar's regex");
    for found in &whole.0 {
        let span = text.get(found.start..found.end).unwrap_or_default();
        let inner = span
            .strip_prefix("<shell>")
            .and_then(|s| s.strip_suffix("</shell>"));
        assert_eq!(inner.map(str::trim), Some(found.command.as_str()));
    }
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

/// The grammar: the regex, left to right, blank commands dropped; the unterminated
/// `<shell>` is the first one after the last match.
fn reference(text: &str) -> Detected {
    static GRAMMAR: LazyLock<Result<Regex, regex::Error>> =
        LazyLock::new(|| Regex::new(r"(?s)<shell>(.*?)</shell>"));
    let re = match &*GRAMMAR {
        Ok(re) => re,
        Err(e) => panic!("bad reference regex: {e}"),
    };
    let mut commands = Vec::new();
    let mut last_end = 0;
    for caps in re.captures_iter(text) {
        let (Some(whole), Some(inner)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        last_end = whole.end();
        let command = inner.as_str().trim();
        if !command.is_empty() {
            commands.push(DetectedCommand {
                command: command.to_owned(),
                start: whole.start(),
                end: whole.end(),
            });
        }
    }
    let rest = text.get(last_end..).unwrap_or_default();
    let unterminated = rest.find("<shell>").map(|i| last_end + i);
    (commands, unterminated)
}
