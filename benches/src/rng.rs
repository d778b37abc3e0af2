//! A small seeded PRNG.
//!
//! Load runs must be reproducible from a seed (so a regression can be replayed line for line) and
//! the generator must not pull in the `rand` crate, so this is xoshiro256** seeded through
//! splitmix64, the combination its authors recommend. It is not cryptographic and needs not be.

/// One step of splitmix64: advances `state` and returns a well-mixed output.
///
/// Used both to expand a 64-bit seed into xoshiro's 256-bit state and to derive independent
/// per-stream seeds, because consecutive splitmix64 outputs are decorrelated even for seeds that
/// differ in a single bit.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed of stream `index` (one per connection) derived from a run's seed.
///
/// Connections must not replay each other's lines, or the service would see N copies of one
/// stream and its template and entity counts would be skewed.
pub fn stream_seed(seed: u64, index: u64) -> u64 {
    let mut s = seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    splitmix64(&mut s)
}

/// xoshiro256**: fast, 256 bits of state, passes BigCrush.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole output is a function of `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        // splitmix64 is a bijection of its counter, so the four words are never all zero, which
        // is the one state xoshiro cannot leave.
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (`n > 0`).
    ///
    /// Lemire's multiply-shift without the rejection step: the bias is below 2^-40 for the small
    /// `n` used here, far under anything a log consumer could notice, and it keeps this branch-free.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform index into a collection of length `n` (`n > 0`).
    #[inline]
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `per_mille / 1000`.
    #[inline]
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }

    /// A uniformly chosen element of a non-empty slice.
    #[inline]
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }

    /// An index in `0..n` biased towards 0 (density proportional to `1/sqrt(i)`).
    ///
    /// Real populations are heavy-tailed: a few users and hosts produce most of the lines. A
    /// uniform pick would give the anomaly detector a flat, unrealistic baseline.
    #[inline]
    pub fn skewed(&mut self, n: usize) -> usize {
        let u = self.next_u64() >> 32; // 32-bit uniform
        let sq = (u * u) >> 32; // u^2, still 32 bits
        ((sq * n as u64) >> 32) as usize
    }

    /// A value drawn from a `(weight, value)` table; weights need not sum to anything special.
    #[inline]
    pub fn weighted<T: Copy>(&mut self, table: &[(u32, T)]) -> T {
        let total: u32 = table.iter().map(|&(w, _)| w).sum();
        let mut r = self.below(u64::from(total)) as u32;
        for &(w, v) in table {
            if r < w {
                return v;
            }
            r -= w;
        }
        table[table.len() - 1].1
    }

    /// A roughly log-uniform value in `lo..=hi` (`0 < lo <= hi`), for sizes and durations, which
    /// spread over orders of magnitude rather than evenly.
    pub fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let lo_bits = 64 - lo.leading_zeros();
        let hi_bits = 64 - hi.leading_zeros();
        let bits = self.range(u64::from(lo_bits), u64::from(hi_bits)) as u32;
        // Uniform within the chosen power-of-two band, trimmed to the bounds (clamping instead
        // would pile values up on `lo` and `hi`).
        let band_lo = (1u64 << (bits - 1)).max(lo);
        let band_hi = (1u64 << (bits - 1))
            .saturating_mul(2)
            .saturating_sub(1)
            .min(hi);
        self.range(band_lo, band_hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn bounded_helpers_stay_in_range() {
        let mut r = Rng::new(1);
        let mut seen = [false; 10];
        for _ in 0..10_000 {
            let v = r.below(10) as usize;
            seen[v] = true;
            assert!(r.range(5, 9) >= 5 && r.range(5, 9) <= 9);
            assert!(r.skewed(10) < 10);
            let l = r.log_uniform(100, 50_000);
            assert!((100..=50_000).contains(&l));
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn skewed_prefers_low_indices() {
        let mut r = Rng::new(3);
        let low = (0..10_000).filter(|_| r.skewed(100) < 25).count();
        // P(i < 25) = sqrt(0.25) = 0.5 for the u^2 transform.
        assert!((4_500..5_500).contains(&low), "{low}");
    }

    #[test]
    fn stream_seeds_differ() {
        assert_ne!(stream_seed(1, 0), stream_seed(1, 1));
        assert_ne!(stream_seed(1, 0), stream_seed(2, 0));
    }
}
