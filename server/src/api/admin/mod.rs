//! strata's own routes under `/_strata`: the partitions view, the query sample and the
//! advisor, regions and their faults, copy jobs, the RBAC policy, the storage view.

pub mod advise;
pub mod inspect;
pub mod jobs;
pub mod rbac_admin;
pub mod regions;
pub mod storage;
