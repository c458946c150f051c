//! The search policies a container's properties carry, parsed for the parts that read them
//! (the executor, the vector sets, the full-text analysis).

use super::{read, Container};

impl Container {
    /// The container's vector policy (embeddings and vector indexes; empty when it has none
    /// or the stored one no longer parses).
    pub fn vector_policy(&self) -> strata_query::index::vector::VectorPolicy {
        strata_query::index::vector::VectorPolicy::from_props(&read(&self.meta).props)
            .unwrap_or_default()
    }

    /// The container's full-text policy (languages and full-text indexes; the default when it
    /// has none or the stored one no longer parses).
    pub fn full_text_policy(&self) -> strata_query::index::fulltext::FullTextPolicy {
        strata_query::index::fulltext::FullTextPolicy::from_props(&read(&self.meta).props)
            .unwrap_or_default()
    }
}
