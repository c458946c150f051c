//! Server-side copy jobs (`/_strata/jobs`): the same engine as `strata copy`
//! ([`super::copy::run`]) run by the server itself, so the explorer and scripts can start a
//! copy without keeping a client process alive.
//!
//! The job talks the Cosmos protocol to this very server (or to the accounts named in `from`
//! and `to`), exactly as the command line does. Each job keeps two files in `<data>/jobs/`:
//! its record (`<id>.json`: what to copy, state, summary) and its checkpoint
//! (`<id>.checkpoint.json`: positions per source feed range). A job still running when the
//! server stops — cleanly or by a crash — is started again when the server starts, and
//! resumes from its checkpoint. In memory (`--in-memory`) jobs live as long as the process,
//! like the data they copy.

use super::copy::{self, CopySpec};
use super::progress::Progress;
use super::sealed::Sealer;
use super::{redact, scrub};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Running,
    Succeeded,
    Failed,
}

/// A job's durable record.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    id: String,
    spec: CopySpec,
    state: State,
    created: u64,
    #[serde(default)]
    finished: Option<u64>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

struct Job {
    record: Record,
    progress: Arc<Mutex<Progress>>,
    task: Option<tokio::task::AbortHandle>,
}

impl Job {
    /// A job not (yet) running, its progress kept quietly for the API.
    fn new(record: Record) -> Self {
        Self {
            record,
            progress: Arc::new(Mutex::new(Progress::quiet("copied"))),
            task: None,
        }
    }
}

/// The jobs of a server: one cheap handle.
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

struct Inner {
    /// `<data>/jobs`, or a folder of this process's own in memory.
    dir: PathBuf,
    durable: bool,
    /// This server as a connection string, once it listens.
    this_server: OnceLock<String>,
    /// Seals the account keys in records on disk.
    sealer: Sealer,
    jobs: Mutex<BTreeMap<String, Job>>,
}

/// Why a job request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    BadRequest(String),
    NotFound(String),
    Conflict(String),
    Internal(String),
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Jobs {
    /// Jobs kept in `<data_dir>/jobs` (or in memory without a data folder).
    pub fn open(data_dir: Option<&std::path::Path>, sealer: Sealer) -> std::io::Result<Self> {
        let (dir, durable) = match data_dir {
            Some(d) => (d.join("jobs"), true),
            None => {
                // One folder per server, also for several servers in one process (tests).
                static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let name = format!("strata-jobs-{}-{n}", std::process::id());
                (std::env::temp_dir().join(name), false)
            }
        };
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            inner: Arc::new(Inner {
                dir,
                durable,
                this_server: OnceLock::new(),
                sealer,
                jobs: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    /// Called once the server listens: jobs may now reach it, and jobs a stop or crash
    /// interrupted start again from their checkpoints.
    pub fn start(&self, endpoint: &str, key: &str) {
        let _ = self
            .inner
            .this_server
            .set(format!("AccountEndpoint={endpoint};AccountKey={key};"));
        if !self.inner.durable {
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.inner.dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.ends_with(".json") || name.ends_with(".checkpoint.json") {
                continue;
            }
            let Some(mut rec) = std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
            else {
                tracing::warn!(file = %e.path().display(), "a copy job record is unreadable; skipped");
                continue;
            };
            if let Err(why) = self.open_keys(&mut rec.spec) {
                tracing::warn!(job = %rec.id, "a copy job cannot resume: {why}");
                rec.state = State::Failed;
                rec.error = Some(format!("The job cannot resume: {why}."));
            }
            let resume = rec.state == State::Running;
            let id = rec.id.clone();
            if let Ok(mut jobs) = self.inner.jobs.lock() {
                jobs.insert(id.clone(), Job::new(rec));
            }
            if resume {
                tracing::info!(job = %id, "resuming a copy job");
                self.spawn(&id);
            }
        }
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.inner.dir.join(format!("{id}.json"))
    }

    fn checkpoint_path(&self, id: &str) -> PathBuf {
        self.inner.dir.join(format!("{id}.checkpoint.json"))
    }

    /// The spec's connection strings with their keys opened (see [`super::sealed`]).
    fn open_keys(&self, spec: &mut CopySpec) -> Result<(), String> {
        let s = &self.inner.sealer;
        spec.from = s.open(&spec.from)?;
        spec.to = spec.to.as_deref().map(|t| s.open(t)).transpose()?;
        Ok(())
    }

    /// Writes a record durably (temporary file, fsync, rename), its account keys sealed.
    fn save(&self, rec: &Record) -> Result<(), JobError> {
        use std::io::Write;
        let path = self.record_path(&rec.id);
        let tmp = path.with_extension("tmp");
        let s = &self.inner.sealer;
        let mut sealed = rec.clone();
        sealed.spec.from = s.seal(&rec.spec.from).map_err(JobError::Internal)?;
        sealed.spec.to = rec
            .spec
            .to
            .as_deref()
            .map(|t| s.seal(t))
            .transpose()
            .map_err(JobError::Internal)?;
        let bytes =
            serde_json::to_vec_pretty(&sealed).map_err(|e| JobError::Internal(e.to_string()))?;
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| {
            JobError::Internal(format!(
                "cannot save the job record {}: {e}",
                path.display()
            ))
        })
    }

    /// Starts (or restarts) a job: `body` is a [`CopySpec`] in JSON plus an optional `id` and
    /// `kind` (`copy`, the only kind). A job that failed may be started again under its id:
    /// it resumes from its checkpoint.
    pub fn create(&self, mut body: serde_json::Map<String, Value>) -> Result<Value, JobError> {
        let bad = |m: String| JobError::BadRequest(m);
        match body.remove("kind") {
            None => {}
            Some(Value::String(k)) if k == "copy" => {}
            Some(k) => {
                return Err(bad(format!(
                    "Unknown job kind {k}: the only kind is \"copy\"."
                )))
            }
        }
        let id = match body.remove("id") {
            // Random: two jobs started in the same second get different ids.
            None => {
                let mut b = [0u8; 4];
                getrandom::fill(&mut b).map_err(|e| JobError::Internal(e.to_string()))?;
                format!(
                    "copy-{}",
                    b.iter().map(|x| format!("{x:02x}")).collect::<String>()
                )
            }
            Some(Value::String(s)) => s,
            Some(other) => return Err(bad(format!("The job id must be a string, not {other}."))),
        };
        if id.is_empty()
            || id.len() > 64
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad(format!(
                "The job id '{id}' is not valid: use 1 to 64 letters, digits, '-' or '_'."
            )));
        }
        // Paths as a list or comma-separated, as on the command line.
        if let Some(Value::Array(paths)) = body.get("partitionKey") {
            let joined: Option<Vec<&str>> = paths.iter().map(Value::as_str).collect();
            let joined =
                joined.ok_or_else(|| bad("'partitionKey' must list paths as strings.".into()))?;
            body.insert("partitionKey".into(), Value::from(joined.join(",")));
        }
        let spec: CopySpec = serde_json::from_value(Value::Object(body)).map_err(|e| {
            bad(format!(
                "The job is not valid: {e}. Expected {{\"source\": \"DB/CONTAINER\", \"dest\": \"DB/CONTAINER\", \"partitionKey\": [\"/a\", \"/b\"], \"fill\": [\"/b=/id\"], \"follow\": false, \"from\": CONNECTION STRING (default: this server), \"to\": ...}}."
            ))
        })?;
        spec.validate()
            .map_err(|e| bad(format!("The job is not valid: {e}.")))?;
        let mut jobs = self
            .inner
            .jobs
            .lock()
            .map_err(|e| JobError::Internal(e.to_string()))?;
        if let Some(j) = jobs.get(&id) {
            if j.record.state == State::Running {
                return Err(JobError::Conflict(format!(
                    "The copy job '{id}' is running; delete it first or use another id."
                )));
            }
            if j.record.spec != spec {
                return Err(JobError::Conflict(format!(
                    "A copy job '{id}' with other settings exists; delete it first or use another id."
                )));
            }
        }
        let rec = Record {
            id: id.clone(),
            spec,
            state: State::Running,
            created: now_secs(),
            finished: None,
            summary: None,
            error: None,
        };
        self.save(&rec)?;
        jobs.insert(id.clone(), Job::new(rec));
        drop(jobs);
        self.spawn(&id);
        self.get(&id)
    }

    /// Runs job `id` in the background, recording how it ends.
    fn spawn(&self, id: &str) {
        let Some(this_server) = self.inner.this_server.get().cloned() else {
            return;
        };
        let Ok(mut jobs) = self.inner.jobs.lock() else {
            return;
        };
        let Some(job) = jobs.get_mut(id) else { return };
        let mut spec = job.record.spec.clone();
        // The job's own spec names its copy: "this server" whatever its address today.
        let belongs = copy::Belongs::of(&spec);
        if spec.from.is_empty() {
            spec.from = this_server.clone();
        }
        if spec.to.as_deref().is_none_or(str::is_empty) {
            spec.to = Some(this_server);
        }
        let progress = Arc::clone(&job.progress);
        let checkpoint = self.checkpoint_path(id);
        let (me, id) = (self.clone(), id.to_string());
        let task = tokio::spawn(async move {
            let outcome = copy::run(&spec, &checkpoint, belongs, progress).await;
            me.finish(&id, outcome);
        });
        job.task = Some(task.abort_handle());
    }

    fn finish(&self, id: &str, outcome: Result<String, String>) {
        let Ok(mut jobs) = self.inner.jobs.lock() else {
            return;
        };
        let Some(job) = jobs.get_mut(id) else { return };
        let r = &mut job.record;
        r.finished = Some(now_secs());
        // Whatever produced the text, no key of either account leaves the job.
        let conns = [
            r.spec.from.as_str(),
            r.spec.to.as_deref().unwrap_or_default(),
        ];
        match outcome.map_err(|e| scrub(&e, &conns)) {
            Ok(summary) => {
                r.state = State::Succeeded;
                r.summary = Some(scrub(&summary, &conns));
                r.error = None;
            }
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "a copy job failed");
                r.state = State::Failed;
                r.error = Some(e);
            }
        }
        job.task = None;
        let rec = r.clone();
        drop(jobs);
        if let Err(JobError::Internal(e)) = self.save(&rec) {
            tracing::error!(job = %id, error = %e, "cannot record how a copy job ended");
        }
    }

    fn view(job: &Job) -> Value {
        let r = &job.record;
        let progress = job
            .progress
            .lock()
            .map(|p| p.snapshot())
            .unwrap_or(Value::Null);
        json!({
            "id": r.id,
            "kind": "copy",
            "state": r.state,
            "source": r.spec.source,
            "dest": r.spec.dest,
            "from": if r.spec.from.is_empty() { "this server".to_string() } else { redact(&r.spec.from) },
            "to": r.spec.to.as_deref().filter(|t| !t.is_empty()).map(redact).unwrap_or_else(|| "this server".into()),
            "partitionKey": r.spec.partition_key.as_deref().map(|p| p.split(',').map(str::trim).collect::<Vec<_>>()),
            "fill": r.spec.fill,
            "follow": r.spec.follow,
            "created": r.created,
            "finished": r.finished,
            "progress": progress,
            "summary": r.summary,
            "error": r.error,
        })
    }

    /// One job as the API shows it.
    pub fn get(&self, id: &str) -> Result<Value, JobError> {
        let jobs = self
            .inner
            .jobs
            .lock()
            .map_err(|e| JobError::Internal(e.to_string()))?;
        jobs.get(id)
            .map(Self::view)
            .ok_or_else(|| JobError::NotFound(format!("There is no copy job '{id}'.")))
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<Value> {
        let Ok(jobs) = self.inner.jobs.lock() else {
            return Vec::new();
        };
        let mut all: Vec<&Job> = jobs.values().collect();
        all.sort_by_key(|j| (j.record.created, j.record.id.clone()));
        all.into_iter().map(Self::view).collect()
    }

    /// Stops a job (if running) and forgets it, its record and its checkpoint.
    pub fn delete(&self, id: &str) -> Result<(), JobError> {
        let job = self
            .inner
            .jobs
            .lock()
            .map_err(|e| JobError::Internal(e.to_string()))?
            .remove(id)
            .ok_or_else(|| JobError::NotFound(format!("There is no copy job '{id}'.")))?;
        // Stopped before this answers: a change the job reads from now on is not written.
        if let Ok(mut p) = job.progress.lock() {
            p.stop();
        }
        if let Some(t) = job.task {
            t.abort();
        }
        for p in [self.record_path(id), self.checkpoint_path(id)] {
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(JobError::Internal(format!(
                        "cannot remove {}: {e}",
                        p.display()
                    )))
                }
            }
        }
        Ok(())
    }

    /// Stops every running job without recording an end: they resume at the next start.
    pub fn stop_all(&self) {
        if let Ok(mut jobs) = self.inner.jobs.lock() {
            for j in jobs.values_mut() {
                if let Some(t) = j.task.take() {
                    t.abort();
                }
            }
        }
        if !self.inner.durable {
            let _ = std::fs::remove_dir_all(&self.inner.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_show() {
        assert_eq!(
            redact("AccountEndpoint=https://x:8081/;AccountKey=c2VjcmV0==;"),
            "AccountEndpoint=https://x:8081/;AccountKey=***"
        );
    }

    /// A record on disk keeps the accounts it copies between, but their keys only sealed.
    #[test]
    fn records_keep_account_keys_sealed() {
        let dir = std::env::temp_dir().join(format!("strata-jobs-sealed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let jobs = Jobs::open(Some(&dir), Sealer::new([2; 32])).expect("jobs");
        let from = "AccountEndpoint=https://acct.example:443/;AccountKey=c2VjcmV0LWtleS1vbmU=;";
        let to = "AccountEndpoint=https://other.example:443/;AccountKey=c2VjcmV0LWtleS10d28=;";
        let body = json!({"id": "j", "from": from, "to": to, "source": "a/b", "dest": "a/c"});
        jobs.create(body.as_object().cloned().expect("object"))
            .expect("created");
        let text = std::fs::read_to_string(dir.join("jobs/j.json")).expect("record");
        assert!(!text.contains("c2VjcmV0LWtleS1vbmU=") && !text.contains("c2VjcmV0LWtleS10d28="));
        assert_eq!(text.matches("AccountKey=sealed:").count(), 2, "{text}");
        let mut rec: Record = serde_json::from_str(&text).expect("a record");
        jobs.open_keys(&mut rec.spec).expect("opens");
        assert_eq!(
            (rec.spec.from.as_str(), rec.spec.to.as_deref()),
            (from, Some(to))
        );
        let other = Jobs::open(Some(&dir), Sealer::new([3; 32])).expect("jobs");
        assert!(
            other.open_keys(&mut rec.spec.clone()).is_ok(),
            "clear keys pass"
        );
        let mut sealed: Record = serde_json::from_str(&text).expect("a record");
        assert!(other.open_keys(&mut sealed.spec).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_jobs_are_refused_with_the_reason() {
        let jobs = Jobs::open(None, Sealer::new([1; 32])).expect("jobs");
        let body = |v: Value| v.as_object().cloned().expect("object");
        let cases = [
            (json!({"source": "a/b"}), "missing field `dest`"),
            (
                json!({"source": "a", "dest": "a/c"}),
                "'source' must be DB/CONTAINER",
            ),
            (
                json!({"source": "a/b", "dest": "a/c", "speed": 3}),
                "unknown field `speed`",
            ),
            (
                json!({"kind": "move", "source": "a/b", "dest": "a/c"}),
                "Unknown job kind",
            ),
            (
                json!({"id": "a b", "source": "a/b", "dest": "a/c"}),
                "is not valid",
            ),
            (
                json!({"source": "a/b", "dest": "a/c", "partitionKey": [1]}),
                "as strings",
            ),
        ];
        for (b, want) in cases {
            match jobs.create(body(b.clone())) {
                Err(JobError::BadRequest(m)) => assert!(m.contains(want), "{b}: {m}"),
                other => panic!("{b}: {other:?}"),
            }
        }
        jobs.stop_all();
    }
}
