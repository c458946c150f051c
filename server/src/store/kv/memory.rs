//! The in-memory backend (`--in-memory`, tests): one ordered map per space.
//!
//! Iterators do not hold a lock while the caller works: they copy a chunk of entries under the
//! read lock and continue after its last key, so a long scan never blocks writers.

use super::{empty_bounds, Kv, KvError, KvIter, Op, Space, SPACES};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Entries copied per lock acquisition while iterating.
const CHUNK: usize = 256;

type Map = BTreeMap<Vec<u8>, Bytes>;

/// Ordered maps in memory; nothing survives the process.
pub struct MemoryKv {
    spaces: Vec<RwLock<Map>>,
}

impl MemoryKv {
    pub fn new() -> Self {
        Self {
            spaces: SPACES.iter().map(|_| RwLock::new(Map::new())).collect(),
        }
    }

    fn read(&self, space: Space) -> RwLockReadGuard<'_, Map> {
        self.spaces[space as usize]
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, space: Space) -> RwLockWriteGuard<'_, Map> {
        self.spaces[space as usize]
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for MemoryKv {
    fn default() -> Self {
        Self::new()
    }
}

impl Kv for MemoryKv {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        Ok(self.read(space).get(key).cloned())
    }

    fn range(
        &self,
        space: Space,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> KvIter<'_> {
        if empty_bounds(start, end) {
            return Box::new(std::iter::empty());
        }
        super::pager::paged(
            start,
            end,
            reverse,
            CHUNK,
            Box::new(move |start, end, reverse| {
                let map = self.read(space);
                let range = map.range::<[u8], _>((
                    start.as_ref().map(Vec::as_slice),
                    end.as_ref().map(Vec::as_slice),
                ));
                let take = |(k, v): (&Vec<u8>, &Bytes)| (k.clone(), v.clone());
                Ok(match reverse {
                    true => range.rev().take(CHUNK).map(take).collect(),
                    false => range.take(CHUNK).map(take).collect(),
                })
            }),
        )
    }

    fn apply(&self, ops: Vec<Op>) -> Result<(), KvError> {
        // One space's lock at a time would let a reader see half a batch across spaces; take
        // every space a batch touches, in space order, before changing any.
        let mut touched = [false; SPACES.len()];
        for op in &ops {
            let (Op::Put(s, ..) | Op::Delete(s, _)) = op;
            touched[*s as usize] = true;
        }
        let mut guards: Vec<Option<RwLockWriteGuard<'_, Map>>> = SPACES
            .iter()
            .map(|(s, _)| touched[*s as usize].then(|| self.write(*s)))
            .collect();
        for op in ops {
            match op {
                Op::Put(s, k, v) => {
                    if let Some(m) = guards[s as usize].as_mut() {
                        m.insert(k, Bytes::from(v));
                    }
                }
                Op::Delete(s, k) => {
                    if let Some(m) = guards[s as usize].as_mut() {
                        m.remove(&k);
                    }
                }
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), KvError> {
        Ok(())
    }

    fn is_durable(&self) -> bool {
        false
    }

    fn shutdown(&self) -> Result<(), KvError> {
        Ok(())
    }

    fn disk_space(&self) -> u64 {
        0
    }
}
