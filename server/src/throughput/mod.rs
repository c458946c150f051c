//! Request units: what each operation costs ([`charge`]), and provisioned throughput per
//! physical partition ([`governor`]).

pub mod charge;
pub mod governor;
