//! The PostgreSQL backend (`--store postgres://…`): each key space a table of `bytea` keys in
//! primary-key order, spoken to over the wire protocol (so YugabyteDB or CockroachDB, which
//! speak it with range-sharded tables, fit too). `docs/postgres.md` has the design: schema,
//! how each [`Kv`] call maps to SQL, and what happens when a process dies half-way.
//!
//! [`Kv`] is synchronous (the engine calls it on the request's thread, as it calls fjall), so
//! the adapter runs its connections on a small runtime of its own and each call waits for its
//! answer: one round trip blocks the calling thread as a disk read does. One process serves a
//! store at a time: it holds an advisory lock on the session that writes, so once another
//! process has the lock no write of the former can still commit (fencing). Other processes
//! wait for the lock and forward requests meanwhile (`crate::follower`).

use super::{empty_bounds, Kv, KvError, KvIter, Op, Space, SPACES};
use bytes::Bytes;
use std::collections::HashMap;
use std::future::Future;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Statement};

/// The schema this binary writes; a store with a newer one is refused.
const SCHEMA_VERSION: &str = "1";
/// The advisory lock that makes one process the store's only server ("strata" in ASCII).
const LOCK_ID: i64 = 0x0073_7472_6174_6100;
/// How long a start waits for the store's lock (a killed predecessor's session to end).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Rows fetched per page of a range scan.
const PAGE: i64 = 512;
/// Connections for reads (writes have their own: the engine applies one batch at a time).
const READERS: usize = 16;

fn pg(e: impl std::fmt::Display) -> KvError {
    KvError::backend("PostgreSQL", e.to_string())
}

/// A connection, opened on first use and again after it was lost (except the writer's: it
/// holds the store's lock), with its prepared statements (each SQL text is prepared once per
/// connection).
struct Conn {
    client: Option<Client>,
    statements: HashMap<String, Statement>,
    /// Whether its commits wait for the WAL flush (the writer's do not: see [`Kv::sync`]).
    synchronous: bool,
    /// Whether the session holds the store's lock (then it is never re-opened).
    holds_lock: bool,
    /// Whether this process gave the lock up (at shutdown): its writer writes no more.
    released: bool,
}

impl Conn {
    fn new(synchronous: bool) -> Self {
        Self {
            client: None,
            statements: HashMap::new(),
            synchronous,
            holds_lock: false,
            released: false,
        }
    }

    /// The writer: the session that took the store's lock, never replaced. If it ends
    /// (PostgreSQL restarted, the network dropped it) the lock went with it and another
    /// process may hold the store, so this one must not write again.
    fn holding_lock(client: Client) -> Self {
        Self {
            client: Some(client),
            statements: HashMap::new(),
            synchronous: false,
            holds_lock: true,
            released: false,
        }
    }

    /// The writer's session, if it still holds the lock. Checked under the writer's mutex
    /// before every batch, and the lock is given up under it too: no batch of this process
    /// can commit after another process may have taken the store.
    fn lock_holder(&mut self) -> Result<&Client, KvError> {
        if self.released {
            return Err(KvError::backend(
                "PostgreSQL",
                "this process gave up the store's lock (it is shutting down)",
            ));
        }
        match &self.client {
            Some(c) if !c.is_closed() => Ok(c),
            _ => Err(KvError::backend("PostgreSQL", 
                "the session holding the store's lock ended; restart strata to serve this store again",
            )),
        }
    }

    /// The open connection and `sql` prepared on it.
    async fn statement(
        &mut self,
        config: &tokio_postgres::Config,
        sql: &str,
    ) -> Result<(&Client, Statement), KvError> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            if self.holds_lock {
                self.lock_holder()?;
            }
            self.statements.clear();
            self.client = Some(connect(config, self.synchronous).await?);
        }
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| KvError::backend("PostgreSQL", "no connection"))?;
        let st = match self.statements.get(sql) {
            Some(s) => s.clone(),
            None => {
                let s = client.prepare(sql).await.map_err(pg)?;
                self.statements.insert(sql.to_string(), s.clone());
                s
            }
        };
        Ok((client, st))
    }
}

async fn connect(config: &tokio_postgres::Config, synchronous: bool) -> Result<Client, KvError> {
    let (client, connection) = config.connect(NoTls).await.map_err(pg)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "PostgreSQL connection ended");
        }
    });
    // Every statement strata sends is a primary-key lookup or an ordered key-range scan, for
    // which an index scan in key order is right whatever the planner estimates: a generic
    // plan that reads a whole range, sorts it and keeps 512 rows made each page of a long
    // scan cost the whole rest of the range.
    let commit = if synchronous { "on" } else { "off" };
    client
        .batch_execute(&format!(
            "SET synchronous_commit = {commit}; SET client_min_messages = warning; \
             SET statement_timeout = '60s'; \
             SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off"
        ))
        .await
        .map_err(pg)?;
    Ok(client)
}

struct Shared {
    config: tokio_postgres::Config,
    /// Holds the store's advisory lock and applies batches; its commits do not wait for the
    /// WAL flush. Writing on the lock's own session is the fence: the lock is freed only when
    /// the session ends, after its last statement committed or rolled back.
    writer: Mutex<Conn>,
    /// Makes them durable: one synchronous commit flushes the WAL up to itself.
    syncer: Mutex<Conn>,
    readers: Vec<Mutex<Conn>>,
    next_reader: AtomicUsize,
}

impl Shared {
    /// The next read connection, in turn.
    async fn reader(&self) -> tokio::sync::MutexGuard<'_, Conn> {
        let i = self.next_reader.fetch_add(1, Ordering::Relaxed) % self.readers.len();
        self.readers[i].lock().await
    }
}

/// Tables of ordered byte keys in PostgreSQL.
pub struct PostgresKv {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

fn table(space: Space) -> &'static str {
    SPACES
        .iter()
        .find(|(s, _)| *s == space)
        .map_or("items", |(_, n)| n)
}

impl PostgresKv {
    /// Connects to `url` (`postgres://user:password@host:port/database`), takes the store's
    /// lock, and creates or checks the schema. A process killed a moment ago holds the lock
    /// until PostgreSQL notices its session ended, so this waits a little before answering
    /// [`KvError::Held`].
    pub fn open(url: &str) -> Result<Self, KvError> {
        let until = std::time::Instant::now() + LOCK_WAIT;
        Self::open_when_free(url, move || std::time::Instant::now() < until)
    }

    /// [`PostgresKv::open`], waiting for the lock as long as `keep_waiting` says (asked
    /// every 200 ms): how a process that forwards to another takes over when it stops.
    pub fn open_when_free(
        url: &str,
        keep_waiting: impl Fn() -> bool + Send + 'static,
    ) -> Result<Self, KvError> {
        let config = config(url)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("strata-postgres")
            .enable_all()
            .build()?;
        let opened = wait(&runtime, async move {
            let writer = connect(&config, false).await?;
            loop {
                let row = writer
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK_ID])
                    .await
                    .map_err(pg)?;
                if row.get::<_, bool>(0) {
                    break;
                }
                if !keep_waiting() {
                    return Err(KvError::Held);
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            create_schema(&writer).await?;
            Ok(Shared {
                writer: Mutex::new(Conn::holding_lock(writer)),
                syncer: Mutex::new(Conn::new(true)),
                readers: (0..READERS).map(|_| Mutex::new(Conn::new(true))).collect(),
                next_reader: AtomicUsize::new(0),
                config,
            })
        })?;
        Ok(Self {
            shared: Arc::new(opened),
            runtime: Some(runtime),
        })
    }

    /// Runs `f` on the adapter's runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(
            Arc<Shared>,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<T, KvError>> + Send>>,
    ) -> Result<T, KvError> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| KvError::backend("PostgreSQL", "the store is closed"))?;
        wait(runtime, f(Arc::clone(&self.shared)))
    }
}

/// Spawns `fut` on `runtime` and blocks this thread until it finishes (from any thread,
/// inside another runtime too: the future runs on the adapter's own threads). The answer comes
/// back over a plain channel: polling a tokio `JoinHandle` from a thread that blocks inside
/// another runtime's task can defer its wake-up until that task yields, which it never does.
fn wait<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    fut: impl Future<Output = Result<T, KvError>> + Send + 'static,
) -> Result<T, KvError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| {
        KvError::backend("PostgreSQL", "the PostgreSQL task ended without an answer")
    })?
}

/// The connection settings of `url`, with bounds on waiting: a server that stops answering
/// (a cut network sends no reset) must not hold request threads forever, so connects are
/// bounded, TCP keepalives end dead connections, and statements time out (see [`connect`]).
fn config(url: &str) -> Result<tokio_postgres::Config, KvError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
        KvError::backend(
            "PostgreSQL",
            format!("'{}' is not a PostgreSQL URL: {e}", redact(url)),
        )
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(5));
    }
    config
        .keepalives(true)
        .keepalives_idle(std::time::Duration::from_secs(10))
        .keepalives_interval(std::time::Duration::from_secs(5))
        .keepalives_retries(3);
    Ok(config)
}

/// Reads `name` from the store's `strata.meta` table over a connection of its own (from an
/// async context: how a process that waits for the store finds the one serving it).
pub async fn read_meta(url: &str, name: &str) -> Result<Option<String>, KvError> {
    let client = connect(&config(url)?, true).await?;
    let row = client
        .query_opt("SELECT value FROM strata.meta WHERE name = $1", &[&name])
        .await
        .map_err(pg)?;
    Ok(row.map(|r| r.get(0)))
}

/// Sets `name` in the store's `strata.meta` table (see [`read_meta`]).
pub async fn write_meta(url: &str, name: &str, value: &str) -> Result<(), KvError> {
    let client = connect(&config(url)?, true).await?;
    client
        .execute(
            "INSERT INTO strata.meta VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
            &[&name, &value],
        )
        .await
        .map_err(pg)?;
    Ok(())
}

/// Sets `name` in `strata.meta` unless it is set already (the first writer wins; the schema
/// exists: the store was opened).
pub async fn write_meta_once(url: &str, name: &str, value: &str) -> Result<(), KvError> {
    let client = connect(&config(url)?, true).await?;
    client
        .execute(
            "INSERT INTO strata.meta VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            &[&name, &value],
        )
        .await
        .map_err(pg)?;
    Ok(())
}

/// A PostgreSQL store as several processes share it (see [`super::Shared`]).
pub struct SharedPostgres {
    pub(super) url: String,
}

impl super::Shared for SharedPostgres {
    fn open_when_free(
        &self,
        keep_waiting: Box<dyn Fn() -> bool + Send + 'static>,
    ) -> Result<Box<dyn Kv>, KvError> {
        Ok(Box::new(PostgresKv::open_when_free(
            &self.url,
            keep_waiting,
        )?))
    }

    fn read_meta<'a>(
        &'a self,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Option<String>, KvError>> {
        Box::pin(read_meta(&self.url, name))
    }

    fn write_meta<'a>(
        &'a self,
        name: &'a str,
        value: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(), KvError>> {
        Box::pin(write_meta(&self.url, name, value))
    }

    fn write_meta_once<'a>(
        &'a self,
        name: &'a str,
        value: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<(), KvError>> {
        Box::pin(write_meta_once(&self.url, name, value))
    }
}

/// The URL with its password hidden, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

async fn create_schema(c: &Client) -> Result<(), KvError> {
    // YugabyteDB hash-shards a table by its first key column unless told ASC, which would
    // scatter each physical partition's keys; ASC keeps them range-sharded. PostgreSQL's
    // grammar has no order in a primary key (and needs none).
    let version: String = c
        .query_one("SELECT version()", &[])
        .await
        .map_err(pg)?
        .get(0);
    let key = if version.contains("-YB-") {
        "k ASC"
    } else {
        "k"
    };
    let mut ddl = String::from(
        "CREATE SCHEMA IF NOT EXISTS strata;
         CREATE TABLE IF NOT EXISTS strata.meta (name text PRIMARY KEY, value text NOT NULL);",
    );
    for (_, name) in SPACES {
        ddl.push_str(&format!(
            "CREATE TABLE IF NOT EXISTS strata.\"{name}\" (k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY ({key}));"
        ));
    }
    ddl.push_str(&format!(
        "INSERT INTO strata.meta VALUES ('schema_version', '{SCHEMA_VERSION}') ON CONFLICT (name) DO NOTHING;"
    ));
    c.batch_execute(&ddl).await.map_err(pg)?;
    let v: String = c
        .query_one(
            "SELECT value FROM strata.meta WHERE name = 'schema_version'",
            &[],
        )
        .await
        .map_err(pg)?
        .get(0);
    if v != SCHEMA_VERSION {
        return Err(KvError::backend("PostgreSQL", format!(
            "the store's schema is version {v}; this strata writes version {SCHEMA_VERSION}: use the strata that wrote it, or a newer one"
        )));
    }
    Ok(())
}

/// The SQL of one page of a range scan, for the bounds' kinds and the direction.
fn page_sql(space: Space, start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>, reverse: bool) -> String {
    let mut conds = Vec::new();
    let mut n = 0;
    let mut param = || {
        n += 1;
        format!("${n}")
    };
    match start {
        Bound::Included(_) => conds.push(format!("k >= {}", param())),
        Bound::Excluded(_) => conds.push(format!("k > {}", param())),
        Bound::Unbounded => {}
    }
    match end {
        Bound::Included(_) => conds.push(format!("k <= {}", param())),
        Bound::Excluded(_) => conds.push(format!("k < {}", param())),
        Bound::Unbounded => {}
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    format!(
        "SELECT k, v FROM strata.\"{}\"{filter} ORDER BY k {} LIMIT {PAGE}",
        table(space),
        if reverse { "DESC" } else { "ASC" }
    )
}

/// A batch's changes to one key space: keys deleted, keys written and their values.
#[derive(Default)]
struct SpaceOps {
    deletes: Vec<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
}

/// One statement that applies a batch: per space touched, a DELETE of its deleted keys and an
/// upsert of its written ones, as data-modifying CTEs (one statement: one transaction, one
/// round trip). Returns the SQL and its parameters (each a `bytea[]`).
fn batch_sql(ops: Vec<Op>) -> (String, Vec<Vec<Vec<u8>>>) {
    // The last op on a key wins (the contract); after this, each key has one op.
    let mut last: HashMap<(u8, Vec<u8>), Option<Vec<u8>>> = HashMap::new();
    for op in ops {
        match op {
            Op::Put(s, k, v) => last.insert((s as u8, k), Some(v)),
            Op::Delete(s, k) => last.insert((s as u8, k), None),
        };
    }
    let mut per_space: Vec<SpaceOps> = SPACES.iter().map(|_| SpaceOps::default()).collect();
    for ((s, k), v) in last {
        let ops = &mut per_space[usize::from(s)];
        match v {
            Some(v) => {
                ops.keys.push(k);
                ops.values.push(v);
            }
            None => ops.deletes.push(k),
        }
    }
    let mut ctes = Vec::new();
    let mut params: Vec<Vec<Vec<u8>>> = Vec::new();
    for (
        i,
        SpaceOps {
            deletes: dels,
            keys,
            values: vals,
        },
    ) in per_space.into_iter().enumerate()
    {
        let name = SPACES[i].1;
        if !dels.is_empty() {
            params.push(dels);
            ctes.push(format!(
                "d{i} AS (DELETE FROM strata.\"{name}\" WHERE k = ANY(${}::bytea[]))",
                params.len()
            ));
        }
        if !keys.is_empty() {
            params.push(keys);
            params.push(vals);
            ctes.push(format!(
                "p{i} AS (INSERT INTO strata.\"{name}\" (k, v) SELECT * FROM unnest(${}::bytea[], ${}::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v)",
                params.len() - 1,
                params.len()
            ));
        }
    }
    (format!("WITH {} SELECT 1", ctes.join(", ")), params)
}

impl Kv for PostgresKv {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        let key = key.to_vec();
        self.run(move |sh| {
            Box::pin(async move {
                let mut conn = sh.reader().await;
                let sql = format!("SELECT v FROM strata.\"{}\" WHERE k = $1", table(space));
                let (client, st) = conn.statement(&sh.config, &sql).await?;
                let row = client.query_opt(&st, &[&key]).await.map_err(pg)?;
                Ok(row.map(|r| Bytes::from(r.get::<_, Vec<u8>>(0))))
            })
        })
    }

    fn get_many(&self, space: Space, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>, KvError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let wanted = keys.to_vec();
        let mut found = self.run(move |sh| {
            Box::pin(async move {
                let mut conn = sh.reader().await;
                let sql = format!(
                    "SELECT k, v FROM strata.\"{}\" WHERE k = ANY($1::bytea[])",
                    table(space)
                );
                let (client, st) = conn.statement(&sh.config, &sql).await?;
                let rows = client.query(&st, &[&wanted]).await.map_err(pg)?;
                Ok(rows
                    .into_iter()
                    .map(|r| (r.get::<_, Vec<u8>>(0), Bytes::from(r.get::<_, Vec<u8>>(1))))
                    .collect::<HashMap<_, _>>())
            })
        })?;
        Ok(keys.iter().map(|k| found.remove(k)).collect())
    }

    fn is_remote(&self) -> bool {
        true
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
            PAGE as usize,
            Box::new(move |start, end, reverse| self.page(space, start, end, reverse)),
        )
    }

    fn apply(&self, ops: Vec<Op>) -> Result<(), KvError> {
        if ops.is_empty() {
            return Ok(());
        }
        let (sql, params) = batch_sql(ops);
        self.run(move |sh| {
            Box::pin(async move {
                let mut conn = sh.writer.lock().await;
                conn.lock_holder()?;
                let (client, st) = conn.statement(&sh.config, &sql).await?;
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                client.execute(&st, &refs).await.map_err(pg)?;
                Ok(())
            })
        })
    }

    fn sync(&self) -> Result<(), KvError> {
        // Batches commit without waiting for the WAL flush (synchronous_commit = off on the
        // writer), so many share one flush, as with fjall's group commit: a synchronous
        // commit flushes the WAL up to its own record, which follows every batch committed
        // before it. PostgreSQL crashing loses only batches not yet acknowledged.
        self.run(|sh| {
            Box::pin(async move {
                let mut conn = sh.syncer.lock().await;
                let (client, st) = conn
                    .statement(
                        &sh.config,
                        "INSERT INTO strata.meta VALUES ('synced', now()::text) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                    )
                    .await?;
                client.execute(&st, &[]).await.map_err(pg)?;
                Ok(())
            })
        })
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn shutdown(&self) -> Result<(), KvError> {
        // Commits are durable already; hand the store over at once rather than when
        // PostgreSQL notices the session is gone. Once: the drop after a clean shutdown has
        // nothing left to release. From here on the writer refuses batches (a request still
        // running past the shutdown's grace period must not write under another's lock).
        self.run(|sh| {
            Box::pin(async move {
                let mut conn = sh.writer.lock().await;
                if conn.released {
                    return Ok(());
                }
                let unlocked = conn
                    .lock_holder()?
                    .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_ID])
                    .await
                    .map_err(pg);
                conn.released = true;
                unlocked.map(|_| ())
            })
        })
    }

    fn disk_space(&self) -> u64 {
        self.run(|sh| {
            Box::pin(async move {
                let mut conn = sh.reader().await;
                let (client, st) = conn
                    .statement(
                        &sh.config,
                        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'strata' AND c.relkind = 'r'",
                    )
                    .await?;
                let row = client.query_one(&st, &[]).await.map_err(pg)?;
                Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
            })
        })
        .unwrap_or(0)
    }
}

impl Drop for PostgresKv {
    fn drop(&mut self) {
        // Dropping a runtime waits for its threads, which is refused inside another runtime.
        let _ = self.shutdown();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl PostgresKv {
    /// One page of a range scan: one query for the rows after the bounds (no cursor, no open
    /// transaction between pages).
    fn page(
        &self,
        space: Space,
        start: &Bound<Vec<u8>>,
        end: &Bound<Vec<u8>>,
        reverse: bool,
    ) -> Result<Vec<(Vec<u8>, Bytes)>, KvError> {
        let sql = page_sql(space, start, end, reverse);
        let params: Vec<Vec<u8>> = [start, end]
            .into_iter()
            .filter_map(|b| match b {
                Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
                Bound::Unbounded => None,
            })
            .collect();
        self.run(move |sh| {
            Box::pin(async move {
                let mut conn = sh.reader().await;
                let (client, st) = conn.statement(&sh.config, &sql).await?;
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                let rows = client.query(&st, &refs).await.map_err(pg)?;
                Ok(rows
                    .into_iter()
                    .map(|r| (r.get::<_, Vec<u8>>(0), Bytes::from(r.get::<_, Vec<u8>>(1))))
                    .collect::<Vec<_>>())
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_the_bounds_and_direction() {
        assert_eq!(
            page_sql(
                Space::Items,
                &Bound::Included(vec![1]),
                &Bound::Excluded(vec![2]),
                false
            ),
            "SELECT k, v FROM strata.\"items\" WHERE k >= $1 AND k < $2 ORDER BY k ASC LIMIT 512"
        );
        assert_eq!(
            page_sql(
                Space::Feed,
                &Bound::Unbounded,
                &Bound::Included(vec![2]),
                true
            ),
            "SELECT k, v FROM strata.\"feed\" WHERE k <= $1 ORDER BY k DESC LIMIT 512"
        );
    }

    #[test]
    fn a_batch_is_one_statement_and_the_last_op_on_a_key_wins() {
        let (sql, params) = batch_sql(vec![
            Op::Put(Space::Items, b"a".to_vec(), b"1".to_vec()),
            Op::Delete(Space::Items, b"a".to_vec()),
            Op::Put(Space::Feed, b"f".to_vec(), b"2".to_vec()),
        ]);
        assert!(
            sql.starts_with("WITH d1 AS (DELETE FROM strata.\"items\""),
            "{sql}"
        );
        assert!(sql.contains("p2 AS (INSERT INTO strata.\"feed\""), "{sql}");
        assert_eq!(
            params,
            vec![
                vec![b"a".to_vec()],
                vec![b"f".to_vec()],
                vec![b"2".to_vec()]
            ]
        );
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
    }
}
