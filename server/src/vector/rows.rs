//! A set's `f32` rows: in memory, or — for the kinds that search over codes — in a file of
//! their own, as DiskANN keeps its full-precision vectors on disk and only the compressed
//! ones in memory. A graph search reads codes; rows are read only to re-rank the few
//! candidates a search keeps, to score its hits, and to link a new node, so at a million
//! 128-dimension vectors half a gigabyte of rows leaves the heap (the file's pages stay in
//! the page cache while there is room, where the kernel can take them back).
//!
//! Rows stay in memory within a budget shared by the process's sets ([`Budget`], the
//! `--vector-rows-memory-bytes` flag): past it, a set writes its oldest rows to the file, a
//! chunk at a time, as its set lets them go ([`Rows::spill_before`]: a graph's rows once
//! linked — a search scans the rows not linked yet exactly, and linking reads the new node's
//! row). So an index that fits keeps the speed of rows in memory (reading a 768-dimension
//! row back costs more than measuring it), and one past the budget costs no more memory.
//! Rows stay in memory if the file cannot take them: a full disk costs memory, not rows.
//!
//! The file is opened and unlinked at once: nothing is left behind by a crash, and the rows
//! are a cache of the documents' vectors like the rest of the set (a restart reads them from
//! the set's snapshot, or the documents).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Rows appended to the file at a time.
const CHUNK_ROWS: usize = 1024;

/// Default of [`Budget`]'s limit (`--vector-rows-memory-bytes`).
pub const DEFAULT_BUDGET: usize = 256 << 20;

/// The bytes of rows a process's sets keep in memory before they write their oldest to their
/// files, and the bytes they keep now.
#[derive(Debug, Default)]
pub struct Budget {
    limit: usize,
    held: AtomicUsize,
}

impl Budget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            held: AtomicUsize::new(0),
        })
    }

    fn over(&self) -> bool {
        self.held.load(Ordering::Relaxed) > self.limit
    }
}

/// Where sets that search over codes may keep rows: a folder for their files, and the budget
/// of rows they keep in memory.
#[derive(Debug, Clone)]
pub struct Place {
    pub dir: PathBuf,
    pub budget: Arc<Budget>,
}

/// The rows (see the module's doc).
#[derive(Debug)]
pub struct Rows {
    dims: usize,
    /// The budget the rows held in memory count against (with a file).
    budget: Option<Arc<Budget>>,
    /// The file and how many rows it holds (rows `0..on_disk`).
    file: Option<File>,
    on_disk: usize,
    /// Rows `on_disk..`, [`CHUNK_ROWS`] to a chunk (the last one filling): a chunk written
    /// to the file is dropped whole, and growing never copies the rows held.
    held: VecDeque<Vec<f32>>,
}

impl Rows {
    /// Rows of `dims` numbers, held in memory.
    pub fn in_memory(dims: usize) -> Self {
        Self {
            dims,
            budget: None,
            file: None,
            on_disk: 0,
            held: VecDeque::new(),
        }
    }

    /// Rows of `dims` numbers kept in memory within `place`'s budget, and past it in a file
    /// in its folder (in memory if the file cannot be made).
    pub fn in_place(dims: usize, place: &Place) -> Self {
        let dir = place.dir.as_path();
        let mut rows = Self::in_memory(dims);
        rows.budget = Some(Arc::clone(&place.budget));
        let made = std::fs::create_dir_all(dir).and_then(|_| {
            let path = dir.join(format!(
                "rows-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)?;
            std::fs::remove_file(&path)?;
            Ok(file)
        });
        match made {
            Ok(file) => rows.file = Some(file),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "vector rows kept in memory")
            }
        }
        rows
    }

    /// Whether some rows are in the file.
    pub fn spilled(&self) -> bool {
        self.on_disk > 0
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.on_disk + self.held_values() / self.dims.max(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Numbers held (rows × dims).
    pub fn values(&self) -> usize {
        self.len() * self.dims
    }

    /// Bytes of memory the rows take.
    pub fn held_bytes(&self) -> usize {
        self.held.iter().map(|c| c.capacity() * 4).sum::<usize>()
            + self.held.capacity() * std::mem::size_of::<Vec<f32>>()
    }

    /// Numbers held in memory.
    fn held_values(&self) -> usize {
        match (self.held.len(), self.held.back()) {
            (n, Some(last)) => (n - 1) * CHUNK_ROWS * self.dims + last.len(),
            _ => 0,
        }
    }

    /// Appends a row (held in memory until [`Rows::spill_before`] lets it go).
    pub fn push(&mut self, row: &[f32]) {
        let full = CHUNK_ROWS * self.dims;
        if self.held.back().is_none_or(|c| c.len() + row.len() > full) {
            self.held.push_back(Vec::new());
        }
        if let Some(last) = self.held.back_mut() {
            if last.capacity() < last.len() + row.len() {
                // Doubled up to a chunk: a small set holds little room.
                let want = (last.len() * 2).max(row.len()).min(full);
                last.reserve_exact(want - last.len());
            }
            last.extend_from_slice(row);
        }
        if let Some(b) = &self.budget {
            b.held.fetch_add(row.len() * 4, Ordering::Relaxed);
        }
    }

    /// Writes the rows before `slot` to the file, whole chunks at a time, and drops them from
    /// memory (they stay in memory if the file cannot take them).
    pub fn spill_before(&mut self, slot: usize) {
        let d = self.dims.max(1);
        let over = || self.budget.as_ref().is_some_and(|b| b.over());
        while self.file.is_some() && self.on_disk + CHUNK_ROWS <= slot.min(self.len()) && over() {
            let Some(run) = self.held.front() else {
                return;
            };
            let bytes: Vec<u8> = run.iter().flat_map(|x| x.to_le_bytes()).collect();
            let at = (self.on_disk * d * 4) as u64;
            if let Some(Err(e)) = self.file.as_ref().map(|f| f.write_all_at(&bytes, at)) {
                tracing::warn!(error = %e, "vector rows kept in memory from here on");
                self.file = None;
                return;
            }
            self.on_disk += CHUNK_ROWS;
            self.held.pop_front();
            if let Some(b) = &self.budget {
                b.held.fetch_sub(CHUNK_ROWS * d * 4, Ordering::Relaxed);
            }
        }
    }

    /// Fetches row `slot` into the cache if it is in memory (a search measures rows one
    /// after another, and waits on memory more than it computes).
    pub fn prefetch(&self, slot: u32) {
        let Some(at) = (slot as usize).checked_sub(self.on_disk) else {
            return;
        };
        let Some(chunk) = self.held.get(at / CHUNK_ROWS) else {
            return;
        };
        let at = (at % CHUNK_ROWS) * self.dims;
        if at + self.dims > chunk.len() {
            return;
        }
        // Sixteen `f32` to a cache line.
        (at..at + self.dims)
            .step_by(16)
            .for_each(|i| prefetch_index::prefetch_index(chunk, i));
    }

    /// Row `slot` (its numbers; zeros if the file cannot be read, which is logged).
    pub fn row(&self, slot: u32) -> Cow<'_, [f32]> {
        let (d, slot) = (self.dims, slot as usize);
        if slot >= self.on_disk {
            let i = slot - self.on_disk;
            let at = (i % CHUNK_ROWS) * d;
            return Cow::Borrowed(&self.held[i / CHUNK_ROWS][at..at + d]);
        }
        let mut out = vec![0f32; d];
        self.read_into(slot, &mut out);
        Cow::Owned(out)
    }

    /// Reads rows `slot..` from the file into `out` (a whole number of rows).
    fn read_into(&self, slot: usize, out: &mut [f32]) {
        let Some(file) = &self.file else {
            return;
        };
        let mut bytes = vec![0u8; out.len() * 4];
        match file.read_exact_at(&mut bytes, (slot * self.dims * 4) as u64) {
            Ok(()) => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            Err(e) => tracing::error!(error = %e, "vector rows unreadable"),
        }
    }

    /// Calls `f` with rows `from..`, in order, a run of whole rows at a time.
    pub fn each_from(&self, from: usize, mut f: impl FnMut(&[f32])) {
        let d = self.dims.max(1);
        let mut buf = vec![0f32; CHUNK_ROWS * d];
        let mut at = from;
        while at < self.on_disk {
            let n = (self.on_disk - at).min(CHUNK_ROWS);
            self.read_into(at, &mut buf[..n * d]);
            f(&buf[..n * d]);
            at += n;
        }
        let i = at.saturating_sub(self.on_disk);
        for (n, chunk) in self.held.iter().enumerate().skip(i / CHUNK_ROWS) {
            let from = if n == i / CHUNK_ROWS {
                (i % CHUNK_ROWS) * d
            } else {
                0
            };
            if from < chunk.len() {
                f(&chunk[from..]);
            }
        }
    }
}

impl Drop for Rows {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.held.fetch_sub(self.held_values() * 4, Ordering::Relaxed);
        }
    }
}

/// Numbers the files a process makes.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows read back the same from memory and from the file, one at a time and in runs,
    /// across the chunks that went to the file and those still held.
    #[test]
    fn rows_read_back_as_written_from_memory_and_file() {
        let dir = std::env::temp_dir().join(format!("strata-rows-test-{}", std::process::id()));
        let dims = 3;
        let n = CHUNK_ROWS * 2 + 17;
        let row = |i: usize| [i as f32, -(i as f32), 0.5 + i as f32];
        let budget = Budget::new(0);
        let place = Place {
            dir: dir.clone(),
            budget: Arc::clone(&budget),
        };
        for mut rows in [Rows::in_memory(dims), Rows::in_place(dims, &place)] {
            for i in 0..n {
                rows.push(&row(i));
                if i % 100 == 0 {
                    rows.spill_before(i.saturating_sub(500));
                }
            }
            rows.spill_before(n - 10);
            assert_eq!(rows.len(), n);
            if rows.file.is_some() {
                assert_eq!(rows.on_disk, CHUNK_ROWS * 2, "two chunks spilled");
                assert_eq!(rows.held_values(), 17 * dims, "the rest in memory");
            }
            for i in [0, 1, CHUNK_ROWS - 1, CHUNK_ROWS, n - 18, n - 17, n - 1] {
                assert_eq!(&*rows.row(i as u32), &row(i), "row {i}");
            }
            for from in [0, 5, CHUNK_ROWS * 2, n - 1] {
                let mut all = Vec::new();
                rows.each_from(from, |r| all.extend_from_slice(r));
                let want: Vec<f32> = (from..n).flat_map(row).collect();
                assert_eq!(all, want, "from {from}");
            }
        }
        assert_eq!(
            budget.held.load(Ordering::Relaxed),
            0,
            "given back when dropped"
        );
        // The file is unlinked as soon as it is made: nothing is left in the folder.
        let left = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Within the budget nothing goes to the file; past it, the oldest rows do, until the
    /// rows held are back within it (a chunk at a time).
    #[test]
    fn rows_stay_in_memory_within_the_budget() {
        let dir = std::env::temp_dir().join(format!("strata-rows-budget-{}", std::process::id()));
        let dims = 4;
        let chunk = CHUNK_ROWS * dims * 4;
        let place = Place {
            dir: dir.clone(),
            budget: Budget::new(3 * chunk),
        };
        let mut rows = Rows::in_place(dims, &place);
        for i in 0..3 * CHUNK_ROWS {
            rows.push(&[i as f32; 4]);
            rows.spill_before(rows.len());
        }
        assert_eq!(rows.on_disk, 0, "at the budget, not past it");
        let mut other = Rows::in_place(dims, &place);
        for i in 0..2 * CHUNK_ROWS + 5 {
            other.push(&[i as f32; 4]);
        }
        // Past the budget: the set that lets rows go writes its oldest, back to the budget.
        rows.spill_before(rows.len());
        assert_eq!(rows.on_disk, 3 * CHUNK_ROWS, "{}", rows.on_disk);
        assert!(!place.budget.over());
        assert_eq!(&*rows.row(5), &[5.0; 4]);
        assert_eq!(
            &*rows.row(3 * CHUNK_ROWS as u32 - 1),
            &[(3 * CHUNK_ROWS - 1) as f32; 4]
        );
        drop((rows, other));
        assert_eq!(place.budget.held.load(Ordering::Relaxed), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
