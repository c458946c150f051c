//! Request units: what each operation costs, and (optionally) per-partition throttling.

pub mod charge;
