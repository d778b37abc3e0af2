//! Helpers shared by the crate's tests.

/// Random numbers and words over an alphabet from a fixed seed (xorshift), the same on every
/// run: the randomized tests compare a fast path with a plain one over many made-up values.
pub(crate) struct Words {
    state: u64,
    alphabet: Vec<char>,
}

impl Words {
    pub(crate) fn new(seed: u64, alphabet: &str) -> Words {
        Words {
            state: seed,
            alphabet: alphabet.chars().collect(),
        }
    }

    /// A number under `below`.
    pub(crate) fn below(&mut self, below: usize) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state % below as u64) as usize
    }

    /// A word of `len` characters of the alphabet.
    pub(crate) fn word(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| {
                let at = self.below(self.alphabet.len());
                self.alphabet[at]
            })
            .collect()
    }
}
