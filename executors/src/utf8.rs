//! Incremental UTF-8 decoding of byte streams (process output): a character split across
//! two reads is joined, invalid bytes become U+FFFD, nothing is dropped.

/// `String::from_utf8` validated with SIMD (`simdutf8`); on failure, the bytes back and
/// where the first error is (`valid_up_to`, and `error_len`: `None` for an incomplete
/// last character).
#[allow(
    unsafe_code,
    reason = "skips std's second validation of bytes simdutf8 has just validated"
)]
pub fn string_from_utf8(bytes: Vec<u8>) -> Result<String, (Vec<u8>, usize, Option<usize>)> {
    match simdutf8::compat::from_utf8(&bytes) {
        // SAFETY: simdutf8 has just checked that every byte is valid UTF-8, which is all
        // `from_utf8_unchecked` requires (the same check `String::from_utf8` makes).
        Ok(_) => Ok(unsafe { String::from_utf8_unchecked(bytes) }),
        Err(e) => {
            let (valid, len) = (e.valid_up_to(), e.error_len());
            Err((bytes, valid, len))
        }
    }
}

/// Decodes one byte stream chunk by chunk.
#[derive(Debug, Default)]
pub struct Utf8Decoder {
    /// The start of a character whose remaining bytes have not arrived (≤ 3 bytes).
    carry: Vec<u8>,
}

impl Utf8Decoder {
    /// Appends the text of `bytes` to `out`, holding back an incomplete final character.
    pub fn decode(&mut self, bytes: &[u8], out: &mut String) {
        if self.carry.is_empty() {
            self.decode_slice(bytes, out);
        } else {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(bytes);
            self.decode_slice(&joined, out);
        }
    }

    /// [`Utf8Decoder::decode`] taking the bytes out of `buf` (left empty): when `out` is
    /// empty, valid bytes move into `out` without being copied
    /// (`buf` gets `out`'s old allocation; the caller gives it capacity again before its
    /// next read). A read of process output then reaches the result as it was read.
    ///
    /// A character held back from the previous read is put in front of this one (a memmove
    /// of the read, far cheaper than copying and re-validating it), so a read after a split
    /// character moves too.
    pub fn decode_from(&mut self, buf: &mut Vec<u8>, out: &mut String) {
        if !out.is_empty() {
            self.decode(buf, out);
            buf.clear();
            return;
        }
        if !self.carry.is_empty() {
            buf.splice(0..0, self.carry.drain(..));
        }
        let spare = std::mem::take(out).into_bytes();
        let bytes = std::mem::replace(buf, spare);
        match string_from_utf8(bytes) {
            Ok(text) => *out = text,
            Err((mut bytes, valid, None)) => {
                // Only an incomplete last character: hold it back, move the rest.
                self.carry = bytes.split_off(valid);
                *out = string_from_utf8(bytes).unwrap_or_default();
            }
            Err((bytes, _, Some(_))) => self.decode(&bytes, out),
        }
        buf.clear();
    }

    /// Flushes a held-back incomplete character as U+FFFD (end of stream).
    pub fn finish(&mut self, out: &mut String) {
        if !self.carry.is_empty() {
            self.carry.clear();
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }

    fn decode_slice(&mut self, mut rest: &[u8], out: &mut String) {
        loop {
            match simdutf8::compat::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(simdutf8::basic::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = after.get(bad..).unwrap_or_default();
                        }
                        None => {
                            self.carry = after.to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_chunks(chunks: &[&[u8]]) -> String {
        let mut d = Utf8Decoder::default();
        let mut out = String::new();
        for c in chunks {
            d.decode(c, &mut out);
        }
        d.finish(&mut out);
        out
    }

    #[test]
    fn joins_characters_split_across_chunks() {
        let euro = "€".as_bytes();
        assert_eq!(
            decode_chunks(&[b"a", &euro[..1], &euro[1..2], &euro[2..], b"b"]),
            "a€b"
        );
    }

    /// `decode_from` over the same chunks, each read into a buffer of its own.
    fn decode_moved(chunks: &[&[u8]]) -> String {
        let mut d = Utf8Decoder::default();
        let (mut out, mut whole) = (String::new(), String::new());
        for (i, c) in chunks.iter().enumerate() {
            let mut buf = c.to_vec();
            d.decode_from(&mut buf, &mut out);
            assert!(buf.is_empty());
            // Every other chunk is sent on (the next one moves in), the rest accumulate.
            if i % 2 == 0 {
                whole.push_str(&std::mem::take(&mut out));
            }
        }
        whole.push_str(&out);
        d.finish(&mut whole);
        whole
    }

    #[test]
    fn moving_decoded_bytes_gives_the_same_text_as_copying_them() {
        let euro = "€".as_bytes();
        let cases: [&[&[u8]]; 4] = [
            &[b"a", &euro[..1], &euro[1..2], &euro[2..], b"b"],
            &[b"a\xFFb", b"\xC3", b"x"],
            &[b"plain", b" text", b"\xE2\x82", b"\xACend"],
            &[b"\xE2\x82", b"x", b"", b"\xC3"],
        ];
        for chunks in cases {
            assert_eq!(decode_moved(chunks), decode_chunks(chunks), "{chunks:?}");
        }
    }

    #[test]
    fn a_read_after_a_split_character_moves_and_equals_lossy_decoding_of_the_whole() {
        // Text dense with multi-byte characters and some invalid bytes, cut at every
        // few positions: each cut may split a character that the next read completes
        // (or, for the invalid bytes, does not).
        let mut text = Vec::new();
        for i in 0..400u32 {
            text.extend_from_slice(format!("{i} é€😀 ").as_bytes());
            if i % 37 == 0 {
                text.extend_from_slice(b"\xE2\x82 \xFF");
            }
        }
        for step in [1, 2, 3, 5, 7, 64, 1000] {
            let chunks: Vec<&[u8]> = text.chunks(step).collect();
            let expected = String::from_utf8_lossy(&text);
            assert_eq!(decode_moved(&chunks), expected, "reads of {step} bytes");
            assert_eq!(decode_chunks(&chunks), expected, "reads of {step} bytes");
        }
    }

    #[test]
    fn simd_validation_agrees_with_std() {
        let cases: [&[u8]; 6] = [
            b"",
            b"plain",
            "é€😀".as_bytes(),
            b"a\xFFb",
            b"ab\xE2\x82",
            b"\xC3",
        ];
        for bytes in cases {
            let ours = string_from_utf8(bytes.to_vec());
            let std = String::from_utf8(bytes.to_vec()).map_err(|e| {
                let error = e.utf8_error();
                (e.into_bytes(), error.valid_up_to(), error.error_len())
            });
            assert_eq!(ours, std, "{bytes:?}");
        }
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        assert_eq!(decode_chunks(&[b"a\xFFb", b"\xC3"]), "a\u{FFFD}b\u{FFFD}");
        assert_eq!(decode_chunks(&[b"\xE2\x82", b"x"]), "\u{FFFD}x");
    }
}
