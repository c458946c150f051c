//! Any bytes as a Cosmos binary JSON body: an error or JSON text that parses, and text that
//! encodes back to binary and reads as the same text.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use strata_query::binary;

fuzz_target!(|data: &[u8]| {
    let mut body = vec![binary::PREAMBLE];
    body.extend_from_slice(data);
    if let Ok(text) = binary::to_text(&body, 1 << 20) {
        let v: Value = serde_json::from_slice(&text).expect("binary decodes to valid JSON");
        let again = binary::to_text(&binary::encode(&v), usize::MAX).expect("re-encoded");
        assert_eq!(serde_json::from_slice::<Value>(&again).ok(), Some(v));
    }
});
