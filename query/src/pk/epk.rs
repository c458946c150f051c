//! Effective partition keys (EPKs): the hex strings that place a document in the key space.
//!
//! Everything here must agree bit for bit with the official SDKs (docs/PROTOCOL.md section 1), since
//! clients compute EPKs themselves and send EPK ranges for prefix queries and change feeds.
//! EPKs compare as uppercase hex strings; the whole space is `["", "FF")`.

use super::murmur::{murmur3_x64_128, murmur3_x86_32};
use super::{PartitionKey, PartitionKeyDefinition, PartitionKind, PkComponent, PkError};

/// The smallest EPK (inclusive bound of the whole key space).
pub const EPK_MIN: &str = "";
/// The exclusive upper bound of the whole key space.
pub const EPK_MAX: &str = "FF";

/// A half-open EPK interval `[min, max)`, compared as strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EpkRange {
    pub min: String,
    pub max: String,
}

impl EpkRange {
    pub fn new(min: impl Into<String>, max: impl Into<String>) -> Self {
        Self {
            min: min.into(),
            max: max.into(),
        }
    }

    /// The whole key space.
    pub fn full() -> Self {
        Self::new(EPK_MIN, EPK_MAX)
    }

    /// The one-point range of a full key, normalized to half-open `[E, E+1)`.
    pub fn point(epk: &str) -> Self {
        Self::new(epk, increment_hex(epk))
    }

    pub fn contains(&self, epk: &str) -> bool {
        cmp_epk(epk, &self.min).is_ge() && cmp_epk(epk, &self.max).is_lt()
    }

    pub fn is_empty(&self) -> bool {
        cmp_epk(&self.min, &self.max).is_ge()
    }

    /// The overlap of two ranges, if any.
    pub fn intersect(&self, other: &EpkRange) -> Option<EpkRange> {
        let min = if cmp_epk(&self.min, &other.min).is_ge() {
            &self.min
        } else {
            &other.min
        };
        let max = if cmp_epk(&self.max, &other.max).is_le() {
            &self.max
        } else {
            &other.max
        };
        let r = EpkRange::new(min.clone(), max.clone());
        (!r.is_empty()).then_some(r)
    }

    pub fn overlaps(&self, other: &EpkRange) -> bool {
        overlap(&self.min, &self.max, &other.min, &other.max)
    }
}

/// Whether `[a_min, a_max)` and `[b_min, b_max)` share a key: [`EpkRange::overlaps`] without
/// making either range or their intersection (the partition map asks it of every partition,
/// per query).
pub fn overlap(a_min: &str, a_max: &str, b_min: &str, b_max: &str) -> bool {
    let min = if cmp_epk(a_min, b_min).is_ge() {
        a_min
    } else {
        b_min
    };
    let max = if cmp_epk(a_max, b_max).is_le() {
        a_max
    } else {
        b_max
    };
    cmp_epk(min, max).is_lt()
}

/// Compares EPK strings. After a split the service may spell a MultiHash boundary either as 32
/// characters or zero-padded to 64 (`X` and `X000…0`); both spellings compare equal here.
pub fn cmp_epk(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (trim_zero_padding(a), trim_zero_padding(b));
    a.cmp(b)
}

/// Strips whole zero 32-character blocks from the end of a MultiHash-style EPK.
fn trim_zero_padding(s: &str) -> &str {
    let mut s = s;
    while s.len() > 32 && s.len().is_multiple_of(32) && s[s.len() - 32..].bytes().all(|b| b == b'0')
    {
        s = &s[..s.len() - 32];
    }
    s
}

/// Adds one to a hex string read as a big-endian byte array (`…FF` carries). This is how the
/// SDKs turn a point key into the half-open range `[E, E+1)`.
pub fn increment_hex(epk: &str) -> String {
    // An EPK as strata writes them (upper-case hex digits, whole bytes) is incremented digit
    // by digit, which is the same as byte by byte: decoding and encoding every byte was half
    // of routing a query by its partition key.
    let upper_hex = |b: &u8| b.is_ascii_digit() || (b'A'..=b'F').contains(b);
    if !epk.is_empty() && epk.len().is_multiple_of(2) && epk.as_bytes().iter().all(upper_hex) {
        let mut digits = epk.as_bytes().to_vec();
        for d in digits.iter_mut().rev() {
            match *d {
                b'F' => *d = b'0',
                b'9' => {
                    *d = b'A';
                    return String::from_utf8(digits).unwrap_or_default();
                }
                _ => {
                    *d += 1;
                    return String::from_utf8(digits).unwrap_or_default();
                }
            }
        }
        return format!("{epk}00");
    }
    let mut bytes = match decode_hex(epk) {
        Some(b) if !b.is_empty() => b,
        _ => return format!("{epk}00"),
    };
    for i in (0..bytes.len()).rev() {
        if bytes[i] == 0xFF {
            bytes[i] = 0;
        } else {
            bytes[i] += 1;
            return encode_hex(&bytes);
        }
    }
    // Every byte was FF: the successor is the same string followed by a zero byte.
    format!("{epk}00")
}

/// Whether `next` is [`increment_hex`]`(epk)`, checked without building it: a page of a
/// query pinned to one logical partition asks it of its range (see the server's cache of
/// hot logical partitions).
pub fn is_increment(epk: &str, next: &str) -> bool {
    let (a, b) = (epk.as_bytes(), next.as_bytes());
    let upper_hex = |d: &u8| d.is_ascii_digit() || (b'A'..=b'F').contains(d);
    if a.is_empty() || a.len() != b.len() || !a.len().is_multiple_of(2) || !a.iter().all(upper_hex)
    {
        return increment_hex(epk) == next;
    }
    // The last digit that is not F goes up by one and the F's after it become zeros (all F:
    // the successor is longer).
    let Some(i) = a.iter().rposition(|&d| d != b'F') else {
        return false;
    };
    let up = if a[i] == b'9' { b'A' } else { a[i] + 1 };
    a[..i] == b[..i] && b[i] == up && b[i + 1..].iter().all(|&d| d == b'0')
}

pub fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

pub fn encode_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

/// Appends `bytes` in upper-case hex, 16 bytes at a time through a buffer: pushing each digit
/// as a `char` was half of the EPK's cost, which every point operation pays.
fn push_hex(out: &mut String, bytes: &[u8]) {
    // A table rather than `write!`: every write hashes its key into one of these.
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    for chunk in bytes.chunks(16) {
        let mut buf = [0u8; 32];
        for (d, &b) in buf.chunks_exact_mut(2).zip(chunk) {
            d[0] = DIGITS[usize::from(b >> 4)];
            d[1] = DIGITS[usize::from(b & 15)];
        }
        if let Ok(hex) = std::str::from_utf8(&buf[..chunk.len() * 2]) {
            out.push_str(hex);
        }
    }
}

/// The EPK of a full key (one logical partition).
pub fn effective_partition_key(
    def: &PartitionKeyDefinition,
    pk: &PartitionKey,
) -> Result<String, PkError> {
    def.check_full(pk)?;
    Ok(epk_of_components(def, &pk.0))
}

/// The EPK range a full key or a prefix covers. A full key gives `[E, E+1)`; a MultiHash prefix
/// `P` gives `[P, P+"FF")`; the empty prefix gives the whole space.
pub fn epk_range(def: &PartitionKeyDefinition, pk: &PartitionKey) -> Result<EpkRange, PkError> {
    def.check_prefix(pk)?;
    if pk.0.is_empty() {
        return Ok(EpkRange::full());
    }
    let e = epk_of_components(def, &pk.0);
    if pk.0.len() == def.levels() {
        Ok(EpkRange::point(&e))
    } else {
        Ok(EpkRange::new(e.clone(), format!("{e}FF")))
    }
}

/// The EPK string of the given components (all of them, or a leading prefix for MultiHash).
pub fn epk_of_components(def: &PartitionKeyDefinition, comps: &[PkComponent]) -> String {
    match (def.kind, def.version) {
        (PartitionKind::MultiHash, _) => {
            let mut s = String::with_capacity(32 * comps.len());
            let mut data = Vec::with_capacity(32);
            for c in comps {
                push_hash_v2(&mut s, &mut data, std::slice::from_ref(c));
            }
            s
        }
        (PartitionKind::Hash, 2) => {
            if comps.is_empty() {
                String::new()
            } else {
                hash_v2(comps)
            }
        }
        (PartitionKind::Hash, _) => {
            if comps.is_empty() {
                String::new()
            } else {
                hash_v1(comps)
            }
        }
    }
}

/// Hash V2 of the concatenated components: MurmurHash3_x64_128 (seed 0) of the hashing
/// serialization, bytes reversed (h2 then h1, big-endian), top two bits cleared.
pub fn hash_v2(comps: &[PkComponent]) -> String {
    let mut s = String::with_capacity(32);
    push_hash_v2(&mut s, &mut Vec::with_capacity(32), comps);
    s
}

/// [`hash_v2`] appended to `out`, `data` the (reused) buffer the components are hashed from.
fn push_hash_v2(out: &mut String, data: &mut Vec<u8>, comps: &[PkComponent]) {
    data.clear();
    for c in comps {
        write_hashing(data, c, 0xFF);
    }
    let (h1, h2) = murmur3_x64_128(data, 0);
    let mut v: u128 = ((h2 as u128) << 64) | h1 as u128;
    v &= !(0xC0u128 << 120);
    push_hex(out, &v.to_be_bytes());
}

/// The "hashing" serialization of one component; `terminator` ends strings (FF in V2, 00 in V1).
fn write_hashing(out: &mut Vec<u8>, c: &PkComponent, terminator: u8) {
    match c {
        PkComponent::Undefined => out.push(0x00),
        PkComponent::Null => out.push(0x01),
        PkComponent::Bool(false) => out.push(0x02),
        PkComponent::Bool(true) => out.push(0x03),
        PkComponent::Number(n) => {
            out.push(0x05);
            out.extend_from_slice(&n.to_le_bytes());
        }
        PkComponent::String(s) => {
            out.push(0x08);
            out.extend_from_slice(s.as_bytes());
            out.push(terminator);
        }
    }
}

/// Hash V1: strings truncated to 100 UTF-16 units, MurmurHash3_x86_32 of the hashing
/// serialization (terminator 00), then the binary encoding of the hash (as a double) followed by
/// the binary encoding of every truncated component.
pub fn hash_v1(comps: &[PkComponent]) -> String {
    let truncated: Vec<PkComponent> = comps
        .iter()
        .map(|c| match c {
            PkComponent::String(s) => PkComponent::String(truncate_utf16(s, 100)),
            other => other.clone(),
        })
        .collect();
    let mut data = Vec::with_capacity(32);
    for c in &truncated {
        write_hashing(&mut data, c, 0x00);
    }
    let hash = murmur3_x86_32(&data, 0);
    let mut out = Vec::with_capacity(32);
    write_binary(&mut out, &PkComponent::Number(hash as f64));
    for c in &truncated {
        write_binary(&mut out, c);
    }
    encode_hex(&out)
}

/// .NET `Substring(0, n)` on UTF-16, re-encoded as UTF-8: a surrogate pair cut in half leaves a
/// lone surrogate, which becomes U+FFFD.
fn truncate_utf16(s: &str, n: usize) -> String {
    let mut units = 0;
    let mut out = String::with_capacity(s.len().min(4 * n));
    for ch in s.chars() {
        let w = ch.len_utf16();
        if units + w > n {
            if units < n {
                out.push('\u{FFFD}');
            }
            break;
        }
        units += w;
        out.push(ch);
    }
    out
}

/// The order-preserving "binary encoding" of V1 EPKs.
fn write_binary(out: &mut Vec<u8>, c: &PkComponent) {
    match c {
        PkComponent::Undefined => out.push(0x00),
        PkComponent::Null => out.push(0x01),
        PkComponent::Bool(false) => out.push(0x02),
        PkComponent::Bool(true) => out.push(0x03),
        PkComponent::Number(n) => {
            out.push(0x05);
            let bits = n.to_bits();
            let mut payload = if bits < 0x8000_0000_0000_0000 {
                bits ^ 0x8000_0000_0000_0000
            } else {
                (!bits).wrapping_add(1)
            };
            out.push((payload >> 56) as u8);
            payload <<= 8;
            let mut byte: u8;
            let mut first = true;
            let mut pending: u8 = 0;
            loop {
                if !first {
                    out.push(pending);
                }
                first = false;
                byte = ((payload >> 56) as u8) | 0x01;
                payload <<= 7;
                pending = byte;
                if payload == 0 {
                    break;
                }
            }
            out.push(byte & 0xFE);
        }
        PkComponent::String(s) => {
            out.push(0x08);
            let b = s.as_bytes();
            if b.len() <= 100 {
                out.extend(b.iter().map(|x| x.saturating_add(1)));
                out.push(0x00);
            } else {
                out.extend(b[..101].iter().map(|x| x.saturating_add(1)));
            }
        }
    }
}

/// Splits `[min, max)` into `n` contiguous ranges of about equal width in the space where this
/// definition's EPKs actually fall (V2 hashes are below `40…`; V1 EPKs start with the encoded
/// 32-bit hash). Used to lay out the initial physical partitions of a container.
pub fn even_boundaries(def: &PartitionKeyDefinition, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n.saturating_sub(1));
    if n <= 1 {
        return out;
    }
    match (def.kind, def.version) {
        (PartitionKind::Hash, 1) => {
            let step = (u32::MAX as f64 + 1.0) / n as f64;
            for i in 1..n {
                let mut b = Vec::new();
                write_binary(&mut b, &PkComponent::Number((step * i as f64).floor()));
                out.push(encode_hex(&b));
            }
        }
        _ => {
            // 2^126 values below 0x40 in the first 16 bytes.
            let space: u128 = 1u128 << 126;
            let step = space / n as u128;
            for i in 1..n {
                out.push(format!("{:032X}", step * i as u128));
            }
        }
    }
    out
}

/// A boundary strictly inside `[min, max)` that halves its width, for splitting a range that
/// holds no data (so has no median). `None` when the range is too narrow to cut.
pub fn midpoint(def: &PartitionKeyDefinition, range: &EpkRange) -> Option<String> {
    let width = 32;
    let to_num = |s: &str, default_max: bool| -> u128 {
        if s == EPK_MAX || (s.is_empty() && default_max) {
            return match (def.kind, def.version) {
                (PartitionKind::Hash, 1) => u128::MAX,
                _ => 1u128 << 126,
            };
        }
        let mut p: String = s.chars().take(width).collect();
        while p.len() < width {
            p.push('0');
        }
        u128::from_str_radix(&p, 16).unwrap_or(0)
    };
    let lo = to_num(&range.min, false);
    let hi = to_num(&range.max, true);
    if hi <= lo + 1 {
        return None;
    }
    let mid = format!("{:032X}", lo + (hi - lo) / 2);
    let r = EpkRange::new(range.min.clone(), range.max.clone());
    (r.contains(&mid) && mid != range.min).then_some(mid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> PkComponent {
        PkComponent::String(x.into())
    }

    /// `overlaps` (no strings made) agrees with `intersect` on ranges that meet, touch, nest
    /// or miss, in both spellings of a MultiHash boundary.
    #[test]
    fn overlap_agrees_with_intersect() {
        let bounds = [
            "",
            "05",
            "05C1",
            "3F",
            "3F000000000000000000000000000000",
            "AA",
            "FF",
        ];
        for a in bounds {
            for b in bounds {
                for c in bounds {
                    for d in bounds {
                        let (x, y) = (EpkRange::new(a, b), EpkRange::new(c, d));
                        assert_eq!(x.overlaps(&y), x.intersect(&y).is_some(), "{x:?} {y:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn v2_worked_examples() {
        assert_eq!(hash_v2(&[s("tenant1")]), "0DAE0B8467B011E957BC0B8B0DEB5ACA");
        assert_eq!(
            hash_v2(&[PkComponent::Number(42.0)]),
            "08E6D561F6FD951DCC25E7E4EA2884B5"
        );
        assert_eq!(
            hash_v2(&[PkComponent::Undefined]),
            "11622DAA78F835834610ABE56EFF5CB5"
        );
        assert_eq!(hash_v2(&[s("")]), "32E9366E637A71B4E710384B2F4970A0");
        assert_eq!(
            hash_v2(&[
                PkComponent::Number(5.0),
                s("redmond"),
                PkComponent::Bool(true),
                PkComponent::Null
            ]),
            "3032DECBE2AB1768D8E0AEDEA35881DF"
        );
    }

    #[test]
    fn v1_worked_examples() {
        assert_eq!(
            hash_v1(&[s("partitionKey")]),
            "05C1E1B3D9CD2608716273756A756A706F4C667A00"
        );
        let mut b = Vec::new();
        write_binary(&mut b, &PkComponent::Number(1.0));
        assert_eq!(encode_hex(&b), "05BFF0");
        b.clear();
        write_binary(&mut b, &PkComponent::Number(0.0));
        assert_eq!(encode_hex(&b), "058000");
        b.clear();
        write_binary(&mut b, &PkComponent::Number(-1.0));
        assert_eq!(encode_hex(&b), "054010");
    }

    #[test]
    fn increments_with_carry() {
        assert_eq!(increment_hex("0A"), "0B");
        assert_eq!(increment_hex("00FF"), "0100");
        assert_eq!(increment_hex("83532751"), "83532752");
        assert_eq!(increment_hex("09"), "0A");
        assert_eq!(increment_hex("0AFF"), "0B00");
        assert_eq!(increment_hex("FFFF"), "FFFF00");
        assert_eq!(increment_hex("0a"), "0B", "lower case is decoded as before");
        assert_eq!(increment_hex("ABC"), "ABC00", "half a byte is not a key");
        // Digit by digit agrees with byte by byte over every two-byte key.
        for v in 0..=0xFFFFu32 {
            let hex = format!("{v:04X}");
            let by_bytes = match v {
                0xFFFF => "FFFF00".to_string(),
                _ => format!("{:04X}", v + 1),
            };
            assert_eq!(increment_hex(&hex), by_bytes, "{hex}");
        }
    }

    #[test]
    fn an_increment_is_recognized_as_built() {
        // Every two-byte key against its successor and its neighbours.
        for v in 0..=0xFFFFu32 {
            let hex = format!("{v:04X}");
            let next = increment_hex(&hex);
            assert!(is_increment(&hex, &next), "{hex} {next}");
            for w in [v.wrapping_sub(1), v, v + 2] {
                let other = format!("{:04X}", w & 0xFFFF);
                assert_eq!(is_increment(&hex, &other), other == next, "{hex} {other}");
            }
        }
        assert!(
            is_increment("0a", "0B"),
            "other spellings as increment_hex has them"
        );
        assert!(!is_increment("0A", "0b"));
        assert!(is_increment("", "00"), "as increment_hex has it");
        assert!(is_increment("FF", "FF00"));
        assert!(!is_increment("0A0", "0A1"));
    }

    #[test]
    fn zero_padded_boundaries_compare_equal() {
        let a = "0DAE0B8467B011E957BC0B8B0DEB5ACA";
        let b = format!("{a}{}", "0".repeat(32));
        assert_eq!(cmp_epk(a, &b), std::cmp::Ordering::Equal);
        assert!(EpkRange::new(b.clone(), "FF").contains(a));
    }

    #[test]
    fn even_boundaries_cover_the_hash_space() {
        let def = PartitionKeyDefinition::hash_v2("/pk");
        let b = even_boundaries(&def, 4);
        assert_eq!(b.len(), 3);
        assert_eq!(b[0], "10000000000000000000000000000000");
        assert_eq!(b[2], "30000000000000000000000000000000");
        let def1 = PartitionKeyDefinition::new(&["/pk"], PartitionKind::Hash, 1).unwrap();
        let b1 = even_boundaries(&def1, 2);
        assert!(b1[0].starts_with("05"), "{b1:?}");
    }

    #[test]
    fn midpoint_splits_inside() {
        let def = PartitionKeyDefinition::hash_v2("/pk");
        let m = midpoint(&def, &EpkRange::full()).unwrap();
        assert_eq!(m, "20000000000000000000000000000000");
        assert!(midpoint(
            &def,
            &EpkRange::new("10", "10000000000000000000000000000004")
        )
        .is_some());
        assert!(midpoint(
            &def,
            &EpkRange::new("10", "10000000000000000000000000000001")
        )
        .is_none());
    }
}
