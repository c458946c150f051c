//! Where a copy stands, in one file: which copy it belongs to (the accounts by endpoint —
//! never a key — and the containers) and the position of every source feed range, written
//! whole after every page through a temporary file renamed over the old one (a crash leaves
//! the old or the new). A copy run again with the same file resumes, or after a finished run
//! carries over what changed since; a file of another copy is refused, naming both.

use super::CopySpec;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where one source feed range stands; saved after every page.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RangeState {
    /// Position in the latest-version feed (the snapshot).
    pub snapshot: Option<String>,
    pub snapshot_done: bool,
    /// Position in the all-versions-and-deletes feed, noted before the snapshot began.
    pub history: Option<String>,
    /// The source keeps no history: follow the latest-version feed instead.
    pub no_history: bool,
}

/// Which copy a checkpoint belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Belongs {
    pub from: String,
    pub source: String,
    pub to: String,
    pub dest: String,
}

impl Belongs {
    /// The copy a spec describes (accounts by endpoint, the way the same-container check
    /// compares them; an empty one is the server a job runs on, wherever it listens).
    pub fn of(spec: &CopySpec) -> Self {
        let to = spec.to.as_deref().filter(|t| !t.trim().is_empty());
        Self {
            from: super::account(&spec.from),
            source: spec.source.clone(),
            to: super::account(to.unwrap_or(&spec.from)),
            dest: spec.dest.clone(),
        }
    }

    fn describe(&self) -> String {
        let at = |a: &str| match a {
            "" => String::new(),
            a => format!(" at {a}"),
        };
        format!(
            "{}{} into {}{}",
            self.source,
            at(&self.from),
            self.dest,
            at(&self.to)
        )
    }
}

#[derive(Serialize, Deserialize)]
struct Saved {
    copy: Belongs,
    /// The last run ended verified: a new run carries over what changed since.
    #[serde(default)]
    finished: bool,
    ranges: HashMap<String, RangeState>,
}

/// A copy's checkpoint file, open.
pub struct Checkpoint {
    path: PathBuf,
    copy: Belongs,
    finished: bool,
    ranges: Mutex<HashMap<String, RangeState>>,
}

impl Checkpoint {
    /// The file a command-line copy uses when none is named: one per pair of containers, in
    /// the current folder, so a second copy elsewhere does not pick up the first one's.
    pub fn default_path(spec: &CopySpec) -> PathBuf {
        let name = |s: &str| -> String {
            s.chars()
                .map(|c| match c {
                    'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
                    _ => '.',
                })
                .collect()
        };
        PathBuf::from(format!(
            "strata-copy.{}--{}.checkpoint.json",
            name(&spec.source),
            name(&spec.dest)
        ))
    }

    /// Opens the checkpoint at `path` for `copy`: empty when there is none; an error naming
    /// the file and the copy it belongs to when that is another one.
    pub fn open(path: &Path, copy: Belongs) -> Result<Self, String> {
        let shown = path.display();
        let (ranges, finished) = match std::fs::read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (HashMap::new(), false),
            Err(e) => return Err(format!("cannot read the checkpoint {shown}: {e}")),
            Ok(bytes) => match serde_json::from_slice::<Saved>(&bytes) {
                Ok(saved) if saved.copy == copy => (saved.ranges, saved.finished),
                Ok(saved) => {
                    return Err(format!(
                        "the checkpoint {shown} belongs to the copy of {}, not of {}: name another file with --checkpoint, or delete it to start this copy from the beginning",
                        saved.copy.describe(),
                        copy.describe()
                    ))
                }
                // Written by strata before checkpoints named their copy (server-side jobs
                // keep one file per job, so theirs is always their own).
                Err(_) => match serde_json::from_slice::<HashMap<String, RangeState>>(&bytes) {
                    Ok(ranges) => (ranges, false),
                    Err(e) => {
                        return Err(format!(
                            "{shown} is not a copy checkpoint ({e}): name another file with --checkpoint, or delete it"
                        ))
                    }
                },
            },
        };
        Ok(Self {
            path: path.to_path_buf(),
            copy,
            finished,
            ranges: Mutex::new(ranges),
        })
    }

    /// How this run starts: fresh, resuming an interrupted run, or after a finished one.
    pub fn start(&self) -> &'static str {
        match (
            self.ranges.lock().map_or(true, |r| r.is_empty()),
            self.finished,
        ) {
            (true, _) => "",
            (false, false) => " (resumed)",
            (false, true) => " (after a finished copy: only what changed since)",
        }
    }

    pub fn state(&self, key: &str) -> Result<RangeState, String> {
        let c = self.ranges.lock().map_err(|e| e.to_string())?;
        Ok(c.get(key).cloned().unwrap_or_default())
    }

    /// Whether a range found the source without history.
    pub fn no_history(&self) -> bool {
        self.ranges
            .lock()
            .map(|c| c.values().any(|s| s.no_history))
            .unwrap_or(false)
    }

    /// Saves one range's state.
    pub fn save(&self, key: &str, st: &RangeState) -> Result<(), String> {
        let mut c = self.ranges.lock().map_err(|e| e.to_string())?;
        c.insert(key.to_string(), st.clone());
        self.write(&c, false)
    }

    /// Marks the copy finished (verified): the next run carries over what changed since.
    pub fn finish(&self) -> Result<(), String> {
        let c = self.ranges.lock().map_err(|e| e.to_string())?;
        self.write(&c, true)
    }

    fn write(&self, ranges: &HashMap<String, RangeState>, finished: bool) -> Result<(), String> {
        let saved = Saved {
            copy: self.copy.clone(),
            finished,
            ranges: ranges.clone(),
        };
        let tmp = self.path.with_extension("tmp");
        let bytes = serde_json::to_vec(&saved).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, bytes)
            .and_then(|_| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("cannot save the checkpoint {}: {e}", self.path.display()))
    }
}
