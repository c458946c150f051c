//! The item-operation layer, below the REST API and above the store: what an operation on one
//! item is and does, whoever asks for it. A point request, a transactional batch or bulk
//! request, a stored procedure's data operation and a trigger all decode into one [`Op`] and
//! run [`apply`] in a container transaction; conditions, renames, patches, system properties
//! and TTL rules live here once.
//!
//! * [`document`](mod@document): what a document and its key must be (size, id rules, partition key).
//! * [`ops`]: operations, conditions, outcomes, and [`apply`].
//! * [`system`]: the system properties a stored version carries, and the `ttl` rule.
//! * [`host`]: the data operations of server-side scripts, served with [`apply`].
//! * [`triggers`]: pre- and post-triggers around one write.
//!
//! It depends on `store`, `exec` (script queries) and `script`, never on `api`.

pub mod document;
pub mod host;
pub mod ops;
pub mod system;
pub mod triggers;

pub use document::{check_doc_key, document, point_key, Doc, MAX_ITEM_BYTES};
pub use ops::{apply, etag_matches, not_found, Conditions, Op, Outcome};
