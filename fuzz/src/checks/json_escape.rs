//! `json_escape`: cmdr's own JSON string escaper for output chunks
//! (`cmdr::json_escape::escape_into`, SIMD kernels over raw pointers), held to
//! `serde_json` byte for byte.
//!
//! Input: one byte `n`, then the text (invalid UTF-8 replaced). The text is escaped whole
//! and from each of its first `n % 64` character boundaries (so every kernel meets its
//! blocks at every alignment), each time after a prefix of `n % 7` bytes already in the
//! output (the escaper appends).
//!
//! Properties:
//! - nothing panics;
//! - what is appended is exactly `serde_json::to_string` of the text, quotes included;
//! - the prefix is left as it was.

/// Checks the properties above on one input.
pub fn check(data: &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let prefix = vec![b'p'; usize::from(n % 7)];
    let starts = text
        .char_indices()
        .map(|(i, _)| i)
        .take(usize::from(n % 64).max(1));
    for start in starts {
        let part = &text[start..];
        let mut out = prefix.clone();
        cmdr::json_escape::escape_into(part, &mut out);
        let expected = serde_json::to_string(part).expect("a string serialises");
        assert_eq!(&out[..prefix.len()], &prefix[..], "the prefix changed");
        assert_eq!(
            &out[prefix.len()..],
            expected.as_bytes(),
            "escaping {part:?} from {start}"
        );
    }
}
