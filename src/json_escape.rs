//! JSON string escaping for large output chunks, byte for byte as `serde_json` writes it.
//!
//! Command output is dense with bytes JSON must escape (a build log has a `"`, `\`, tab or
//! newline every dozen bytes), and that is where SIMD escapers that go back to their
//! vector loop after each escape lose their speed: `json-escape-simd` (sonic-rs's kernel)
//! reloaded and re-tested 128 bytes per escaped byte, ~2.3 GB/s on the bench's text and
//! the largest single cost of `cmdr exec` printing output (BENCHMARKS.md, issue 19).
//! Here each 32-byte block (16 without AVX2) is tested once; the escapes it holds are
//! walked through its bit mask, each costing one table store and one block copy of what
//! follows it.
//!
//! The escapes are `serde_json`'s exactly: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, the
//! other control characters as `\u00xx` (lowercase hex), nothing else (not DEL, not
//! U+2028). The tests hold every byte class, at every offset, to `serde_json`.

#![allow(
    unsafe_code,
    reason = "SIMD intrinsics and raw-pointer stores into reserved capacity; held byte for byte to serde_json by the tests and the json_escape fuzz target"
)]

/// Bytes written past the end of the text at most: a block store reaches one block beyond
/// its last meaningful byte, an escape store 8 bytes beyond its start.
const SLACK: usize = 64;

/// An escape sequence padded to 8 bytes (stored whole), and its length.
#[derive(Clone, Copy)]
struct Escape {
    bytes: [u8; 8],
    len: u8,
}

/// The escape of every byte below `TABLE_LEN` (`len` 1: the byte itself); every byte
/// that needs one (`0x00..=0x1f`, `"`, `\`) is below it.
const TABLE_LEN: usize = 0x60;

/// Escapes by byte value.
static ESCAPES: [Escape; TABLE_LEN] = table();

const fn table() -> [Escape; TABLE_LEN] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut table = [Escape {
        bytes: [0; 8],
        len: 1,
    }; TABLE_LEN];
    let mut b = 0;
    while b < TABLE_LEN {
        let short = match b as u8 {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x0c => b'f',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            _ => 0,
        };
        table[b] = if short != 0 {
            Escape {
                bytes: [b'\\', short, 0, 0, 0, 0, 0, 0],
                len: 2,
            }
        } else if b < 0x20 {
            Escape {
                bytes: [b'\\', b'u', b'0', b'0', HEX[b >> 4], HEX[b & 0xf], 0, 0],
                len: 6,
            }
        } else {
            Escape {
                bytes: [b as u8, 0, 0, 0, 0, 0, 0, 0],
                len: 1,
            }
        };
        b += 1;
    }
    table
}

/// Whether JSON needs `byte` escaped.
#[inline]
fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Bytes escaped per reservation: the room reserved is 6× what is escaped (every byte may
/// become `\u00xx`), so a huge text is escaped in pieces rather than reserving 6× its
/// size up front. Escaping looks only at ASCII bytes, so a piece may end anywhere, even
/// inside a multi-byte character.
const PIECE: usize = 64 * 1024;

/// Appends `text` to `out` as a JSON string (with its quotes), exactly as
/// `serde_json::to_writer(out, text)` would.
pub fn escape_into(text: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for piece in text.as_bytes().chunks(PIECE) {
        // Every byte may become `\u00xx`; plus what the stores overrun.
        out.reserve(piece.len() * 6 + SLACK);
        let start = out.len();
        // SAFETY: `out` has `piece.len() * 6 + SLACK` bytes of spare capacity from
        // `start`; the body writes at most 6 bytes per input byte and overruns its end by
        // at most SLACK - 2 bytes (see `body`), so every write stays inside the capacity;
        // the `written` bytes it reports are initialised before `set_len`.
        unsafe {
            let written = body(piece, out.as_mut_ptr().add(start));
            out.set_len(start + written);
        }
    }
    out.push(b'"');
}

/// Writes the escaped `src` at `dst`; returns its length.
///
/// # Safety
/// `dst` must be valid for `6 * src.len() + SLACK - 2` bytes of writes.
unsafe fn body(src: &[u8], dst: *mut u8) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present; the caller's guarantee is `x86::avx2`'s.
            return unsafe { x86::avx2(src, dst) };
        }
        // SAFETY: SSE2 is part of x86_64; the caller's guarantee is `x86::sse2`'s.
        unsafe { x86::sse2(src, dst) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: the caller's guarantee.
        unsafe { tail(src, 0, dst) }
    }
}

/// Escapes `src[from..]` one byte at a time at `dst`; returns the bytes written.
///
/// # Safety
/// `dst` must be valid for `6 * (src.len() - from) + 7` bytes of writes.
#[inline]
unsafe fn tail(src: &[u8], from: usize, dst: *mut u8) -> usize {
    let mut d = dst;
    for &byte in src.get(from..).unwrap_or_default() {
        // SAFETY: at most 6 bytes are kept per byte; the 8-byte store overruns by ≤ 7,
        // inside the caller's guarantee.
        unsafe {
            if needs_escape(byte) {
                let escape = ESCAPES[byte as usize];
                (d as *mut [u8; 8]).write_unaligned(escape.bytes);
                d = d.add(escape.len as usize);
            } else {
                d.write(byte);
                d = d.add(1);
            }
        }
    }
    // SAFETY: both pointers are into the same buffer, `d` not before `dst`.
    unsafe { d.offset_from(dst) as usize }
}

/// The block loop, stamped out per vector width.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{tail, ESCAPES};

    /// Defines `pub(super) unsafe fn $name(src, dst) -> usize`: escapes `src` at `dst`,
    /// `$ops::W` bytes at a time with the load, store and mask of module `$ops`; returns
    /// the bytes written.
    macro_rules! block_loop {
        ($name:ident, $feature:literal, $ops:ident) => {
            /// # Safety
            /// `dst` must be valid for `6 * src.len() + SLACK - 2` bytes of writes, and
            /// the CPU must have the feature this function enables.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $name(src: &[u8], dst: *mut u8) -> usize {
                use $ops::{load, mask, store, W};
                let (s, n) = (src.as_ptr(), src.len());
                let (mut i, mut d) = (0usize, dst);
                // Two blocks must be readable: after an escape, the rest of the block is
                // copied with a whole-block load that reaches into the next one.
                while i + 2 * W <= n {
                    // SAFETY: every load is of W bytes starting at most W bytes after
                    // `i`, inside `src` (i + 2W ≤ n). Stores: `d` is at most 6 bytes per
                    // byte consumed past `dst`; a block store reaches ≤ W bytes past the
                    // last byte it keeps, an escape store ≤ 2 past its 6: inside the
                    // caller's guarantee (SLACK ≥ W + 8).
                    unsafe {
                        let block = load(s.add(i));
                        let mut bits = mask(block);
                        store(d, block);
                        if bits == 0 {
                            i += W;
                            d = d.add(W);
                            continue;
                        }
                        // Bytes [prev, prev + W) of the block are stored at `d`.
                        let mut prev = 0usize;
                        while bits != 0 {
                            let j = bits.trailing_zeros() as usize;
                            bits &= bits - 1;
                            d = d.add(j - prev);
                            let escape = ESCAPES[usize::from(*s.add(i + j))];
                            (d as *mut [u8; 8]).write_unaligned(escape.bytes);
                            d = d.add(usize::from(escape.len));
                            prev = j + 1;
                            store(d, load(s.add(i + prev)));
                        }
                        d = d.add(W - prev);
                        i += W;
                    }
                }
                // SAFETY: the rest is under 2W bytes, inside the caller's guarantee.
                unsafe {
                    let done = d.offset_from(dst) as usize;
                    done + tail(src, i, d)
                }
            }
        };
    }

    block_loop!(avx2, "avx2", ops256);
    block_loop!(sse2, "sse2", ops128);

    /// 32-byte blocks (AVX2).
    mod ops256 {
        use std::arch::x86_64::*;

        /// Block width.
        pub const W: usize = 32;

        /// Loads a block.
        ///
        /// # Safety
        /// `p` readable for `W` bytes; AVX2 present.
        #[inline]
        #[target_feature(enable = "avx2")]
        pub unsafe fn load(p: *const u8) -> __m256i {
            // SAFETY: the caller's guarantee.
            unsafe { _mm256_loadu_si256(p.cast()) }
        }

        /// Stores a block.
        ///
        /// # Safety
        /// `p` writable for `W` bytes; AVX2 present.
        #[inline]
        #[target_feature(enable = "avx2")]
        pub unsafe fn store(p: *mut u8, v: __m256i) {
            // SAFETY: the caller's guarantee.
            unsafe { _mm256_storeu_si256(p.cast(), v) }
        }

        /// One bit per byte that needs escaping (below 0x20, `"`, `\`).
        #[inline]
        #[target_feature(enable = "avx2")]
        pub fn mask(v: __m256i) -> u32 {
            let low = _mm256_set1_epi8(0x1f);
            let ctrl = _mm256_cmpeq_epi8(_mm256_max_epu8(v, low), low);
            let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
            let slash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
            _mm256_movemask_epi8(_mm256_or_si256(ctrl, _mm256_or_si256(quote, slash))) as u32
        }
    }

    /// 16-byte blocks (SSE2, every x86_64).
    mod ops128 {
        use std::arch::x86_64::*;

        /// Block width.
        pub const W: usize = 16;

        /// Loads a block.
        ///
        /// # Safety
        /// `p` readable for `W` bytes.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub unsafe fn load(p: *const u8) -> __m128i {
            // SAFETY: the caller's guarantee.
            unsafe { _mm_loadu_si128(p.cast()) }
        }

        /// Stores a block.
        ///
        /// # Safety
        /// `p` writable for `W` bytes.
        #[inline]
        #[target_feature(enable = "sse2")]
        pub unsafe fn store(p: *mut u8, v: __m128i) {
            // SAFETY: the caller's guarantee.
            unsafe { _mm_storeu_si128(p.cast(), v) }
        }

        /// One bit per byte that needs escaping (below 0x20, `"`, `\`).
        #[inline]
        #[target_feature(enable = "sse2")]
        pub fn mask(v: __m128i) -> u32 {
            let low = _mm_set1_epi8(0x1f);
            let ctrl = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let slash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            _mm_movemask_epi8(_mm_or_si128(ctrl, _mm_or_si128(quote, slash))) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmdr_test_support::rng::Rng;

    fn serde(text: &str) -> Vec<u8> {
        serde_json::to_vec(text).expect("a string serialises")
    }

    /// What `escape_into` appends, and what each kernel this CPU can run writes: all
    /// must be the same.
    fn ours(text: &str) -> Vec<u8> {
        let mut out = b"prefix".to_vec();
        escape_into(text, &mut out);
        out.drain(..6);
        type Kernel = unsafe fn(&[u8], *mut u8) -> usize;
        let bytewise: Kernel = |s, d| {
            // SAFETY: called only below, with the capacity every kernel requires.
            unsafe { tail(s, 0, d) }
        };
        let mut kernels: Vec<(&str, Kernel)> = vec![("bytewise", bytewise)];
        #[cfg(target_arch = "x86_64")]
        {
            kernels.push(("sse2", x86::sse2));
            if std::is_x86_feature_detected!("avx2") {
                kernels.push(("avx2", x86::avx2));
            }
        }
        for (name, kernel) in kernels {
            let mut alone = Vec::with_capacity(6 * text.len() + 2 + SLACK);
            // SAFETY: the capacity is the kernels' requirement; they initialise `written`
            // bytes.
            unsafe {
                let written = kernel(text.as_bytes(), alone.as_mut_ptr());
                alone.set_len(written);
            }
            assert_eq!(alone, out[1..out.len() - 1], "{name} kernel on {text:?}");
        }
        out
    }

    #[test]
    fn every_byte_value_escapes_as_serde_json_does_at_every_offset_of_two_blocks() {
        for c in (0u32..0x100).chain([0x2028, 0x2029, 0xfeff, 0x1f600]) {
            let Some(c) = char::from_u32(c) else { continue };
            for pad in 0..80 {
                for after in [0, 1, 31, 32, 33, 64, 100] {
                    let text = format!("{}{c}{}", "a".repeat(pad), "b".repeat(after));
                    assert_eq!(ours(&text), serde(&text), "{c:?} at {pad}, {after} after");
                }
            }
        }
    }

    #[test]
    fn random_text_dense_with_escapes_matches_serde_json() {
        let alphabet: Vec<char> = "\"\\\n\t\r\u{8}\u{c}\u{0}\u{1f}\u{7f} aZ~é€😀\u{2028}"
            .chars()
            .collect();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..3000 {
            let len = (rng.next_u64() % 400) as usize;
            let dense = rng.next_u64() % 4;
            let text: String = (0..len)
                .map(|_| {
                    let r = rng.next_u64();
                    if r % 4 < dense {
                        alphabet[(r >> 8) as usize % alphabet.len()]
                    } else {
                        'x'
                    }
                })
                .collect();
            assert_eq!(ours(&text), serde(&text), "round {round}: {text:?}");
        }
    }

    #[test]
    fn text_of_only_control_characters_fills_the_worst_case_exactly() {
        let text = "\u{1}".repeat(1000);
        let out = ours(&text);
        assert_eq!(out.len(), 6 * 1000 + 2);
        assert_eq!(out, serde(&text));
    }

    #[test]
    fn a_text_longer_than_a_piece_is_escaped_whole_and_reserves_about_what_it_needs() {
        // Dense with escapes and multi-byte characters, so pieces end inside both.
        let line = "é€ \"quoted\"\t\\ 😀\n";
        let text = line.repeat(16 * PIECE / line.len() + 7);
        assert_eq!(ours(&text), serde(&text));
        let mut out = Vec::new();
        escape_into(&text, &mut out);
        // The buffer grows by doubling, from what was written plus one piece's room: not
        // the 6× of the whole text that a single reservation would take.
        let bound = 2 * (out.len() + 6 * PIECE + SLACK);
        assert!(
            out.capacity() <= bound && bound < 6 * text.len(),
            "reserved {} for {} bytes escaped to {}",
            out.capacity(),
            text.len(),
            out.len()
        );
    }

    #[test]
    fn empty_and_short_texts() {
        for text in ["", "a", "\"", "\\", "\n", "ab\u{0}", "é"] {
            assert_eq!(ours(text), serde(text), "{text:?}");
        }
    }
}
