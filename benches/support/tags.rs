//! The `<shell>` detector bench's inputs and sides: the two texts, the chunking, the
//! detector fed in chunks or whole, and the whole-text references (the grammar's regex,
//! and a plain substring search for the tag pairs). Every side returns the commands as
//! `DetectedCommand`s; they are compared with the regex's outside the timed part.

use std::time::Instant;

use cmdr::agent::{DetectedCommand, ShellTagDetector, TagKind};
use regex::Regex;

use crate::harness::{check_failed, ensure, Failure, Sample};

/// The grammar as a regular expression for the bench's texts, which hold only bare
/// `<shell>` tags (see `src/agent/detector.rs` for the whole grammar).
pub const PATTERN: &str = r"(?s)<shell>(.*?)</shell>";

/// Prose as a model writes it around commands: mostly letters, some UTF-8, and `<` in
/// comparisons, generics, HTML and tag lookalikes (none of them a `<shell>` tag), about
/// one `<` per 100 bytes.
const PROSE: &[&str] = &[
    "I'll start by looking at how the project is laid out, then read the main module. ",
    "The loop stops early if a < b, so the second branch is never taken here.\n",
    "The function returns a Vec<String> of names, sorted by length and then by name. ",
    "Résumé: the café's build — finally — passes on the first try; naïve tests pass too. ",
    "Values with x <= 10 are kept; the rest go to the overflow list for later.\n",
    "In the template, <b>bold</b> and <br> are left as they are by the renderer. ",
    "The file is read in chunks of 64 KiB, so memory use stays flat as it grows.\n",
    "A <shel> or <shellx> tag is a typo, not a command, and must be left alone. ",
    "Each step is logged with its duration and the exit code of the process.\n",
    "Option<usize> is None when nothing is open, else the offset of the tag. ",
];

/// Short commands for the tag-dense text (a few with `<` inside).
const COMMANDS: &[&str] = &[
    "ls -la src/",
    "cargo test -p cmdr 2>&1 | tail -5",
    "grep -rn 'fn main' .",
    "sort < names.txt | uniq -c",
    " cat README.md ",
    "wc -l src/*.rs",
    "git status --short",
];

/// Short lines between the commands of the tag-dense text.
const LEAD_INS: &[&str] = &[
    "Let me look at the files first.\n",
    "Now the tests; x < y holds here.\n",
    "Then the build output:\n",
    "And the diff of the last change.\n",
    "Checking the line counts.\n",
];

/// About `len` bytes of prose with no `<shell>` tag.
pub fn plain_text(len: usize) -> String {
    let mut text = String::with_capacity(len + 128);
    for sentence in PROSE.iter().cycle() {
        if text.len() >= len {
            break;
        }
        text.push_str(sentence);
    }
    text
}

/// About `len` bytes with a short command every ~100 bytes: a line of prose, a lead-in,
/// then the command on its own line.
pub fn dense_text(len: usize) -> String {
    let mut text = String::with_capacity(len + 256);
    let mut i = 0;
    while text.len() < len {
        // Different cycle lengths, so the combinations vary.
        if i % 3 == 0 {
            text.push_str(PROSE.get(i % PROSE.len()).copied().unwrap_or_default());
        }
        text.push_str(
            LEAD_INS
                .get(i % LEAD_INS.len())
                .copied()
                .unwrap_or_default(),
        );
        text.push_str("<shell>");
        text.push_str(
            COMMANDS
                .get(i % COMMANDS.len())
                .copied()
                .unwrap_or_default(),
        );
        text.push_str("</shell>\n");
        i += 1;
    }
    text
}

/// `text` cut into chunks of about `size` bytes (extended to the next char boundary).
pub fn chunks(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / size + 1);
    let mut from = 0;
    while from < text.len() {
        let mut to = (from + size).min(text.len());
        while !text.is_char_boundary(to) {
            to += 1;
        }
        out.extend(text.get(from..to));
        from = to;
    }
    out
}

/// The regex of the grammar.
pub fn regex() -> Result<Regex, Failure> {
    Regex::new(PATTERN).map_err(|e| check_failed(format!("bad pattern: {e}")))
}

/// The commands of `text` by the regex (blank ones dropped, as the detector does).
pub fn by_regex(re: &Regex, text: &str) -> Vec<DetectedCommand> {
    re.captures_iter(text)
        .filter_map(|caps| {
            let whole = caps.get(0)?;
            let command = caps.get(1)?.as_str().trim();
            (!command.is_empty()).then(|| DetectedCommand {
                kind: TagKind::Shell,
                command: command.to_owned(),
                attributes: Vec::new(),
                start: whole.start(),
                end: whole.end(),
            })
        })
        .collect()
}

/// The commands of `text` by substring search: the next `<shell>`, then the first
/// `</shell>` after it (the standard library's `str::find`).
pub fn by_find(text: &str) -> Vec<DetectedCommand> {
    const OPEN: &str = "<shell>";
    const CLOSE: &str = "</shell>";
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(start) = text.get(pos..).and_then(|t| t.find(OPEN)).map(|i| pos + i) {
        let body = start + OPEN.len();
        let Some(close) = text
            .get(body..)
            .and_then(|t| t.find(CLOSE))
            .map(|i| body + i)
        else {
            break;
        };
        pos = close + CLOSE.len();
        let command = text.get(body..close).unwrap_or_default().trim();
        if !command.is_empty() {
            out.push(DetectedCommand {
                kind: TagKind::Shell,
                command: command.to_owned(),
                attributes: Vec::new(),
                start,
                end: pos,
            });
        }
    }
    out
}

/// One sample of the detector fed `chunks` in order.
pub fn detector_sample(chunks: &[&str], expected: &[DetectedCommand]) -> Sample {
    let started = Instant::now();
    let mut detector = ShellTagDetector::new();
    let mut out = Vec::new();
    for chunk in chunks {
        detector.feed(chunk, &mut out);
    }
    let open = detector.finish();
    let elapsed = started.elapsed();
    ensure(open.is_none(), || {
        format!("the detector reports an unterminated <shell> at {open:?}")
    })?;
    same("the detector", &out, expected)?;
    Ok(elapsed)
}

/// One sample of a whole-text reference.
pub fn reference_sample(
    name: &str,
    expected: &[DetectedCommand],
    find: impl FnOnce() -> Vec<DetectedCommand>,
) -> Sample {
    let started = Instant::now();
    let out = find();
    let elapsed = started.elapsed();
    same(name, &out, expected)?;
    Ok(elapsed)
}

/// Fails unless `got` is `expected`, naming the first difference.
pub fn same(
    side: &str,
    got: &[DetectedCommand],
    expected: &[DetectedCommand],
) -> Result<(), Failure> {
    if got == expected {
        return Ok(());
    }
    let first = got
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(expected.len()));
    Err(check_failed(format!(
        "{side}: {} commands, the regex {}; first difference at #{first}: {:?} vs {:?}",
        got.len(),
        expected.len(),
        got.get(first),
        expected.get(first)
    )))
}
