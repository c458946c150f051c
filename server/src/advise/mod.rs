//! The partition-key advisor: measure candidate partition keys on a container's real items
//! and queries before copying into one of them (`strata advise`, the explorer's Advise
//! view, `POST /_strata/containers/{db}/{c}/advise`).
//!
//! * [`sample`]: the query sample the server keeps per container (the workload to replay).
//! * [`model`]: one key's logical partitions from the real EPK hashing, and the physical
//!   partitions the splitter's own rules would make of them.
//! * [`routes`]: the sample replayed under a key by the real query planner.
//! * [`assess`]: one key's checks in the order of the service's guidance, and the ranking.
//! * [`advice`]: every key measured on the same items, the recommendation and its copy
//!   command; [`report`]: the advice as text.
pub mod advice;
pub mod assess;
pub mod model;
pub mod report;
pub mod routes;
pub mod sample;
