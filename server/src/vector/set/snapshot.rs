//! A set written to a file and read back, so that a restart serves indexed queries at once
//! instead of relinking every vector (a million vectors took ten minutes to link). The file
//! is a cache: the documents stay the truth. A set read back is reconciled with them
//! ([`VectorSet::origin_of`], [`VectorSet::drop_unseen`]): a slot whose document version
//! (LSN and place in its transaction) is still the stored one is kept, every other document
//! is read again, and slots whose documents are gone are dropped — so a snapshot older than
//! the last writes (one taken before a `kill -9`) loses nothing either.

use super::super::codec::{Reader, Writer};
use super::{Graph, Origin, Params, Shard, VectorSet};
use crate::vector::quant::Quantizer;
use std::io::{self, Read, Write};

/// The format's name and version, first in the file.
const MAGIC: &[u8] = b"strata-vector-set-1";

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl VectorSet {
    /// Writes the set (its pending consolidation pass is not kept: the next start plans
    /// another).
    pub fn write<W: Write>(&self, w: &mut Writer<W>) -> io::Result<()> {
        w.bytes(MAGIC)?;
        w.bytes(format!("{:?}", self.params).as_bytes())?;
        w.f32s_in_runs(self.rows.values(), |put| self.rows.each_from(0, put))?;
        w.f32s(&self.norms)?;
        let lsns: Vec<u64> = self.origins.iter().map(|o| o.lsn).collect();
        let subs: Vec<u32> = self.origins.iter().map(|o| o.sub).collect();
        let exact: Vec<u8> = self.origins.iter().map(|o| u8::from(o.exact)).collect();
        w.u64s(&lsns)?;
        w.u32s(&subs)?;
        w.bytes(&exact)?;
        w.i8s(&self.codes)?;
        match &self.quant {
            Some(q) => {
                w.u32(1)?;
                q.write(w)?;
            }
            None => w.u32(0)?,
        }
        w.u64(self.trained_on as u64)?;
        w.u64(self.keys.len() as u64)?;
        for k in &self.keys {
            match k {
                Some(k) => {
                    w.u32(1)?;
                    w.bytes(k)?;
                }
                None => w.u32(0)?,
            }
        }
        w.u32s(&self.shard_of)?;
        w.u32s(&self.node_of)?;
        w.u64(self.shards.len() as u64)?;
        for s in &self.shards {
            w.bytes(&s.value)?;
            w.bytes(&s.min_key)?;
            w.bytes(&s.max_key)?;
            w.u32s(&s.members)?;
            w.u64(s.doomed as u64)?;
            match &s.graph {
                Some(g) => {
                    w.u32(1)?;
                    g.write(w)?;
                }
                None => w.u32(0)?,
            }
        }
        Ok(())
    }

    /// Reads a set [`VectorSet::write`] wrote with the same `params`; refuses one written
    /// for other parameters or whose parts do not fit together.
    pub fn read<R: Read>(
        r: &mut Reader<R>,
        params: Params,
        place: Option<&crate::vector::rows::Place>,
    ) -> io::Result<Self> {
        if r.bytes()? != MAGIC {
            return Err(bad("not a vector-set snapshot of this version"));
        }
        if r.bytes()? != format!("{params:?}").as_bytes() {
            return Err(bad("a snapshot of an index with other parameters"));
        }
        let mut set = VectorSet::with_rows_in(params, place);
        let d = params.dims;
        // Straight to the rows' file as they come (a million rows are half a gigabyte).
        r.f32s_in_rows(d, |run| {
            run.chunks_exact(d.max(1))
                .for_each(|row| set.rows.push(row));
            set.rows.spill_before(set.rows.len());
        })?;
        set.norms = r.f32s()?;
        let (lsns, subs, exact) = (r.u64s()?, r.u32s()?, r.bytes()?);
        set.codes = r.i8s()?;
        set.quant = match r.u32()? {
            1 => Some(Quantizer::read(r)?),
            _ => None,
        };
        set.trained_on = r.u64()? as usize;
        let n = r.u64()?;
        let mut keys = Vec::new();
        for _ in 0..n {
            keys.push(match r.u32()? {
                1 => Some(r.bytes()?.into_boxed_slice()),
                _ => None,
            });
        }
        set.keys = keys;
        set.shard_of = r.u32s()?;
        set.node_of = r.u32s()?;
        let shards = r.u64()?;
        for _ in 0..shards {
            let (value, min_key, max_key) = (r.bytes()?, r.bytes()?, r.bytes()?);
            let members = r.u32s()?;
            let doomed = r.u64()? as usize;
            let graph = match r.u32()? {
                1 => Some(Graph::read(r)?),
                _ => None,
            };
            set.shards.push(Shard {
                value,
                min_key,
                max_key,
                members,
                graph,
                doomed,
                pass: None,
            });
        }
        let slots = set.keys.len();
        let d = params.dims;
        let fits = set.rows.values() == slots * d
            && set.norms.len() == slots
            && (lsns.len(), subs.len(), exact.len()) == (slots, slots, slots)
            && (set.codes.is_empty() || set.codes.len() == slots * d)
            && set.quant.is_some() != set.codes.is_empty()
            && set.quant.as_ref().is_none_or(|q| q.fits(d))
            && set.shard_of.len() == slots
            && set.node_of.len() == slots
            && set
                .shard_of
                .iter()
                .all(|s| (*s as usize) < set.shards.len())
            && set.shards.iter().all(|s| {
                s.members.iter().all(|m| (*m as usize) < slots)
                    && s.graph.as_ref().is_none_or(|g| {
                        g.len() <= s.members.len()
                            && (g.degree, g.list) == (params.degree, params.list)
                    })
            });
        if !fits {
            return Err(bad("a snapshot's parts do not fit together"));
        }
        set.origins = lsns
            .into_iter()
            .zip(subs)
            .zip(exact)
            .map(|((lsn, sub), e)| Origin {
                lsn,
                sub,
                exact: e == 1,
            })
            .collect();
        for slot in 0..set.keys.len() {
            let Some(k) = &set.keys[slot] else { continue };
            if set.slot(k).is_some() {
                return Err(bad("a snapshot holds a key in two slots"));
            }
            set.key_bytes += k.len();
            set.list(slot as u32);
        }
        set.spill_linked();
        Ok(set)
    }

    /// The slot holding `key`'s vector and the document version it came from.
    pub fn origin_of(&self, key: &[u8]) -> Option<(u32, Origin)> {
        let slot = self.slot(key)?;
        Some((slot, self.origins[slot as usize]))
    }

    /// Slots so far (live and dead): the size of a `seen` bit set for [`VectorSet::drop_unseen`].
    pub fn slots(&self) -> usize {
        self.keys.len()
    }

    /// Removes the live vectors of the first `upto` slots (the snapshot's; slots appended
    /// since hold documents just read) whose bit in `seen` is clear: their documents are
    /// gone. Returns how many.
    pub fn drop_unseen(&mut self, seen: &[u64], upto: usize) -> usize {
        let upto = upto.min(self.keys.len()).min(seen.len() * 64);
        let gone: Vec<(Box<[u8]>, Vec<u8>)> = (0..upto)
            .filter(|&s| seen[s / 64] >> (s % 64) & 1 == 0)
            .filter_map(|s| {
                let key = self.keys[s].clone()?;
                let shard = self.shards[self.shard_of[s] as usize].value.clone();
                Some((key, shard))
            })
            .collect();
        for (key, shard) in &gone {
            self.set(key, None, shard, Origin::default());
        }
        gone.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Distance, IndexKind, Params, SearchOpts, VectorSet};
    use super::*;

    /// A linked set with tombstones written and read back answers as it did; a file cut
    /// short, changed by a byte, or written for other parameters is refused.
    #[test]
    fn a_set_reads_back_as_it_was_written() {
        let params = Params {
            kind: IndexKind::DiskAnn,
            dims: 6,
            metric: Distance::Cosine,
            list: 30,
            degree: 8,
        };
        let mut set = VectorSet::new(params);
        let row = |i: u32| -> Vec<f32> {
            (0..6)
                .map(|d| ((i * 7 + d * 13) % 23) as f32 - 11.0)
                .collect()
        };
        for i in 0..1500u32 {
            let origin = Origin {
                lsn: u64::from(i),
                sub: 0,
                exact: true,
            };
            set.set(&i.to_be_bytes(), Some(&row(i)), b"", origin);
        }
        for i in (0..1500u32).step_by(7) {
            set.set(&i.to_be_bytes(), None, b"", Origin::default());
        }
        set.link_all();
        let mut w = Writer::new(Vec::new());
        set.write(&mut w).unwrap();
        let file = w.finish().unwrap();
        let read = |bytes: &[u8], p: Params| {
            let mut r = Reader::new(bytes, bytes.len() as u64);
            let s = VectorSet::read(&mut r, p, None)?;
            r.finish().map(|_| s)
        };
        let back = read(&file, params).expect("reads back");
        assert_eq!(
            (back.len(), back.dead(), back.unlinked()),
            (set.len(), set.dead(), 0)
        );
        assert_eq!(
            back.origin_of(&8u32.to_be_bytes()).map(|o| o.1.lsn),
            Some(8)
        );
        let opts = SearchOpts {
            brute_force: false,
            rerank: 5,
            list: 20,
        };
        let all: (&[u8], &[u8]) = (&[], &[0xff; 5]);
        for q in [row(3), row(500), row(1234)] {
            let keys = |s: &VectorSet| -> Vec<Box<[u8]>> {
                s.search(&q, None, 10, all, None, opts)
                    .keys
                    .into_iter()
                    .map(|h| h.key)
                    .collect()
            };
            assert_eq!(keys(&back), keys(&set));
        }
        assert!(read(&file[..file.len() - 9], params).is_err(), "cut short");
        let mut flipped = file.clone();
        flipped[file.len() / 2] ^= 1;
        assert!(read(&flipped, params).is_err(), "a byte changed");
        assert!(
            read(
                &file,
                Params {
                    degree: 16,
                    ..params
                }
            )
            .is_err(),
            "other parameters"
        );
        // Reconciling: a slot not seen is dropped.
        let mut back = back;
        let mut seen = vec![u64::MAX; back.slots().div_ceil(64)];
        let (slot, _) = back.origin_of(&1u32.to_be_bytes()).unwrap();
        seen[slot as usize / 64] &= !(1 << (slot % 64));
        let upto = back.slots();
        assert_eq!(back.drop_unseen(&seen, upto), 1);
        assert!(back.origin_of(&1u32.to_be_bytes()).is_none());
    }
}
