//! A small deterministic generator for property tests: the same seed gives the same
//! inputs, so a failure reproduces, and no dependency is needed.

/// xorshift64* (Vigna): 64-bit state, full period, good enough to draw test inputs.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` > 0; the slight bias of `%` does not matter for tests).
    pub fn below(&mut self, n: u64) -> usize {
        (self.next_u64() % n) as usize
    }
}
