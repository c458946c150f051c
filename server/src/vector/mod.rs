//! Vector indexes, as plain in-memory structures over `f32` rows: the distance kernels, a
//! scalar quantizer, a Vamana graph and the set that holds one embedding path's vectors.
//! Nothing here knows documents or storage; `store::container::vectors` keeps a set per
//! indexed path current with the container's writes and rebuilds it from the documents.

pub mod codec;
pub mod graph;
pub mod kernels;
pub mod quant;
pub mod rows;
pub mod set;

pub use set::{Found, Hit, Origin, SearchOpts, VectorSet};

/// How distance is measured (the embedding's `distanceFunction`): the query crate's one type,
/// which the evaluator scores with too.
pub use strata_query::index::vector::Distance;

/// The index kind (the `vectorIndexes` entry's `type`): the query crate's one type.
pub use strata_query::index::vector::IndexKind;

/// What shapes a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub kind: IndexKind,
    pub dims: usize,
    pub metric: Distance,
    /// Beam length while linking (`indexingSearchListSize`, the service's default 100).
    pub list: usize,
    /// Most edges per node.
    pub degree: usize,
}
