//! A fast, stable 64-bit hash for keys that end up on disk.
//!
//! Template ids, entity index keys and source index keys are stored in RocksDB, so their hash must
//! never change between releases or platforms: `std`'s `DefaultHasher` makes no such promise. This is
//! a small multiply-rotate hash over 8-byte words with a murmur3-style finaliser; it is not meant to
//! resist hash flooding, only to spread keys well and be cheap per byte.

const K0: u64 = 0x9E37_79B9_7F4A_7C15;
const K1: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// Hashes `bytes` to 64 bits; equal inputs give equal outputs on every platform and release.
#[inline]
pub fn hash64(bytes: &[u8]) -> u64 {
    hash64_seeded(bytes, 0)
}

/// Like [`hash64`], with a seed so that one byte string can yield independent hashes (for example a
/// per-kind entity hash).
#[inline]
pub fn hash64_seeded(bytes: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ K0.wrapping_mul(bytes.len() as u64 + 1);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let w = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        h = (h ^ w.wrapping_mul(K1)).rotate_left(31).wrapping_mul(K0);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut tail = [0u8; 8];
        tail[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(tail).wrapping_mul(K1))
            .rotate_left(31)
            .wrapping_mul(K0);
    }
    fmix64(h)
}

/// murmur3's 64-bit finaliser: mixes every input bit into every output bit. For combining values
/// that are already hashes (a pair of template ids, say) without hashing bytes again.
#[inline]
pub fn fmix64(mut key: u64) -> u64 {
    key ^= key >> 33;
    key = key.wrapping_mul(0xff51_afd7_ed55_8ccd);
    key ^= key >> 33;
    key = key.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    key ^ (key >> 33)
}

/// A `Hasher` for keys that are already well-mixed 64-bit hashes (entity, template and node
/// hashes): `write_u64` passes the key through, so a map lookup costs no second hash.
#[derive(Default, Clone, Copy)]
pub struct PreHashed(u64);

impl std::hash::Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys; kept well-mixed should another key type ever come through.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(K0);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// Builds [`PreHashed`] hashers.
pub type BuildPreHashed = std::hash::BuildHasherDefault<PreHashed>;

/// A map keyed by pre-hashed `u64`s.
pub type U64Map<V> = std::collections::HashMap<u64, V, BuildPreHashed>;

/// A set of pre-hashed `u64`s.
pub type U64Set = std::collections::HashSet<u64, BuildPreHashed>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_pinned() {
        // On-disk keys depend on these exact values: a change here is a storage format change.
        assert_eq!(hash64(b""), hash64(b""));
        assert_ne!(hash64(b"a"), hash64(b"b"));
        assert_ne!(hash64(b"abcdefgh"), hash64(b"abcdefgh\0"));
        assert_ne!(hash64_seeded(b"x", 1), hash64_seeded(b"x", 2));
        assert_eq!(
            hash64(b"sshd"),
            0x8b94_18e5_d5bd_a917,
            "got {:#x}",
            hash64(b"sshd")
        );
    }
}
