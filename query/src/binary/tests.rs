use super::*;
use proptest::prelude::*;
use serde_json::json;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

/// Wire forms the service and the official SDKs write, with the JSON each stands for.
const VECTORS: &[(&str, &str)] = &[
    ("80 D0", "null"),
    ("80 D1", "false"),
    ("80 D2", "true"),
    ("80 00", "0"),
    ("80 1F", "31"),
    ("80 C8 C8", "200"),
    ("80 C9 18 FC", "-1000"),
    ("80 CA 70 11 01 00", "70000"),
    ("80 CB 00 0E FA D5 FE FF FF FF", "-5000000000"),
    ("80 C7 FE FF FF FF FF FF FF FF", "18446744073709551614"),
    ("80 CC 00 00 00 00 00 00 0C 40", "3.5"),
    ("80 D8 FB", "-5"),
    ("80 D7 C8", "200"),
    ("80 D9 18 FC", "-1000"),
    ("80 DA 90 EE FE FF", "-70000"),
    ("80 DB 00 0E FA D5 FE FF FF FF", "-5000000000"),
    ("80 DC FE FF FF FF", "4294967294"),
    ("80 CD 00 00 C0 3F", "1.5"),
    ("80 CE 00 00 00 00 00 00 02 C0", "-2.25"),
    ("80 CF 00 3E", "1.5"),
    ("80 2C", "\"id\""),
    ("80 20", "\"$s\""),
    ("80 25", "\"_rid\""),
    ("80 3F", "\"_id\""),
    ("80 80", "\"\""),
    ("80 82 68 69", "\"hi\""),
    ("80 C0 05 68 65 6C 6C 6F", "\"hello\""),
    ("80 C2 05 00 00 00 68 65 6C 6C 6F", "\"hello\""),
    (
        "80 75 00 01 02 03 04 05 06 07 08 09 0A 0B 0C 0D 0E 0F",
        "\"00102030-4050-6070-8090-a0b0c0d0e0f0\"",
    ),
    (
        "80 76 00 01 02 03 04 05 06 07 08 09 0A 0B 0C 0D 0E 0F",
        "\"00102030-4050-6070-8090-A0B0C0D0E0F0\"",
    ),
    (
        "80 77 00 00 84 21 00 00 20 00 00 00 A6 F7 9A A8 00 00",
        r#""\"00004812-0000-0200-0000-6a7fa98a0000\"""#,
    ),
    (
        "80 D3 00 01 02 03 04 05 06 07 08 09 0A 0B 0C 0D 0E 0F",
        "\"03020100-0504-0706-0809-0a0b0c0d0e0f\"",
    ),
    ("80 71 01 00 66 6F 6F", "\"Zm9v\""),
    ("80 71 01 01 66 6F", "\"Zm8=\""),
    ("80 71 01 02 41", "\"QQ==\""),
    ("80 71 01 FD 41", "\"QQ\""),
    ("80 72 02 00 00 66 6F 6F 62 61 72", "\"Zm9vYmFy\""),
    ("80 73 01 00 FB FF FE", "\"-__-\""),
    ("80 74 01 00 00 FB FF FE", "\"-__-\""),
    ("80 78 04 A1 B2", "\"1a2b\""),
    ("80 79 04 A1 B2", "\"1A2B\""),
    ("80 78 01 0F", "\"f\""),
    ("80 7A 07 13 53 1C 02", "\"2024-01\""),
    ("80 7B 04 30 10 32", "\"0123\""),
    ("80 7C 03 61 20 08", "\"abc\""),
    ("80 7D 04 61 40 20 0C", "\"abcd\""),
    ("80 7E 02 C8 34", "\"Hi\""),
    ("80 7F 02 00 C8 34", "\"Hi\""),
    ("80 DD 04 DE AD BE EF", "\"3q2+7w==\""),
    ("80 DE 03 00 01 02 03", "\"AQID\""),
    ("80 F0 DA 03 01 00 00 00 02 00 00 00 03 00 00 00", "[1,2,3]"),
    ("80 F1 D9 03 00 FF FF 00 00 E8 03", "[-1,0,1000]"),
    ("80 F0 CD 02 00 00 C0 3F 00 00 80 BE", "[1.5,-0.25]"),
    (
        "80 F2 F0 DA 02 02 01 00 00 00 02 00 00 00 03 00 00 00 04 00 00 00",
        "[[1,2],[3,4]]",
    ),
    ("80 E0", "[]"),
    ("80 E8", "{}"),
    ("80 E1 D2", "[true]"),
    ("80 E9 2C D2", r#"{"id":true}"#),
    ("80 E2 03 00 01 D0", "[0,1,null]"),
    ("80 E3 03 00 00 01 D0", "[0,1,null]"),
    ("80 E4 03 00 00 00 00 01 D0", "[0,1,null]"),
    ("80 E5 03 03 00 01 D0", "[0,1,null]"),
    ("80 E6 03 00 03 00 00 01 D0", "[0,1,null]"),
    ("80 E7 03 00 00 00 03 00 00 00 00 01 D0", "[0,1,null]"),
    ("80 ED 04 02 2C 00 3B 01", r#"{"id":0,"type":1}"#),
    ("80 EC 04 00 00 00 2C 00 3B 01", r#"{"id":0,"type":1}"#),
    ("80 E2 05 E1 00 E9 2C 01", r#"[[0],{"id":1}]"#),
    // A reference string: the second element points back at "hello" (offset 3).
    (
        "80 E2 09 C0 05 68 65 6C 6C 6F C3 03",
        r#"["hello","hello"]"#,
    ),
    // Escapes: a quote, a backslash and a control character inside a string.
    ("80 83 22 5C 01", r#""\"\\\u0001""#),
];

#[test]
fn every_wire_form_reads_as_its_json() {
    for (bytes, text) in VECTORS {
        let got = to_text(&hex(bytes), 1 << 20).unwrap_or_else(|e| panic!("{bytes}: {e}"));
        assert_eq!(String::from_utf8(got).unwrap(), *text, "{bytes}");
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(decode(&hex(bytes)).unwrap(), value, "{bytes}");
    }
}

#[test]
fn the_encoder_writes_compact_forms() {
    let cases = [
        (json!(7), "80 07"),
        (json!(200), "80 C8 C8"),
        (json!(-1000), "80 C9 18 FC"),
        (json!(70000), "80 CA 70 11 01 00"),
        (json!(-5000000000i64), "80 CB 00 0E FA D5 FE FF FF FF"),
        (json!(u64::MAX - 1), "80 C7 FE FF FF FF FF FF FF FF"),
        (json!(3.5), "80 CC 00 00 00 00 00 00 0C 40"),
        (json!("id"), "80 2C"),
        (json!("hi"), "80 82 68 69"),
        (json!([]), "80 E0"),
        (json!({}), "80 E8"),
        (json!([0, 1, null]), "80 E5 03 03 00 01 D0"),
        (json!({"id": 0, "type": 1}), "80 ED 04 02 2C 00 3B 01"),
    ];
    for (v, bytes) in cases {
        assert_eq!(encode(&v), hex(bytes), "{v}");
    }
    // Past one-byte lengths and counts: a 300-byte string and a 300-element array.
    let long = "a".repeat(300);
    let b = encode(&json!(long));
    assert_eq!(&b[..4], &[0x80, 0xC1, 0x2C, 0x01]);
    let b = encode(&json!(vec![0; 300]));
    assert_eq!(&b[..6], &[0x80, 0xE6, 0x2C, 0x01, 0x2C, 0x01]);
    assert_eq!(b.len(), 6 + 300);
    // Past two-byte lengths: 70,000 bytes of body take the four-byte framing.
    let big = json!([long.repeat(240)]);
    let b = encode(&big);
    assert_eq!(b[1], 0xE7);
    assert_eq!(decode(&b).unwrap(), big);
}

#[test]
fn malformed_buffers_are_errors_that_say_where() {
    let cases: &[(&str, &str)] = &[
        ("80", "ends in the middle"),
        ("80 D0 00", "1 bytes follow"),
        ("80 C0 05 68 69", "runs past the end"),
        ("80 C1 01", "runs past the end"),
        ("80 82 FF FE", "not valid UTF-8"),
        ("80 FF", "0xFF is not a type marker"),
        ("80 D4", "0xD4 is not a type marker"),
        ("80 41", "user-dictionary strings"),
        ("80 CC 00 00 00 00 00 00 F0 7F", "no JSON form"),
        ("80 E5 02 03 00 01", "declares 3 elements but holds 2"),
        ("80 E2 02 CB 00", "runs past the end"),
        ("80 E2 09 00 00 00 00", "runs past the end"),
        ("80 ED 02 01 01 01", "property name is not a string"),
        ("80 E2 03 C3 00 00", "no string starts"),
        ("80 E2 07 82 68 69 C3 03 C3 06", "no string starts"),
        ("80 E2 06 82 68 69 C3 02 00", "no string starts"),
        ("80 F0 CC 01 00", "not an item type"),
        ("80 F2 F1 DA 01 01 00 00 00 00", "wrong inner array type"),
        ("80 7B 01 F0 0F", "non-ASCII"),
    ];
    for (bytes, says) in cases {
        let err = to_text(&hex(bytes), 1 << 20).expect_err(bytes).to_string();
        assert!(err.contains(says), "{bytes}: {err}");
    }
    assert_eq!(to_text(b"{}", 100), Err(BinaryError::NotBinary));
    assert_eq!(to_text(&[], 100), Err(BinaryError::NotBinary));
}

#[test]
fn nesting_and_expansion_are_bounded() {
    let mut deep = vec![0x80];
    deep.extend(std::iter::repeat_n(0xE1, MAX_DEPTH + 1));
    deep.push(0xD0);
    assert!(to_text(&deep, 1 << 20)
        .unwrap_err()
        .to_string()
        .contains("nest deeper than 128"));
    let mut ok = vec![0x80];
    ok.extend(std::iter::repeat_n(0xE1, MAX_DEPTH));
    ok.push(0xD0);
    assert!(to_text(&ok, 1 << 20).is_ok());

    // One 200-byte string referenced 1,000 times: 2 KB of buffer, 200 KB of text.
    let mut body = vec![0xC0, 200];
    body.extend(std::iter::repeat_n(b'x', 200));
    for _ in 0..1000 {
        body.extend_from_slice(&[0xC4, 4, 0]);
    }
    let mut buf = vec![0x80, 0xE3];
    buf.extend_from_slice(&(body.len() as u16).to_le_bytes());
    buf.extend_from_slice(&body);
    assert_eq!(
        to_text(&buf, 100_000),
        Err(BinaryError::TooLarge { limit: 100_000 })
    );
    assert_eq!(to_text(&buf, 1 << 20).unwrap().len(), 1001 * 203 + 1);
}

#[test]
fn the_negotiation_header_is_read_as_a_list() {
    assert!(accepts_binary("CosmosBinary"));
    assert!(accepts_binary("JsonText, cosmosbinary"));
    assert!(!accepts_binary("JsonText"));
    assert!(!accepts_binary(""));
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,80}".prop_map(Value::String),
        prop_oneof![Just("id"), Just("_rid"), Just("_etag"), Just("type")]
            .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(6, 300, 40, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..40).prop_map(Value::Array),
            prop::collection::vec(("\\PC{0,20}", inner), 0..40)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Encoding then reading gives back the same value, and the same text serde_json writes.
    #[test]
    fn every_value_round_trips(v in json_value()) {
        let b = encode(&v);
        prop_assert_eq!(decode(&b).unwrap(), v.clone());
        prop_assert_eq!(to_text(&b, usize::MAX).unwrap(), serde_json::to_vec(&v).unwrap());
    }

    /// Any prefix or any corruption of a valid buffer is an error or a value, never a panic.
    #[test]
    fn damaged_buffers_never_panic(v in json_value(), cut in any::<prop::sample::Index>(),
                                   flip in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let b = encode(&v);
        let _ = to_text(&b[..cut.index(b.len())], 1 << 20);
        let mut bad = b.clone();
        let i = flip.index(bad.len());
        bad[i] = byte;
        let _ = to_text(&bad, 1 << 20);
    }

    #[test]
    fn random_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        bytes.insert(0, PREAMBLE);
        let _ = to_text(&bytes, 1 << 16);
    }
}
