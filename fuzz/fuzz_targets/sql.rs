//! Any bytes as a query: parse, bind, plan, evaluate, print. Must never panic or overflow.
#![no_main]
use libfuzzer_sys::fuzz_target;
use strata_query::sql::{prepare, prepare_condition, Ctx, Flow};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let doc = serde_json::json!({"id": "1", "a": 2, "s": "abc", "tags": ["x", 3]});
    if let Ok(q) = prepare(text, &[], None) {
        let _ = q.eval_doc(&doc, &Ctx::new(0), &mut |_| Ok(Flow::Continue));
        let _ = q.query.to_string();
    }
    let _ = prepare_condition(text);
});
