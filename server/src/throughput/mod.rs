//! Request units: what each operation costs ([`charge`]), provisioned throughput per
//! physical partition ([`governor`]), and the throughput buckets and priority a request
//! is governed by ([`class`]).

pub mod charge;
pub mod class;
pub mod governor;
