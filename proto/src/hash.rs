//! A stable 64-bit hash (FNV-1a) for values that must be equal across processes, builds and Rust
//! versions: per-workflow random seeds, state digests. std's hashers promise none of that.

/// FNV-1a over `bytes`, continuing from `state` (start with [`FNV_OFFSET`]).
pub fn fnv1a(state: u64, bytes: &[u8]) -> u64 {
    let mut h = state;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The FNV-1a offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `bytes`.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_published_fnv1a_vectors() {
        assert_eq!(super::stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
