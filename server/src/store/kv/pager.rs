//! A range scan a page at a time, for the backends that cannot hold an iterator open between
//! pages (the in-memory map under its lock, PostgreSQL without a cursor): each page is fetched
//! after the last key returned — forward, the start moves up; in reverse, the end moves down —
//! so nothing is held while the caller works. A backend supplies only the fetch of one page.

use super::{KvError, KvIter};
use bytes::Bytes;
use std::collections::VecDeque;
use std::ops::Bound;

/// Up to `page` entries of `[start, end)` (as the bounds say), in key order or in reverse.
pub type Fetch<'a> = Box<
    dyn FnMut(&Bound<Vec<u8>>, &Bound<Vec<u8>>, bool) -> Result<Vec<(Vec<u8>, Bytes)>, KvError>
        + Send
        + 'a,
>;

struct Pager<'a> {
    fetch: Fetch<'a>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    page: usize,
    buf: VecDeque<(Vec<u8>, Bytes)>,
    done: bool,
}

/// The scan of `[start, end)` that `fetch` answers `page` entries at a time.
pub fn paged<'a>(
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
    reverse: bool,
    page: usize,
    fetch: Fetch<'a>,
) -> KvIter<'a> {
    Box::new(Pager {
        fetch,
        start: start.map(<[u8]>::to_vec),
        end: end.map(<[u8]>::to_vec),
        reverse,
        page: page.max(1),
        buf: VecDeque::new(),
        done: false,
    })
}

impl Pager<'_> {
    fn refill(&mut self) -> Result<(), KvError> {
        let rows = (self.fetch)(&self.start, &self.end, self.reverse)?;
        if rows.len() < self.page {
            self.done = true;
        }
        if let Some((last, _)) = rows.last() {
            let after = Bound::Excluded(last.clone());
            match self.reverse {
                true => self.end = after,
                false => self.start = after,
            }
        }
        self.buf.extend(rows);
        Ok(())
    }
}

impl Iterator for Pager<'_> {
    type Item = Result<(Vec<u8>, Bytes), KvError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() && !self.done {
            if let Err(e) = self.refill() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.buf.pop_front().map(Ok)
    }
}
