//! MurmurHash3, exactly as the Cosmos SDKs use it.
//!
//! The effective partition key of every document is derived from these hashes, and the official
//! SDKs compute the same value on the client to route requests, so any deviation here sends
//! clients to the wrong partition. Hand-written (about sixty lines) rather than pulled in, so the
//! byte order and seed handling are visible next to the EPK code that depends on them.

/// MurmurHash3_x64_128 with the given seed; returns `(h1, h2)` as in SMHasher.
pub fn murmur3_x64_128(data: &[u8], seed: u64) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let len = data.len();
    let mut h1 = seed;
    let mut h2 = seed;

    let mut chunks = data.chunks_exact(16);
    for block in &mut chunks {
        let k1 = u64::from_le_bytes(block[0..8].try_into().expect("8-byte slice"));
        let k2 = u64::from_le_bytes(block[8..16].try_into().expect("8-byte slice"));
        h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }

    let tail = chunks.remainder();
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    for (i, &b) in tail.iter().enumerate() {
        if i < 8 {
            k1 |= (b as u64) << (8 * i);
        } else {
            k2 |= (b as u64) << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        h2 ^= k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
    }
    if !tail.is_empty() {
        h1 ^= k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    }

    h1 ^= len as u64;
    h2 ^= len as u64;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3_x86_32 with the given seed (used by Hash V1 partitioning).
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for block in &mut chunks {
        let k = u32::from_le_bytes(block.try_into().expect("4-byte slice"));
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k: u32 = 0;
        for (i, &b) in tail.iter().enumerate() {
            k |= (b as u32) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x64_128_matches_protocol_worked_examples() {
        // docs/PROTOCOL.md 1.4: "tenant1" serialized as 08 'tenant1' FF.
        let data = [0x08, b't', b'e', b'n', b'a', b'n', b't', b'1', 0xff];
        assert_eq!(
            murmur3_x64_128(&data, 0),
            (0x57BC0B8B0DEB5ACA, 0x4DAE0B8467B011E9)
        );
        assert_eq!(
            murmur3_x64_128(&[0x03], 0),
            (0x726AC6DD306A3E59, 0x4E711127C5B5A8E4)
        );
    }

    #[test]
    fn x64_128_long_input_uses_blocks_and_tail() {
        // Known SMHasher value: empty input with seed 0 hashes to zero.
        assert_eq!(murmur3_x64_128(&[], 0), (0, 0));
        // 2 blocks + 3 tail bytes must differ from a 1-byte change in any position.
        let a: Vec<u8> = (0u8..35).collect();
        let mut b = a.clone();
        b[20] ^= 1;
        assert_ne!(murmur3_x64_128(&a, 0), murmur3_x64_128(&b, 0));
    }

    #[test]
    fn x86_32_matches_protocol_example() {
        // docs/PROTOCOL.md 1.7: "partitionKey" hashing serialization -> 2335912723.
        let mut data = vec![0x08];
        data.extend_from_slice(b"partitionKey");
        data.push(0x00);
        assert_eq!(murmur3_x86_32(&data, 0), 2_335_912_723);
        assert_eq!(murmur3_x86_32(&[], 0), 0);
    }
}
