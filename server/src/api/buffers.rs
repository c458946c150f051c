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

/// Buffers kept for reuse, at most [`KEPT`] of at most [`MAX_KEPT_BYTES`] each.
struct Pool(Mutex<Vec<Vec<u8>>>);

/// The process's pool of body buffers.
static POOL: Pool = Pool::new();

/// An empty buffer with room for at least `len` bytes: a kept one when one is, else new.
pub fn take(len: usize) -> Vec<u8> {
    POOL.take(len)
}

/// `buf` as a response body; kept for reuse once the body is dropped.
pub fn into_bytes(buf: Vec<u8>) -> Bytes {
    POOL.body(buf)
}

impl Pool {
    const fn new() -> Self {
        Pool(Mutex::new(Vec::new()))
    }

    fn take(&self, len: usize) -> Vec<u8> {
        if len <= MAX_KEPT_BYTES {
            if let Some(mut b) = crate::store::container::lock(&self.0).pop() {
                b.clear();
                b.reserve(len);
                return b;
            }
        }
        Vec::with_capacity(len)
    }

    fn body(&'static self, buf: Vec<u8>) -> Bytes {
        if buf.capacity() > MAX_KEPT_BYTES {
            return Bytes::from(buf);
        }
        Bytes::from_owner(Returned(buf, self))
    }

    fn give_back(&self, buf: Vec<u8>) {
        if buf.capacity() > MAX_KEPT_BYTES {
            return;
        }
        let mut kept = crate::store::container::lock(&self.0);
        if kept.len() < KEPT {
            kept.push(buf);
        }
    }
}

/// A body's buffer on its way back to its pool.
struct Returned(Vec<u8>, &'static Pool);

impl AsRef<[u8]> for Returned {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        self.1.give_back(std::mem::take(&mut self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body reads as written; its buffer comes back to the pool when the body and every
    /// clone of it are gone, and is handed out again; the pool keeps at most [`KEPT`]
    /// buffers and none larger than [`MAX_KEPT_BYTES`].
    #[test]
    fn buffers_come_back_within_the_bound() {
        // A pool of this test's own: no other test can take from it meanwhile.
        static PAGES: Pool = Pool::new();
        let kept = || crate::store::container::lock(&PAGES.0).len();
        let mut b = PAGES.take(10);
        b.extend_from_slice(b"{\"a\":1}");
        let at = b.as_ptr();
        let body = PAGES.body(b);
        let copy = body.clone();
        assert_eq!(&body[..], b"{\"a\":1}");
        drop(body);
        assert_eq!(kept(), 0, "a clone keeps the buffer in use");
        assert_eq!(&copy[..], b"{\"a\":1}");
        drop(copy);
        assert_eq!(kept(), 1, "back once the last clone is gone");
        let again = PAGES.take(5);
        assert!(again.is_empty() && again.capacity() >= 5);
        assert_eq!(again.as_ptr(), at, "the same buffer, handed out again");
        PAGES.give_back(again);
        let larger = PAGES.take(100);
        assert!(
            larger.is_empty() && larger.capacity() >= 100,
            "grown to the need"
        );
        let bodies: Vec<Bytes> = (0..3 * KEPT)
            .map(|i| {
                let mut b = PAGES.take(1000 + i);
                b.extend(std::iter::repeat_n(b'x', 1000 + i));
                PAGES.body(b)
            })
            .collect();
        assert!(bodies.iter().enumerate().all(|(i, b)| b.len() == 1000 + i));
        drop(bodies);
        assert_eq!(kept(), KEPT, "no more than KEPT are kept");
        drop(PAGES.take(0));
        let big = PAGES.take(MAX_KEPT_BYTES + 1);
        drop(PAGES.body(big));
        assert_eq!(
            kept(),
            KEPT - 1,
            "a buffer past the bound is not kept, room or not"
        );
        let mut grown = PAGES.take(10);
        grown.reserve(MAX_KEPT_BYTES * 2);
        PAGES.give_back(grown);
        assert_eq!(kept(), KEPT - 2, "nor one that grew past it");
    }
}
