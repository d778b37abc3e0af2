//! Hashing for the indicator maps.
//!
//! The std default (SipHash) costs more than the rest of a lookup; keys here are either fixed-size
//! numbers (addresses, digests) or text hashed while it is read, so two small hashers built on a
//! folded 64×64→128-bit multiply do the job: [`KeyHasher`] for the map keys and [`StrHasher`] for
//! domain and URL text fed in pieces.
//!
//! [`KeyHasher`] is unseeded: its keys come from feeds, which are trusted to the extent that they
//! decide what gets flagged anyway, and a lookup key an attacker picks can only land in one probe
//! sequence. [`StrHasher`] is seeded per set, since its 64-bit output is the map key itself.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xa076_1d64_78bd_642f;
const K3: u64 = 0xe703_7ed1_a0b4_28db;

/// The high and low halves of the 128-bit product, xored: every input bit reaches most output
/// bits for the price of one multiply.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The hasher of every id map of the set.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        fold(self.0 ^ K2, K3)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = fold(self.0 ^ i, K1);
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.write_u64(i as u64);
        self.write_u64((i >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// An id map: 4-byte values so that a slot is the key plus four bytes.
pub(crate) type KeyMap<K> = HashMap<K, u32, BuildHasherDefault<KeyHasher>>;

/// A streaming hash of text, fed in pieces (so callers can lower-case or splice a normalised
/// form without building a string) and mixed eight bytes at a time; the result depends only on
/// the bytes, not on how they were cut into pieces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StrHasher {
    h: u64,
    buf: u64,
    len: u64,
}

impl StrHasher {
    #[inline]
    pub(crate) fn new(seed: u64) -> StrHasher {
        StrHasher {
            h: seed,
            buf: 0,
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, b: u8) {
        let n = self.len & 7;
        self.buf |= u64::from(b) << (n * 8);
        self.len += 1;
        if n == 7 {
            self.h = fold(self.h ^ self.buf, K1);
            self.buf = 0;
        }
    }

    /// Feeds `bytes`, ASCII-lower-cased when `lower`.
    #[inline]
    pub(crate) fn write(&mut self, mut bytes: &[u8], lower: bool) {
        let fix = |b: u8| if lower { b.to_ascii_lowercase() } else { b };
        while self.len & 7 != 0 {
            let Some((&b, rest)) = bytes.split_first() else {
                return;
            };
            self.push(fix(b));
            bytes = rest;
        }
        let mut words = bytes.chunks_exact(8);
        for c in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            let w = u64::from_le_bytes(w);
            self.h = fold(self.h ^ if lower { lower_word(w) } else { w }, K1);
            self.len += 8;
        }
        for &b in words.remainder() {
            self.push(fix(b));
        }
    }

    #[inline]
    pub(crate) fn finish(&self) -> u64 {
        fold(fold(self.h ^ self.buf, K2) ^ self.len, K3)
    }
}

/// `to_ascii_lowercase` of eight bytes at once: `A`..=`Z` get bit 5, every other byte (non-ASCII
/// included) stays as it is.
#[inline]
pub(crate) fn lower_word(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    let ascii = !w & HIGH;
    let low7 = w & (ONES * 0x7f);
    // The high bit of each byte says low7 >= 'A', resp. low7 > 'Z'; no byte carries into the next.
    let ge_a = low7 + ONES * (0x80 - u64::from(b'A'));
    let gt_z = low7 + ONES * (0x7f - u64::from(b'Z'));
    let upper = ascii & ge_a & !gt_z & HIGH;
    w | (upper >> 2)
}

/// The key of a stored domain, as [`crate::ioc::IocSet::match_domain`] hashes a suffix.
#[inline]
pub(crate) fn domain_hash(seed: u64, name: &[u8]) -> u64 {
    let mut h = StrHasher::new(seed);
    h.write(name, true);
    h.finish()
}
