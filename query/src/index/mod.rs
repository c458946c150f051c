//! Indexing as the service does it, as pure functions: the container's policy
//! ([`policy`]), the order-preserving terms a document contributes ([`term`]), and the access
//! path a query takes through them ([`access`]). The server stores the entries and walks them;
//! everything that decides *what* is indexed and *how* a query uses it lives here, so it can be
//! tested without a store.

pub mod access;
pub mod fulltext;
pub mod policy;
pub mod spatial;
pub mod term;
pub mod vector;

pub use access::{Access, AccessError, OrderPath, Probe};
pub use policy::{IndexingPolicy, Mode, Seg};
pub use term::Span;
