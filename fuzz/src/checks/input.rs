//! [`Bytes`]: structure drawn from the fuzz input, without the `arbitrary` crate (the
//! checks are also compiled into the main workspace's tests, which do not have it).
//!
//! Every read succeeds: past the end of the input it yields zeros, so any byte string is
//! a valid input and the fuzzer's mutations keep their meaning.

/// A cursor over the fuzz input.
#[derive(Debug, Clone)]
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// The next byte (0 once the input is used up).
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&first, rest)) => {
                self.data = rest;
                first
            }
            None => 0,
        }
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// Whether any input is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The rest of the input, consumed.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    /// The rest of the input as text (invalid UTF-8 replaced), consumed.
    pub fn rest_text(&mut self) -> String {
        String::from_utf8_lossy(self.rest()).into_owned()
    }
}
