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

#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

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
