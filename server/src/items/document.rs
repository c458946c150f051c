//! What a document and its key must be before any operation runs: the size limit, the id
//! rules (shared by every resource), the partition key a point operation addresses and the
//! one the document carries.

use crate::error::{substatus, CosmosError};
use crate::store::container::Container;
use serde_json::{Map, Value};
use strata_query::pk::epk::effective_partition_key;
use strata_query::pk::{PartitionKey, PartitionKind, PkComponent};

/// A document a write stores: its properties, and the request body they were read from when
/// that text is stored as it is (its members copied, the system properties appended:
/// [`super::system::stamp`]) rather than written again from the properties. A document a
/// trigger, a patch or a script made has no such text.
#[derive(Debug, Clone)]
pub struct Doc {
    pub map: Map<String, Value>,
    pub text: Option<bytes::Bytes>,
}

impl Doc {
    /// The document `map` parsed from `text` (a request's body), which it keeps.
    pub fn read_from(map: Map<String, Value>, text: bytes::Bytes) -> Self {
        Self {
            map,
            text: Some(text),
        }
    }
}

impl From<Map<String, Value>> for Doc {
    fn from(map: Map<String, Value>) -> Self {
        Self { map, text: None }
    }
}

/// Largest document Cosmos accepts.
pub const MAX_ITEM_BYTES: usize = 2 * 1024 * 1024;

/// A full partition key for a point operation, with its EPK. `[]` on a container created
/// without a partition key addresses its single (undefined) logical partition.
pub fn full_key(c: &Container, pk: PartitionKey) -> Result<(PartitionKey, String), CosmosError> {
    let pk = if c.pk.system_key && pk.is_empty() {
        PartitionKey(vec![PkComponent::Undefined])
    } else {
        pk
    };
    let epk = effective_partition_key(&c.pk, &pk)?;
    Ok((pk, epk))
}

/// The partition key of a point operation: the given one, else (for writes) the document's.
pub fn point_key(
    c: &Container,
    given: Option<PartitionKey>,
    doc: Option<&Map<String, Value>>,
) -> Result<(PartitionKey, String), CosmosError> {
    let pk = match (given, doc) {
        (Some(pk), _) => pk,
        (None, Some(d)) => c.pk.extract_map(d),
        (None, None) if c.pk.system_key => PartitionKey::default(),
        (None, None) => {
            return Err(CosmosError::bad_request(
                "PartitionKey value must be supplied for this operation: send the x-ms-documentdb-partitionkey header (a JSON array with one value per partition key path).",
            ))
        }
    };
    if pk.len() < c.pk.levels() && !(c.pk.system_key && pk.is_empty()) {
        return Err(CosmosError::bad_request(format!(
            "Partition key provided either doesn't correspond to definition in the collection or doesn't match partition key field values specified in the document. Point operations need the full partition key: the container has {} partition key path(s) ({}) but {} value(s) were given. A prefix is only accepted by queries and the change feed.",
            c.pk.levels(),
            c.pk.paths.join(", "),
            pk.len()
        ))
        .with_sub_status(substatus::PARTITION_KEY_MISMATCH));
    }
    full_key(c, pk)
}

/// Checks that the document's own partition key matches the one the request routes by.
pub fn check_doc_key(
    c: &Container,
    pk: &PartitionKey,
    doc: &Map<String, Value>,
) -> Result<(), CosmosError> {
    if c.pk.system_key {
        return Ok(());
    }
    let found = c.pk.extract_map(doc);
    // A hierarchical key needs every level in the document (an explicit null is a value); the
    // service refuses an item missing one whatever the header says.
    if c.pk.kind == PartitionKind::MultiHash {
        if let Some(i) = found.0.iter().position(|v| *v == PkComponent::Undefined) {
            return Err(CosmosError::bad_request(format!(
                "PartitionKey extracted from document doesn't match the one specified in the header: the document has no value at {}, level {} of the container's hierarchical partition key ({}); every level needs a value (null is one).",
                c.pk.paths[i],
                i + 1,
                c.pk.paths.join(", ")
            ))
            .with_sub_status(substatus::PARTITION_KEY_MISMATCH));
        }
    }
    let ok = pk.0.len() == found.0.len()
        && pk
            .0
            .iter()
            .zip(&found.0)
            .all(|(h, d)| h.matches_document(d));
    if ok {
        Ok(())
    } else {
        Err(CosmosError::bad_request(format!(
            "PartitionKey extracted from document doesn't match the one specified in the header: the header says {pk}, the document has {found} at {}.",
            c.pk.paths.join(", ")
        ))
        .with_sub_status(substatus::PARTITION_KEY_MISMATCH))
    }
}

/// A document to write: size-checked, an object, with a valid id.
pub fn document(body: Value, size: usize) -> Result<(Map<String, Value>, String), CosmosError> {
    if size > MAX_ITEM_BYTES {
        return Err(CosmosError::too_large(format!(
            "The item is {size} bytes; the maximum document size is {MAX_ITEM_BYTES} bytes (2 MB)."
        )));
    }
    let doc = match body {
        Value::Object(m) => m,
        other => {
            return Err(CosmosError::bad_request(format!(
                "The item must be a JSON object, not {}.",
                json_kind(&other)
            )))
        }
    };
    let id = validate_id(doc.get("id").unwrap_or(&Value::Null), "item")?;
    Ok((doc, id))
}

/// The paths a patch may not touch: the id and the partition key.
pub fn protected_paths(c: &Container) -> Vec<String> {
    let mut v = vec!["/id".to_string()];
    v.extend(c.pk.paths.iter().cloned());
    v
}

pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Validates a resource id (database, container or item).
pub fn validate_id(id: &Value, what: &str) -> Result<String, CosmosError> {
    let id = match id {
        Value::String(s) => s,
        Value::Null => {
            return Err(CosmosError::bad_request(format!(
                "The input content is invalid because the required properties - 'id; ' - are missing: every {what} needs a string 'id'."
            )))
        }
        other => {
            return Err(CosmosError::bad_request(format!(
                "The {what} 'id' must be a string, not {}.",
                json_kind(other)
            )))
        }
    };
    if id.is_empty() {
        return Err(CosmosError::bad_request(format!(
            "The {what} 'id' must not be empty."
        )));
    }
    // An item's id may take 1,023 bytes, any other resource's 255 characters (the service's
    // limits page); past them the service's message names the bound it checks.
    if what == "item" && id.len() > 1023 {
        return Err(CosmosError::bad_request(format!(
            "The item id is {} bytes long. Ensure to provide a unique non-empty string less than '1024' characters.",
            id.len()
        )));
    }
    if what != "item" && id.chars().count() > 255 {
        return Err(CosmosError::bad_request(format!(
            "The {what} id is {} characters long. Ensure to provide a unique non-empty string less than '255' characters.",
            id.chars().count()
        )));
    }
    if let Some(c) = id.chars().find(|c| matches!(c, '/' | '\\' | '?' | '#')) {
        return Err(CosmosError::bad_request(format!(
            "The {what} id '{id}' contains the character '{c}', which is not allowed ('/', '\\', '?' and '#' are reserved)."
        )));
    }
    if id.ends_with(' ') {
        return Err(CosmosError::bad_request(format!(
            "The {what} id '{id}' ends with a space, which is not allowed."
        )));
    }
    Ok(id.clone())
}
