//! What processes sharing one store coordinate through besides its data (see
//! `crate::follower`): the store's lock — one process holds it and alone opens the data, so it
//! is the only writer and the others are fenced out until it lets go — and shared metadata
//! every process reads: the serving process's addresses, the continuation-token key. The
//! process layers (`net.rs`, `follower.rs`) name this seam, never a backend.

use super::{Kv, KvError};
use futures::future::BoxFuture;

/// A store several processes share.
pub trait Shared: Send + Sync {
    /// Opens the store's data once this process holds the store's lock, asking
    /// `keep_waiting` every little while whether to wait on ([`KvError::Held`] when not).
    fn open_when_free(
        &self,
        keep_waiting: Box<dyn Fn() -> bool + Send + 'static>,
    ) -> Result<Box<dyn Kv>, KvError>;

    /// A shared setting, if set.
    fn read_meta<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, KvError>>;

    /// Sets a shared setting.
    fn write_meta<'a>(
        &'a self,
        name: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<(), KvError>>;

    /// Sets a shared setting unless it is set already: the first writer wins.
    fn write_meta_once<'a>(
        &'a self,
        name: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<(), KvError>>;
}
