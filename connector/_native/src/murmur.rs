//! MurmurHash3 x86_32 with seed 0, as Guava's `murmur3_32().hashBytes(b).asInt()` (and `mmh3.hash`),
//! which decides an entry's bucket. Written out (a few lines) rather than taking a crate for it.

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline]
fn mix_k(mut k: u32) -> u32 {
    k = k.wrapping_mul(C1);
    k = k.rotate_left(15);
    k.wrapping_mul(C2)
}

/// The signed 32-bit hash of `data`.
pub fn murmur3_32(data: &[u8]) -> i32 {
    let mut h: u32 = 0;
    let mut blocks = data.chunks_exact(4);
    for b in &mut blocks {
        h ^= mix_k(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k |= u32::from(b) << (8 * i);
        }
        h ^= mix_k(k);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h as i32
}

/// `abs(murmur3_32(key)) % num_buckets`, with Java's `Math.abs` of `i32::MIN` taken as 2**31.
#[inline]
pub fn bucket_of(key: &[u8], num_buckets: u32) -> u32 {
    (i64::from(murmur3_32(key)).unsigned_abs() % u64::from(num_buckets)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn design_md_checks() {
        assert_eq!(murmur3_32(b"a"), 1009084850);
        assert_eq!(murmur3_32(b"0001"), -195267438);
        assert_eq!(bucket_of(b"0001", 13), 2);
        assert_eq!(bucket_of(b"0001", 1009), 713);
        assert_eq!(murmur3_32(b"k1"), -37330902);
        assert_eq!(bucket_of(b"k1", 13), 11);
        assert_eq!(murmur3_32(b""), 0);
    }
}
