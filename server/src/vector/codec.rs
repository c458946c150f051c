//! A small binary format for vector-set snapshots: little-endian numbers and length-prefixed
//! arrays, streamed through a buffer (a million 128-dimension rows are half a gigabyte; the
//! file is never held whole in memory), hashed as it goes and closed by the hash, so a torn
//! or foreign file is refused rather than misread. A snapshot is a cache of what the
//! documents say; a file refused costs a rebuild, never an answer.

use std::io::{self, BufReader, BufWriter, Read, Write};
use xxhash_rust::xxh3::Xxh3;

/// Elements converted per read or write of a large array.
const CHUNK: usize = 16 * 1024;

/// Writes values, hashing every byte.
pub struct Writer<W: Write> {
    out: BufWriter<W>,
    hash: Xxh3,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Self {
            out: BufWriter::with_capacity(1 << 20, out),
            hash: Xxh3::new(),
        }
    }

    fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.hash.update(b);
        self.out.write_all(b)
    }

    pub fn u64(&mut self, v: u64) -> io::Result<()> {
        self.raw(&v.to_le_bytes())
    }

    pub fn u32(&mut self, v: u32) -> io::Result<()> {
        self.raw(&v.to_le_bytes())
    }

    pub fn f32(&mut self, v: f32) -> io::Result<()> {
        self.raw(&v.to_le_bytes())
    }

    pub fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.u64(b.len() as u64)?;
        self.raw(b)
    }

    /// An array of fixed-size values, each as `put` encodes it into `buf`.
    fn array<T: Copy, const N: usize>(&mut self, v: &[T], put: fn(T) -> [u8; N]) -> io::Result<()> {
        self.u64(v.len() as u64)?;
        let mut buf = Vec::with_capacity(CHUNK * N);
        for chunk in v.chunks(CHUNK) {
            buf.clear();
            chunk.iter().for_each(|x| buf.extend_from_slice(&put(*x)));
            self.raw(&buf)?;
        }
        Ok(())
    }

    pub fn f32s(&mut self, v: &[f32]) -> io::Result<()> {
        self.array(v, f32::to_le_bytes)
    }

    /// An `f32` array of `len` values given in runs by `each` (rows read from a file):
    /// written as [`Writer::f32s`] writes it.
    pub fn f32s_in_runs(
        &mut self,
        len: usize,
        each: impl FnOnce(&mut dyn FnMut(&[f32])),
    ) -> io::Result<()> {
        self.u64(len as u64)?;
        let (mut written, mut failed) = (0usize, None);
        let mut buf = Vec::with_capacity(CHUNK * 4);
        each(&mut |run: &[f32]| {
            if failed.is_some() {
                return;
            }
            for chunk in run.chunks(CHUNK) {
                buf.clear();
                chunk
                    .iter()
                    .for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
                if let Err(e) = self.raw(&buf) {
                    failed = Some(e);
                    return;
                }
            }
            written += run.len();
        });
        match failed {
            Some(e) => Err(e),
            None if written != len => Err(io::Error::other("rows changed while written")),
            None => Ok(()),
        }
    }

    pub fn u32s(&mut self, v: &[u32]) -> io::Result<()> {
        self.array(v, u32::to_le_bytes)
    }

    pub fn u64s(&mut self, v: &[u64]) -> io::Result<()> {
        self.array(v, u64::to_le_bytes)
    }

    pub fn u16s(&mut self, v: &[u16]) -> io::Result<()> {
        self.array(v, u16::to_le_bytes)
    }

    pub fn i8s(&mut self, v: &[i8]) -> io::Result<()> {
        self.array(v, i8::to_le_bytes)
    }

    /// Closes the stream with the hash of everything written.
    pub fn finish(mut self) -> io::Result<W> {
        let h = self.hash.digest();
        self.out.write_all(&h.to_le_bytes())?;
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

/// Reads what a [`Writer`] wrote; every length is checked against `limit` bytes before
/// anything is allocated.
pub struct Reader<R: Read> {
    input: BufReader<R>,
    hash: Xxh3,
    /// Bytes the file may still hold (its length): no array claims more.
    left: u64,
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl<R: Read> Reader<R> {
    pub fn new(input: R, len: u64) -> Self {
        Self {
            input: BufReader::with_capacity(1 << 20, input),
            hash: Xxh3::new(),
            left: len.saturating_sub(8),
        }
    }

    fn raw(&mut self, b: &mut [u8]) -> io::Result<()> {
        if b.len() as u64 > self.left {
            return Err(bad("a snapshot ends early"));
        }
        self.input.read_exact(b)?;
        self.left -= b.len() as u64;
        self.hash.update(b);
        Ok(())
    }

    pub fn u64(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.raw(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.raw(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn f32(&mut self) -> io::Result<f32> {
        let mut b = [0u8; 4];
        self.raw(&mut b)?;
        Ok(f32::from_le_bytes(b))
    }

    /// A length that `size`-byte elements can fill within the file.
    fn len(&mut self, size: u64) -> io::Result<usize> {
        let n = self.u64()?;
        if n.saturating_mul(size) > self.left {
            return Err(bad("a snapshot array is longer than the file"));
        }
        usize::try_from(n).map_err(|_| bad("a snapshot array is too long"))
    }

    pub fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.len(1)?;
        let mut v = vec![0u8; n];
        self.raw(&mut v)?;
        Ok(v)
    }

    fn array<T, const N: usize>(&mut self, get: fn([u8; N]) -> T) -> io::Result<Vec<T>> {
        let n = self.len(N as u64)?;
        let mut out = Vec::with_capacity(n);
        let mut buf = vec![0u8; CHUNK * N];
        while out.len() < n {
            let take = (n - out.len()).min(CHUNK);
            let b = &mut buf[..take * N];
            self.raw(b)?;
            out.extend(b.chunks_exact(N).map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                get(a)
            }));
        }
        Ok(out)
    }

    pub fn f32s(&mut self) -> io::Result<Vec<f32>> {
        self.array(f32::from_le_bytes)
    }

    /// What [`Writer::f32s`] wrote, handed to `f` in runs of whole rows of `dims` values
    /// (refused unless the array is whole rows); the number of values.
    pub fn f32s_in_rows(&mut self, dims: usize, mut f: impl FnMut(&[f32])) -> io::Result<usize> {
        let n = self.len(4)?;
        let dims = dims.max(1);
        if !n.is_multiple_of(dims) {
            return Err(bad("a snapshot's rows are not whole"));
        }
        let per = (CHUNK / dims).max(1) * dims;
        let (mut bytes, mut vals) = (vec![0u8; per * 4], Vec::with_capacity(per));
        let mut done = 0;
        while done < n {
            let take = (n - done).min(per);
            let b = &mut bytes[..take * 4];
            self.raw(b)?;
            vals.clear();
            vals.extend(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            f(&vals);
            done += take;
        }
        Ok(n)
    }

    pub fn u32s(&mut self) -> io::Result<Vec<u32>> {
        self.array(u32::from_le_bytes)
    }

    pub fn u64s(&mut self) -> io::Result<Vec<u64>> {
        self.array(u64::from_le_bytes)
    }

    pub fn u16s(&mut self) -> io::Result<Vec<u16>> {
        self.array(u16::from_le_bytes)
    }

    pub fn i8s(&mut self) -> io::Result<Vec<i8>> {
        self.array(i8::from_le_bytes)
    }

    /// Checks the closing hash: the file is whole and nothing follows it.
    pub fn finish(mut self) -> io::Result<()> {
        if self.left != 0 {
            return Err(bad("a snapshot has bytes left over"));
        }
        let mut b = [0u8; 8];
        self.input.read_exact(&mut b)?;
        if u64::from_le_bytes(b) != self.hash.digest() {
            return Err(bad("a snapshot's hash does not match"));
        }
        Ok(())
    }
}
