//! Buffers for response bodies assembled from stored documents (a query's page, a feed),
//! kept for reuse once the connection has sent them.
//!
//! A page of a few kilobytes taken fresh from the allocator for each response came back as
//! new pages to fault in: under `perf` the allocation and its page faults were 2.4% of a
//! single-partition query's server CPU, more than copying the documents into it. A buffer
//! goes back to the pool when its `Bytes` is dropped (after the send), so the same few
//! buffers serve one response after another.
//!
//! Bounded: at most [`KEPT`] buffers, each of at most [`MAX_KEPT_BYTES`] capacity, are kept
//! (a larger one is freed as usual), so the pool never holds more than 4 MB.

use bytes::Bytes;
use std::sync::Mutex;

/// Buffers kept for reuse.
const KEPT: usize = 16;
/// The largest buffer kept; a page of large documents goes back to the allocator.
const MAX_KEPT_BYTES: usize = 256 << 10;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// An empty buffer with room for at least `len` bytes: a kept one when one is, else new.
pub fn take(len: usize) -> Vec<u8> {
    if len <= MAX_KEPT_BYTES {
        if let Some(mut b) = crate::store::container::lock(&POOL).pop() {
            b.clear();
            b.reserve(len);
            return b;
        }
    }
    Vec::with_capacity(len)
}

/// `buf` as a response body; kept for reuse once the body is dropped.
pub fn into_bytes(buf: Vec<u8>) -> Bytes {
    if buf.capacity() > MAX_KEPT_BYTES {
        return Bytes::from(buf);
    }
    Bytes::from_owner(Returned(buf))
}

/// A body's buffer on its way back to the pool.
struct Returned(Vec<u8>);

impl AsRef<[u8]> for Returned {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        if buf.capacity() > MAX_KEPT_BYTES {
            return;
        }
        let mut pool = crate::store::container::lock(&POOL);
        if pool.len() < KEPT {
            pool.push(buf);
        }
    }
}

/// Bytes of buffers the pool keeps now (for tests).
#[cfg(test)]
fn kept_bytes() -> usize {
    crate::store::container::lock(&POOL)
        .iter()
        .map(Vec::capacity)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body reads as written, its buffer comes back when the body (and every clone of
    /// it) is gone, and the pool keeps no more than its bound however many bodies end.
    #[test]
    fn buffers_come_back_within_the_bound() {
        let mut b = take(10);
        b.extend_from_slice(b"{\"a\":1}");
        let body = into_bytes(b);
        let copy = body.clone();
        assert_eq!(&body[..], b"{\"a\":1}");
        drop(body);
        assert_eq!(&copy[..], b"{\"a\":1}", "a clone keeps the buffer alive");
        drop(copy);
        let bodies: Vec<Bytes> = (0..3 * KEPT)
            .map(|i| {
                let mut b = take(1000 + i);
                b.extend(std::iter::repeat_n(b'x', 1000 + i));
                into_bytes(b)
            })
            .collect();
        assert!(bodies.iter().enumerate().all(|(i, b)| b.len() == 1000 + i));
        drop(bodies);
        let big = take(MAX_KEPT_BYTES + 1);
        drop(into_bytes(big));
        assert!(kept_bytes() <= KEPT * MAX_KEPT_BYTES);
        assert!(crate::store::container::lock(&POOL).len() <= KEPT);
        let again = take(100);
        assert!(again.is_empty() && again.capacity() >= 100);
    }
}
