//! Runs every reference vector in `tests/data/epk-vectors.json` (produced by running the
//! official SDKs) through our EPK code. V2 and MultiHash must match exactly; V1 must match the
//! reference (.NET/Java) value, which is `epk_min` even where the Python SDK deviates.

use serde_json::Value;
use strata_query::pk::epk::{effective_partition_key, epk_range};
use strata_query::pk::{PartitionKey, PartitionKeyDefinition, PartitionKind, PkComponent};

fn vectors_path() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.join("tests/data/epk-vectors.json")
}

fn component(v: &Value) -> PkComponent {
    if let Some(o) = v.as_object() {
        if o.get("$undefined") == Some(&Value::Bool(true)) {
            return PkComponent::Undefined;
        }
        if let Some(Value::String(d)) = o.get("$double") {
            return PkComponent::Number(d.parse().expect("double"));
        }
    }
    PkComponent::from_json(v).expect("primitive component")
}

#[test]
fn every_reference_vector_matches() {
    let text = std::fs::read_to_string(vectors_path()).expect("read epk-vectors.json");
    let doc: Value = serde_json::from_str(&text).expect("json");
    let vectors = doc["vectors"].as_array().expect("vectors");
    assert_eq!(vectors.len(), 172, "the reference file has 172 vectors");
    let mut failures = Vec::new();
    for (i, v) in vectors.iter().enumerate() {
        let kind = match v["kind"].as_str().unwrap() {
            "Hash" => PartitionKind::Hash,
            _ => PartitionKind::MultiHash,
        };
        let version = v["version"].as_u64().unwrap() as u8;
        let n = v["paths_count"].as_u64().unwrap() as usize;
        let paths: Vec<String> = (0..n).map(|i| format!("/p{i}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let def = PartitionKeyDefinition::new(&refs, kind, version).unwrap();
        let pk = PartitionKey(
            v["components"]
                .as_array()
                .unwrap()
                .iter()
                .map(component)
                .collect(),
        );
        let want_min = v["epk_min"].as_str().unwrap();
        let want_max = v["epk_max"].as_str().unwrap();
        let (got_min, got_max) = if v["is_prefix"].as_bool().unwrap() {
            let r = epk_range(&def, &pk).unwrap();
            (r.min, r.max)
        } else {
            let e = effective_partition_key(&def, &pk).unwrap();
            (e.clone(), e)
        };
        if got_min != want_min || got_max != want_max {
            failures.push(format!(
                "#{i} {kind:?} v{version} {}: got [{got_min}, {got_max}] want [{want_min}, {want_max}]",
                v["components"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
