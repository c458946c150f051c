//! Any bytes as a patch body, applied to a small document; a success must stay readable.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(data) else { return };
    if let Ok(p) = strata_query::patch::parse(&body) {
        let mut doc = serde_json::json!({"id": "1", "n": 1, "a": [1, {"b": 2}]});
        if strata_query::patch::apply(&mut doc, &p.operations, &["/id".into()]).is_ok() {
            assert!(serde_json::from_str::<Value>(&doc.to_string()).is_ok());
        }
    }
});
