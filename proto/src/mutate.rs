//! Adversarial inputs for the parsers' property tests: seeded mutations of valid examples.
//!
//! Every parser of the service (syslog, JSON, Sigma YAML and conditions, STIX, CSV, the
//! configuration, the WebSocket filter frame) is held to one property: whatever bytes it is given,
//! it answers (a value or an error) without a panic and in time that grows with the input, not
//! faster. Random bytes alone rarely get past a parser's first check, so the inputs here start
//! from valid examples and break them the ways that found bugs before: cut anywhere, bytes
//! flipped, pieces repeated, deep nesting, huge counts and numbers, invalid UTF-8, NUL.
//! Deterministic: a seed gives the same inputs, so a failure names the seed and the case.

/// Tokens that parsers treat specially, inserted at random places.
const TOKENS: [&[u8]; 24] = [
    b"{",
    b"}",
    b"[",
    b"]",
    b"(",
    b")",
    b"\"",
    b"'",
    b"\\",
    b":",
    b",",
    b"\n",
    b"\r\n",
    b" ",
    b"\x00",
    b"\xff\xfe",
    b"\xc3\x28",
    b"99999999999999999999999",
    b"-1",
    b"1e999",
    b"%",
    b"*",
    b"|",
    b"not ",
];

/// A seeded stream of mutated inputs from `examples`.
pub struct Mutations<'a> {
    examples: &'a [&'a [u8]],
    state: u64,
    /// Largest input produced.
    max_len: usize,
}

impl<'a> Mutations<'a> {
    /// Inputs derived from `examples` (at least one) with `seed`, none longer than `max_len`.
    pub fn new(examples: &'a [&'a [u8]], seed: u64, max_len: usize) -> Mutations<'a> {
        Mutations {
            examples,
            state: seed ^ 0x9e37_79b9_7f4a_7c15,
            max_len,
        }
    }

    fn next_u64(&mut self) -> u64 {
        // SplitMix64.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// The next input: an example with one to four mutations.
    pub fn next_input(&mut self) -> Vec<u8> {
        let mut v = self.examples[self.below(self.examples.len())].to_vec();
        for _ in 0..1 + self.below(4) {
            self.mutate(&mut v);
        }
        v.truncate(self.max_len);
        v
    }

    fn mutate(&mut self, v: &mut Vec<u8>) {
        let at = self.below(v.len() + 1);
        match self.below(8) {
            // Cut anywhere.
            0 => v.truncate(at),
            // Flip a byte.
            1 if !v.is_empty() => {
                let i = self.below(v.len());
                v[i] ^= 1 << self.below(8);
            }
            // A special token.
            2 | 3 => {
                let t = TOKENS[self.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            // A piece repeated many times (huge counts, long runs).
            4 if !v.is_empty() => {
                let from = self.below(v.len());
                let len = 1 + self.below((v.len() - from).min(16));
                let piece = v[from..from + len].to_vec();
                let times = 1 + self.below(self.max_len / len.max(1) / 4 + 1);
                let mut rep = Vec::with_capacity(piece.len() * times);
                for _ in 0..times {
                    rep.extend_from_slice(&piece);
                }
                v.splice(at..at, rep);
            }
            // Deep nesting.
            5 => {
                let open = [b"[".as_slice(), b"{\"a\":", b"(", b"- ", b"  "][self.below(5)];
                let depth = 1 + self.below(2_000);
                let mut rep = Vec::with_capacity(open.len() * depth);
                for _ in 0..depth {
                    rep.extend_from_slice(open);
                }
                v.splice(at..at, rep);
            }
            // Splice in part of another example.
            6 => {
                let other = self.examples[self.below(self.examples.len())];
                let from = self.below(other.len() + 1);
                v.splice(at..at, other[from..].iter().copied());
            }
            // Delete a range.
            _ if !v.is_empty() => {
                let end = (at + self.below(32)).min(v.len());
                v.drain(at.min(end)..end);
            }
            _ => v.push(b'x'),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_seeded_bounded_and_varied() {
        let examples: [&[u8]; 2] = [b"{\"a\":1}", b"<38>Nov 27 web-01 sshd[1]: hi"];
        let a: Vec<Vec<u8>> = {
            let mut m = Mutations::new(&examples, 5, 4096);
            (0..500).map(|_| m.next_input()).collect()
        };
        let b: Vec<Vec<u8>> = {
            let mut m = Mutations::new(&examples, 5, 4096);
            (0..500).map(|_| m.next_input()).collect()
        };
        assert_eq!(a, b);
        assert!(a.iter().all(|v| v.len() <= 4096));
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() > 400, "{}", distinct.len());
        assert!(a.iter().any(|v| std::str::from_utf8(v).is_err()));
    }
}
