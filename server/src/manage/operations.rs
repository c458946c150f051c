//! Long-running topology operations (a split or merge asked for by id) and their state
//! machine: `Preparing` (the old ranges serve), `Swapping` (they answer 410/1007), then
//! `Succeeded` (the new ranges serve) or `Failed`. An `automatic` operation moves on by itself,
//! holding `Swapping` for its `lockDurationMs`; a `manual` one moves one phase per
//! `POST /operations/{id}/advance`, so a test can look at each phase without racing it.

use crate::store::container::reshape::CutAt;
use crate::store::container::split::Cut;
use crate::store::container::Container;
use crate::store::Store;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Terminal records kept before the oldest are dropped.
const KEEP_TERMINAL: usize = 1_000;
/// The most operations running at once: each holds its container, and a manual one waits for
/// its advances indefinitely.
pub const MAX_RUNNING: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Status {
    Running,
    Succeeded,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    Preparing,
    Swapping,
    Succeeded,
    Failed,
}

/// What an operation changes.
#[derive(Clone)]
pub enum Change {
    Split {
        parent: u32,
        /// The mode as asked (`midpoint`, `epk`, `storage`), echoed in the result.
        mode: &'static str,
        cut: Cut,
    },
    Merge {
        ids: [u32; 2],
    },
}

/// One operation on one container.
#[derive(Clone)]
pub struct Operation {
    pub container: Arc<Container>,
    pub change: Change,
}

impl Operation {
    /// The ranges this operation replaces.
    fn sources(&self) -> Vec<u32> {
        match &self.change {
            Change::Split { parent, .. } => vec![*parent],
            Change::Merge { ids } => ids.to_vec(),
        }
    }

    /// Applies the change: the new ranges replace the old ones. Returns the result fields.
    async fn apply(&self, store: &Store) -> Result<Value, String> {
        let c = &self.container;
        match &self.change {
            Change::Split { parent, mode, cut } => {
                let (l, r) = store
                    .split_range(c, *parent, cut)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(
                    json!({"database": c.db, "container": c.id, "parent": parent,
                    "children": [l, r], "mode": mode, "splitEpk": cut.at}),
                )
            }
            Change::Merge { ids } => {
                let into = store
                    .merge_ranges(c, ids[0], ids[1])
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({"merged": ids, "into": into}))
            }
        }
    }
}

struct Record {
    status: Status,
    phase: Phase,
    result: Option<Value>,
    error: Option<String>,
    /// The operation while a manual one waits to be advanced.
    manual: Option<Operation>,
}

impl Record {
    fn view(&self, id: &str) -> Value {
        let mut v = json!({"operationId": id, "status": self.status, "phase": self.phase});
        if let (Some(Value::Object(fields)), Some(out)) = (&self.result, v.as_object_mut()) {
            out.extend(fields.clone());
        }
        if let (Some(e), Some(out)) = (&self.error, v.as_object_mut()) {
            out.insert("error".into(), e.clone().into());
        }
        v
    }

    fn terminal(&self) -> bool {
        matches!(self.status, Status::Succeeded | Status::Failed)
    }
}

/// Why an operation cannot be advanced.
#[derive(Debug)]
pub enum AdvanceError {
    NotFound(String),
    Conflict(String),
}

/// Every operation started through this management endpoint.
#[derive(Default)]
pub struct Registry {
    next: AtomicU64,
    records: Mutex<HashMap<String, Record>>,
}

impl Registry {
    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `op` in `Preparing` and, when `automatic`, runs it to its end in the
    /// background, holding `Swapping` for `hold`. Returns the operation's view.
    pub fn start(
        self: &Arc<Self>,
        store: &Store,
        kind: &str,
        op: Operation,
        automatic: Option<Duration>,
    ) -> Result<Value, String> {
        let id = format!(
            "op-{kind}-{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        );
        let record = Record {
            status: Status::Running,
            phase: Phase::Preparing,
            result: None,
            error: None,
            manual: automatic.is_none().then(|| op.clone()),
        };
        let view = record.view(&id);
        {
            let mut records = self.records();
            if records.len() >= KEEP_TERMINAL {
                records.retain(|_, r| !r.terminal());
            }
            if records.len() >= MAX_RUNNING {
                return Err(format!(
                    "{MAX_RUNNING} operations are running; finish or advance some first"
                ));
            }
            records.insert(id.clone(), record);
        }
        if let Some(hold) = automatic {
            let (this, store) = (Arc::clone(self), store.clone());
            tokio::spawn(async move {
                this.swap(&id, &op);
                if !hold.is_zero() {
                    tokio::time::sleep(hold).await;
                }
                this.finish(&store, &id, &op).await;
            });
        }
        Ok(view)
    }

    /// The operation's view; `None` if there is none by that id.
    pub fn get(&self, id: &str) -> Option<Value> {
        self.records().get(id).map(|r| r.view(id))
    }

    /// Moves a manual operation one phase on: `Preparing` → `Swapping` at once; `Swapping` →
    /// its end in the background (the view returned is the one before).
    pub fn advance(self: &Arc<Self>, store: &Store, id: &str) -> Result<Value, AdvanceError> {
        let (op, view) = {
            let mut records = self.records();
            let r = records.get_mut(id).ok_or_else(|| {
                AdvanceError::NotFound(format!("operation '{id}' does not exist"))
            })?;
            if r.terminal() {
                return Err(AdvanceError::Conflict(format!(
                    "operation '{id}' is already terminal"
                )));
            }
            let Some(op) = r.manual.clone() else {
                return Err(AdvanceError::Conflict(format!(
                    "operation '{id}' is automatic or already advancing"
                )));
            };
            if r.phase == Phase::Preparing {
                r.phase = Phase::Swapping;
                op.container.set_swapping(&op.sources(), true);
                return Ok(r.view(id));
            }
            r.manual = None;
            (op, r.view(id))
        };
        let (this, store, id) = (Arc::clone(self), store.clone(), id.to_string());
        tokio::spawn(async move { this.finish(&store, &id, &op).await });
        Ok(view)
    }

    fn swap(&self, id: &str, op: &Operation) {
        op.container.set_swapping(&op.sources(), true);
        if let Some(r) = self.records().get_mut(id) {
            r.phase = Phase::Swapping;
        }
    }

    async fn finish(&self, store: &Store, id: &str, op: &Operation) {
        let outcome = op.apply(store).await;
        op.container.set_swapping(&op.sources(), false);
        if let Some(r) = self.records().get_mut(id) {
            match outcome {
                Ok(result) => {
                    (r.status, r.phase, r.result) =
                        (Status::Succeeded, Phase::Succeeded, Some(result))
                }
                Err(e) => (r.status, r.phase, r.error) = (Status::Failed, Phase::Failed, Some(e)),
            }
        }
    }
}

/// The name a split mode is asked for by, and where it cuts.
pub fn split_mode(mode: &str, epk: Option<&str>) -> Result<(&'static str, CutAt), String> {
    match (mode, epk) {
        ("midpoint", None) => Ok(("midpoint", CutAt::Midpoint)),
        ("storage", None) => Ok(("storage", CutAt::Storage)),
        ("epk", Some(e)) => {
            if e.is_empty() || e.len() % 2 != 0 || !e.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("epk must be a non-empty, even-length hexadecimal string".into());
            }
            Ok(("epk", CutAt::Epk(e.to_string())))
        }
        ("epk", None) => Err("epk is required when mode is 'epk'".into()),
        ("midpoint" | "storage", Some(_)) => Err("epk is accepted only when mode is 'epk'".into()),
        (other, _) => Err(format!(
            "mode '{other}' is not one of midpoint, epk, storage"
        )),
    }
}
