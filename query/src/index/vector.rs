//! A container's vector policy: `vectorEmbeddingPolicy.vectorEmbeddings` (which paths hold
//! vectors, their element type, length and distance function) and
//! `indexingPolicy.vectorIndexes` (how each is indexed), validated as the service validates
//! them on create and replace — its 400s carry the messages below, which the official Python
//! suite's `test_vector_policy.py` asserts on.
//!
//! Limits (the service's documentation, "Vector search in Azure Cosmos DB for NoSQL"): at most
//! 4,096 dimensions, 505 for a `flat` index; `quantizationByteSize` from 1 to the smaller of
//! the dimensions and 512; `indexingSearchListSize` from 25 to 500; one shard path.

use serde_json::{Map, Value};

/// The element type of a stored vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    Float32,
    Float16,
    Int8,
    Uint8,
}

/// How two vectors' distance is measured: one type for the policy, the evaluator and the
/// server's vector indexes, kept with the evaluator's `VectorDistance`.
pub use crate::sql::distance::Distance;

/// One `vectorEmbeddings` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    pub path: String,
    pub data_type: DataType,
    pub dimensions: usize,
    pub distance: Distance,
}

/// The kind of a vector index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// Exact search over the stored vectors.
    Flat,
    /// Exact search over product-quantized vectors, re-ranked.
    QuantizedFlat,
    /// A graph (Vamana) over quantized vectors.
    DiskAnn,
}

/// One `vectorIndexes` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorIndex {
    pub path: String,
    pub kind: IndexKind,
    pub quantization_byte_size: Option<u64>,
    pub indexing_search_list_size: Option<u64>,
    pub shard_key: Vec<String>,
}

/// The vector part of a container's definition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorPolicy {
    pub embeddings: Vec<Embedding>,
    pub indexes: Vec<VectorIndex>,
}

/// Most dimensions a vector may have.
pub const MAX_DIMENSIONS: i64 = 4096;
/// Most dimensions a `flat` index takes.
pub const MAX_FLAT_DIMENSIONS: usize = 505;

/// The service's answer to a policy it cannot read at all (a value of the wrong JSON type).
const INVALID_INPUT: &str = "One of the specified inputs is invalid";

impl VectorPolicy {
    /// Parses and validates a container's `vectorEmbeddingPolicy` and the `vectorIndexes` of
    /// its `indexingPolicy` (both optional).
    pub fn from_props(props: &Map<String, Value>) -> Result<Self, String> {
        let embeddings = match props.get("vectorEmbeddingPolicy") {
            None | Some(Value::Null) => Vec::new(),
            Some(p) => embeddings(p)?,
        };
        let indexes = match props
            .get("indexingPolicy")
            .and_then(|p| p.get("vectorIndexes"))
        {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .map(|v| vector_index(v, &embeddings))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(INVALID_INPUT.into()),
        };
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = indexes.iter().find(|i| !seen.insert(i.path.as_str())) {
            return Err(format!(
                "The Vector Indexing Policy has more than one index for path::{}.",
                dup.path
            ));
        }
        Ok(Self {
            embeddings,
            indexes,
        })
    }

    /// Each embedding's path with its distance function's name: what
    /// [`crate::sql::vector::apply`] fills into a `VectorDistance` call that names none.
    pub fn distance_defaults(&self) -> Vec<(String, &'static str)> {
        self.embeddings
            .iter()
            .map(|e| (e.path.clone(), distance_name(e.distance)))
            .collect()
    }

    /// The embedding defined for `path`, if any.
    pub fn embedding(&self, path: &str) -> Option<&Embedding> {
        self.embeddings.iter().find(|e| e.path == path)
    }
}

fn embeddings(policy: &Value) -> Result<Vec<Embedding>, String> {
    let list = match policy.get("vectorEmbeddings") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(l)) => l,
        Some(_) => return Err(INVALID_INPUT.into()),
    };
    let mut out: Vec<Embedding> = Vec::new();
    for e in list {
        let Some(obj) = e.as_object() else {
            return Err(INVALID_INPUT.into());
        };
        let path = match obj.get("path") {
            Some(Value::String(p)) if p.starts_with('/') && p.len() > 1 => p.clone(),
            Some(Value::String(p)) => {
                return Err(format!(
                    "The Vector Embedding Policy has an invalid Path:{p}. A path must start with '/' and name a property."
                ))
            }
            _ => {
                return Err(
                    "The Vector Embedding Policy is missing the required 'path' of an embedding."
                        .into(),
                )
            }
        };
        if out.iter().any(|o| o.path == path) {
            return Err(format!(
                "The Vector Embedding Policy defines the path {path} more than once."
            ));
        }
        let data_type = match obj.get("dataType").and_then(Value::as_str) {
            // The service's default.
            None => DataType::Float32,
            Some(t) => match t.to_ascii_lowercase().as_str() {
                "float32" => DataType::Float32,
                "float16" => DataType::Float16,
                "int8" => DataType::Int8,
                "uint8" => DataType::Uint8,
                _ => return Err(format!(
                    "The Vector Embedding Policy has an invalid DataType:{t}. Supported types are float32, float16, int8 and uint8."
                )),
            },
        };
        let dimensions = match obj.get("dimensions") {
            None => 1536,
            Some(Value::Number(n)) => {
                let d = n.as_i64().ok_or_else(|| INVALID_INPUT.to_string())?;
                if d > MAX_DIMENSIONS {
                    return Err(format!(
                        "The Vector Embedding Policy has Dimensions:{d} which is more than the maximum supported value: {MAX_DIMENSIONS}."
                    ));
                }
                if d < 1 {
                    return Err(format!(
                        "The Vector Embedding Policy has Dimensions:{d} which is less than the minimum supported value: 1."
                    ));
                }
                d as usize
            }
            Some(_) => return Err(INVALID_INPUT.into()),
        };
        let distance = match obj.get("distanceFunction").and_then(Value::as_str) {
            None => Distance::Cosine,
            Some(f) => Distance::parse(f).ok_or_else(|| format!(
                "The Vector Embedding Policy has an invalid DistanceFunction:{f}. Supported functions are cosine, dotproduct and euclidean."
            ))?,
        };
        if let Some(source) = obj.get("embeddingSource") {
            embedding_source(source)?;
        }
        out.push(Embedding {
            path,
            data_type,
            dimensions,
            distance,
        });
    }
    Ok(out)
}

/// An `embeddingSource` (the model the service would call to fill the vector): round-tripped,
/// since strata calls no model, but held to the service's rules.
fn embedding_source(source: &Value) -> Result<(), String> {
    let Some(obj) = source.as_object() else {
        return Err(INVALID_INPUT.into());
    };
    let paths = obj.get("sourcePaths").and_then(Value::as_array);
    if paths.is_none_or(|p| p.is_empty() || p.iter().any(|v| !v.is_string())) {
        return Err(
            "The embedding source of the vector policy needs 'sourcePaths': a non-empty list of paths."
                .into(),
        );
    }
    for field in ["endpoint", "deploymentName"] {
        if obj
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(format!(
                "The embedding source of the vector policy needs '{field}'."
            ));
        }
    }
    match obj.get("authType").and_then(Value::as_str) {
        None | Some("ApiKey") | Some("Entra") => Ok(()),
        Some(_) => Err(
            "The auth type provided in the embedding source of vector policy is invalid.".into(),
        ),
    }
}

fn vector_index(v: &Value, embeddings: &[Embedding]) -> Result<VectorIndex, String> {
    let Some(obj) = v.as_object() else {
        return Err(INVALID_INPUT.into());
    };
    let path = obj
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(embedding) = embeddings.iter().find(|e| e.path == path) else {
        return Err(format!(
            "The Vector Indexing Policy's path::{path} not matching in Embedding's path."
        ));
    };
    let kind = match obj.get("type").and_then(Value::as_str) {
        Some(t) => match t.to_ascii_lowercase().as_str() {
            "flat" => IndexKind::Flat,
            "quantizedflat" => IndexKind::QuantizedFlat,
            "diskann" => IndexKind::DiskAnn,
            _ => {
                return Err(format!(
                    "The Vector Indexing Policy's Index Type::{t} is invalid. Supported types are flat, quantizedFlat and diskANN."
                ))
            }
        },
        None => {
            return Err(format!(
                "The Vector Indexing Policy's index for path::{path} needs a 'type'."
            ))
        }
    };
    if kind == IndexKind::Flat && embedding.dimensions > MAX_FLAT_DIMENSIONS {
        return Err(format!(
            "The Vector Indexing Policy's flat index for path::{path} has {} dimensions; a flat index supports at most {MAX_FLAT_DIMENSIONS}. Use quantizedFlat or diskANN.",
            embedding.dimensions
        ));
    }
    if let Some(q) = obj.get("quantizerType") {
        match q.as_str() {
            Some("product") | Some("spherical") => {}
            Some(other) => {
                return Err(format!(
                    "The Vector Indexing Policy has an invalid QuantizerType:{other}. Supported types are product and spherical."
                ))
            }
            None => return Err(INVALID_INPUT.into()),
        }
    }
    let quantization_byte_size = bounded(
        obj,
        "quantizationByteSize",
        "QuantizationByteSize",
        1,
        (embedding.dimensions as i64).min(512),
    )?;
    let indexing_search_list_size = bounded(
        obj,
        "indexingSearchListSize",
        "IndexingSearchListSize",
        25,
        500,
    )?;
    let shard_key = match obj.get("vectorIndexShardKey") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(paths)) => {
            let mut out = Vec::new();
            for p in paths {
                let p = p.as_str().ok_or_else(|| INVALID_INPUT.to_string())?;
                if !p.starts_with('/') || p.len() < 2 {
                    return Err(format!(
                        "The Vector Indexing Policy has an invalid Shard Path: {p}."
                    ));
                }
                out.push(p.to_string());
            }
            if out.len() > 1 {
                return Err(format!(
                    "The number of shard paths defined in the Vector Indexing Policy: {} exceeds the maximum: 1.",
                    out.len()
                ));
            }
            out
        }
        Some(_) => return Err(INVALID_INPUT.into()),
    };
    Ok(VectorIndex {
        path,
        kind,
        quantization_byte_size,
        indexing_search_list_size,
        shard_key,
    })
}

/// An optional integer parameter within `[lo, hi]`.
fn bounded(
    obj: &Map<String, Value>,
    field: &str,
    name: &str,
    lo: i64,
    hi: i64,
) -> Result<Option<u64>, String> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let n = v.as_i64().ok_or_else(|| INVALID_INPUT.to_string())?;
            if n < lo || n > hi {
                return Err(format!(
                    "The Vector Indexing Policy parameter {name} value :: {n} is out of range. The allowed range is between {lo} and {hi}."
                ));
            }
            Ok(Some(n as u64))
        }
    }
}

/// What a replace may change: the existing embeddings and vector indexes stay as they are
/// (new ones may be added), as in the service.
pub fn check_replace(old: &VectorPolicy, new: &VectorPolicy) -> Result<(), String> {
    if old.embeddings.iter().any(|e| !new.embeddings.contains(e)) {
        return Err(
            "Paths in existing embedding policy cannot be modified in Collection Replace.".into(),
        );
    }
    if old.indexes.iter().any(|i| !new.indexes.contains(i)) {
        return Err(
            "Paths in existing vector indexing policy cannot be modified in Collection Replace."
                .into(),
        );
    }
    Ok(())
}

/// The name the service spells a distance function with.
pub fn distance_name(d: Distance) -> &'static str {
    d.name()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<VectorPolicy, String> {
        VectorPolicy::from_props(v.as_object().expect("object"))
    }

    fn embedding(dims: i64) -> Value {
        json!({"vectorEmbeddings": [
            {"path": "/vector1", "dataType": "float32", "dimensions": dims, "distanceFunction": "euclidean"},
            {"path": "/vector2", "dataType": "int8", "dimensions": 200, "distanceFunction": "dotproduct"}]})
    }

    /// Each case of `test_fail_create_vector_indexing_policy` and
    /// `test_fail_create_vector_embedding_policy` (azure-cosmos 4.17.1 tests), with the part of
    /// the message the test asserts.
    #[test]
    fn the_official_suites_invalid_policies_fail_with_its_messages() {
        let cases = [
            (json!({"indexingPolicy": {"vectorIndexes": [{"path": "/vector1", "type": "flat"}]}}),
             "vector1 not matching in Embedding's path"),
            (json!({"vectorEmbeddingPolicy": embedding(256), "indexingPolicy": {"vectorIndexes": [{"path": "/vector1", "type": "notFlat"}]}}),
             "Index Type::notFlat is invalid"),
            (json!({"vectorEmbeddingPolicy": embedding(256), "indexingPolicy": {"vectorIndexes": [{"path": "/vector3", "type": "flat"}]}}),
             "vector3 not matching in Embedding's path"),
            (json!({"vectorEmbeddingPolicy": embedding(256), "indexingPolicy": {"vectorIndexes": [{"path": "/vector1", "type": "quantizedFlat", "quantizationByteSize": 0}]}}),
             "The Vector Indexing Policy parameter QuantizationByteSize value :: 0 is out of range. The allowed range is between 1 and 256."),
            (json!({"vectorEmbeddingPolicy": embedding(256), "indexingPolicy": {"vectorIndexes": [{"path": "/vector1", "type": "diskANN", "indexingSearchListSize": 5}]}}),
             "IndexingSearchListSize value :: 5 is out of range. The allowed range is between 25 and 500."),
            (json!({"vectorEmbeddingPolicy": embedding(256), "indexingPolicy": {"vectorIndexes": [{"path": "/vector2", "type": "diskANN", "vectorIndexShardKey": ["country"]}]}}),
             "The Vector Indexing Policy has an invalid Shard Path: country."),
            (json!({"vectorEmbeddingPolicy": embedding(256), "indexingPolicy": {"vectorIndexes": [{"path": "/vector2", "type": "diskANN", "vectorIndexShardKey": ["/country", "/city", "/zipcode"]}]}}),
             "The number of shard paths defined in the Vector Indexing Policy: 3 exceeds the maximum: 1."),
            (json!({"vectorEmbeddingPolicy": embedding(256), "indexingPolicy": {"vectorIndexes": [{"path": "/vector2", "type": "diskANN", "vectorIndexShardKey": "/country"}]}}),
             "One of the specified inputs is invalid"),
            (json!({"vectorEmbeddingPolicy": embedding(550), "indexingPolicy": {"vectorIndexes": [{"path": "/vector1", "type": "quantizedFlat", "quantizationByteSize": 513}]}}),
             "The Vector Indexing Policy parameter QuantizationByteSize value :: 513 is out of range."),
            (json!({"vectorEmbeddingPolicy": {"vectorEmbeddings": [{"path": "/v", "dataType": "float33", "dimensions": 256, "distanceFunction": "euclidean"}]}}),
             "Vector Embedding Policy has an invalid DataType"),
            (json!({"vectorEmbeddingPolicy": embedding(8000)}),
             "Vector Embedding Policy has Dimensions:8000 which is more than the maximum supported value"),
            (json!({"vectorEmbeddingPolicy": embedding(-1)}),
             "The Vector Embedding Policy has Dimensions:-1"),
            (json!({"vectorEmbeddingPolicy": {"vectorEmbeddings": [{"path": "/v", "dataType": "float32", "dimensions": 256, "distanceFunction": "handMeasured"}]}}),
             "The Vector Embedding Policy has an invalid DistanceFunction:handMeasured"),
            (json!({"vectorEmbeddingPolicy": {"vectorEmbeddings": [{"path": "/e", "dimensions": 8, "embeddingSource": {"sourcePaths": ["/t"], "endpoint": "https://x", "deploymentName": "d", "authType": "NotAnAuthType"}}]}}),
             "The auth type provided in the embedding source of vector policy is invalid."),
            (json!({"vectorEmbeddingPolicy": embedding(1536), "indexingPolicy": {"vectorIndexes": [{"path": "/vector1", "type": "flat"}]}}),
             "a flat index supports at most 505"),
        ];
        for (props, message) in cases {
            let err = parse(props.clone()).expect_err(&props.to_string());
            assert!(err.contains(message), "{props}: {err}");
        }
    }

    #[test]
    fn the_official_suites_valid_policies_parse() {
        let p = parse(json!({
            "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                {"path": "/vector1", "dataType": "float32", "dimensions": 256, "distanceFunction": "euclidean"},
                {"path": "/vector2", "dataType": "int8", "dimensions": 200, "distanceFunction": "dotproduct"},
                {"path": "/vector3", "dataType": "uint8", "dimensions": 400, "distanceFunction": "cosine"},
                {"path": "/vector4", "dataType": "uint8", "dimensions": 400, "distanceFunction": "euclidean"}]},
            "indexingPolicy": {"vectorIndexes": [
                {"path": "/vector1", "type": "flat"},
                {"path": "/vector2", "type": "quantizedFlat", "quantizerType": "product", "quantizationByteSize": 8},
                {"path": "/vector3", "type": "diskANN", "quantizerType": "product", "quantizationByteSize": 8,
                 "vectorIndexShardKey": ["/city"], "indexingSearchListSize": 50},
                {"path": "/vector4", "type": "diskANN", "quantizerType": "spherical", "indexingSearchListSize": 50}]}
        }))
        .expect("valid");
        assert_eq!(p.indexes.len(), 4);
        assert_eq!(p.embedding("/vector3").map(|e| e.dimensions), Some(400));
        assert_eq!(p.indexes[2].shard_key, ["/city"]);
        let with_source = json!({"vectorEmbeddingPolicy": {"vectorEmbeddings": [{"path": "/embedding",
            "dataType": "float32", "dimensions": 1536, "distanceFunction": "cosine", "embeddingSource": {
            "sourcePaths": ["/title"], "deploymentName": "m", "modelName": "m", "endpoint": "https://example.com",
            "authType": "Entra"}}]}});
        assert!(parse(with_source).is_ok());
    }

    /// `test_fail_replace_vector_indexing_policy`: existing indexes and embeddings stay.
    #[test]
    fn replace_keeps_existing_vector_definitions() {
        let old = parse(json!({"vectorEmbeddingPolicy": embedding(256),
            "indexingPolicy": {"vectorIndexes": [{"path": "/vector1", "type": "flat"}]}}))
        .expect("old");
        let same = old.clone();
        assert!(check_replace(&old, &same).is_ok());
        let mut other_index = old.clone();
        other_index.indexes[0].kind = IndexKind::QuantizedFlat;
        assert!(check_replace(&old, &other_index)
            .expect_err("index changed")
            .contains(
                "Paths in existing vector indexing policy cannot be modified in Collection Replace"
            ));
        let mut other_dims = old.clone();
        other_dims.embeddings[0].dimensions = 384;
        assert!(check_replace(&old, &other_dims)
            .expect_err("embedding changed")
            .contains(
                "Paths in existing embedding policy cannot be modified in Collection Replace"
            ));
        let mut added = old.clone();
        added.indexes.push(VectorIndex {
            path: "/vector2".into(),
            kind: IndexKind::DiskAnn,
            quantization_byte_size: None,
            indexing_search_list_size: None,
            shard_key: Vec::new(),
        });
        assert!(check_replace(&old, &added).is_ok());
    }
}
