//! Who is asking and what they may do: the account keys and their signatures, resource
//! tokens, Entra ID tokens, data-plane RBAC, and the access check of every endpoint.

pub mod aad;
pub mod access;
pub mod auth;
pub mod rbac;
pub mod tokens;
pub mod verified;
