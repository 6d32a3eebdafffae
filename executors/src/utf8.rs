//! Incremental UTF-8 decoding of byte streams (process output): a character split across
//! two reads is joined, invalid bytes become U+FFFD, nothing is dropped.

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

    /// Flushes a held-back incomplete character as U+FFFD (end of stream).
    pub fn finish(&mut self, out: &mut String) {
        if !self.carry.is_empty() {
            self.carry.clear();
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }

    fn decode_slice(&mut self, mut rest: &[u8], out: &mut String) {
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
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

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        assert_eq!(decode_chunks(&[b"a\xFFb", b"\xC3"]), "a\u{FFFD}b\u{FFFD}");
        assert_eq!(decode_chunks(&[b"\xE2\x82", b"x"]), "\u{FFFD}x");
    }
}
