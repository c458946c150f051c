//! The `strata` command line: flags, logging, start, and shutdown on Ctrl-C or SIGTERM.

mod advise;
mod banner;
mod partitions;
mod regions;
mod trust;

use crate::advise::sample::Recording;
use crate::api::security::auth::EMULATOR_KEY;
use crate::store::container::Limits;
use crate::store::StoreConfig;
use crate::{ServerConfig, Tls};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::{Path, PathBuf};

/// A Cosmos DB for NoSQL compatible document store: hierarchical partition keys, automatic
/// partition splits, Cosmos SQL. The official Cosmos SDKs work against it unchanged.
/// Without a command, `strata` serves.
#[derive(Parser, Debug)]
#[command(name = "strata", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: Args,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Export a whole account, a database or a container (definitions, scripts, items) as
    /// JSON Lines.
    Export(crate::transfer::export::ExportArgs),
    /// Import a file written by `strata export`.
    Import(crate::transfer::import::ImportArgs),
    /// Copy a container into another, online (snapshot, then its changes until caught up),
    /// e.g. into a container with a hierarchical partition key.
    Copy(crate::transfer::copy::CopyArgs),
    /// Show a container's physical partitions: ranges, sizes, request units, split lineage,
    /// largest and hottest logical partitions, warnings (the explorer's partitions view).
    Partitions(partitions::PartitionsArgs),
    /// Measure candidate partition keys on a container's real items and sampled queries
    /// (sizes, physical partitions, write heat, query routes) and recommend one, with the
    /// `strata copy` command that migrates to it.
    Advise(advise::AdviseArgs),
    /// List the regions of a strata serving --regions; set a region's fault (unavailable,
    /// write-forbidden, timeout, latency) or make it the write region.
    Regions(regions::RegionsArgs),
    /// Exit 0 once a strata server answers its readiness probe (for health checks and CI
    /// scripts); exit 1 if it does not within --wait seconds.
    Ready(ReadyArgs),
    /// Trust the certificate of a strata started with --tls: write it with this machine's
    /// roots to a bundle and print the variables that point each official SDK at it
    /// (`eval "$(strata trust)"`; `--format env >> "$GITHUB_ENV"` in CI), or add it to the
    /// system's store (`--system`, as root).
    Trust(trust::TrustArgs),
}

#[derive(clap::Args, Debug)]
struct ReadyArgs {
    /// The server (an endpoint URL or a connection string). Default: this machine, with the
    /// port and protocol the server's own variables give (STRATA_PORT or PORT, STRATA_TLS or
    /// PROTOCOL), so a container's health check follows its configuration.
    #[arg(long, env = "STRATA_ENDPOINT")]
    endpoint: Option<String>,
    /// Keep asking this many seconds before giving up.
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    wait: u64,
}

/// Asks `/_strata/ready` until it answers or `wait` seconds pass.
async fn ready(a: ReadyArgs) -> Result<String, String> {
    let endpoint = a
        .endpoint
        .clone()
        .unwrap_or_else(crate::transfer::local_endpoint);
    let client = crate::transfer::connect(&endpoint)?;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(a.wait);
    loop {
        // A closed port is said at once, not after the SDK's connection retries.
        if let Err(e) = crate::transfer::reachable(&endpoint).await {
            if std::time::Instant::now() >= until {
                return Err(e);
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        }
        match client.strata_ready().await {
            Ok(v) => {
                return Ok(format!(
                    "ready: {}",
                    v["status"].as_str().unwrap_or("ready")
                ))
            }
            Err(e) if std::time::Instant::now() >= until => {
                return Err(format!("{endpoint} is not ready: {e}"))
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
}

/// The server's flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, env = "STRATA_HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on.
    #[arg(long, env = "STRATA_PORT", default_value_t = 8081)]
    port: u16,
    /// Folder where data is stored durably. Default: one place per user, whatever folder
    /// strata starts in — `$XDG_DATA_HOME/strata`, or `~/.local/share/strata`
    /// (`~/Library/Application Support/strata` on macOS, `%LOCALAPPDATA%\strata` on Windows).
    #[arg(long, env = "STRATA_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Store the data in PostgreSQL (`postgres://user:password@host:port/database`) instead of
    /// the data folder, which then keeps only local files (certificate, copy jobs). Several
    /// processes may share a store: the first serves it, the others forward to it and take
    /// over when it stops (see docs/postgres.md).
    #[arg(
        long,
        env = "STRATA_STORE",
        value_name = "URL",
        conflicts_with = "in_memory",
        hide_env_values = true
    )]
    store: Option<String>,
    /// Keep data in memory only (a certificate generated for --tls is still kept, see
    /// --cert-dir).
    #[arg(long, env = "STRATA_IN_MEMORY")]
    in_memory: bool,
    /// Account key (base64) clients sign requests with.
    #[arg(long, env = "STRATA_KEY", default_value = EMULATOR_KEY, hide_default_value = true)]
    key: String,
    /// A read-only account key (base64): requests signed with it may read everything and
    /// change nothing (403), like the service's read-only keys.
    #[arg(long, env = "STRATA_READ_ONLY_KEY", hide_env_values = true)]
    read_only_key: Option<String>,
    /// Log filter (tracing syntax), e.g. `info` or `strata_server=debug`.
    #[arg(long, env = "STRATA_LOG", default_value = "info")]
    log: String,
    /// Serve HTTPS with a self-signed certificate for localhost (generated once, kept in the
    /// data folder or --cert-dir).
    #[arg(long, env = "STRATA_TLS")]
    tls: bool,
    /// PEM certificate chain for HTTPS (with --tls-key).
    #[arg(long, env = "STRATA_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS (with --tls-cert).
    #[arg(long, env = "STRATA_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// A physical partition splits when its data passes this size (e.g. 50GB, 64MB, 16KB).
    #[arg(long, env = "STRATA_PARTITION_SPLIT_BYTES", default_value = "50GB", value_parser = parse_size)]
    partition_split_bytes: u64,
    /// Most rows and groups one query may hold while it builds a complete result (DISTINCT,
    /// GROUP BY, aggregates, a merge); past it the query answers 400.
    #[arg(long, env = "STRATA_QUERY_MEMORY_BYTES", default_value = "64MB", value_parser = parse_size)]
    query_memory_bytes: u64,
    /// Bytes of vectors the vector indexes that search over codes (quantizedFlat, diskANN)
    /// keep in memory; past it, a local store reads the oldest from files beside its data.
    #[arg(long, env = "STRATA_VECTOR_ROWS_MEMORY_BYTES", default_value = "256MB", value_parser = parse_size)]
    vector_rows_memory_bytes: u64,
    /// The most data one logical partition (full partition key) may hold.
    #[arg(long, env = "STRATA_LOGICAL_PARTITION_LIMIT_BYTES", default_value = "20GB", value_parser = parse_size)]
    logical_partition_limit_bytes: u64,
    /// Physical partitions of a new container (default: one per 6,000 manual RU/s, or per
    /// 10,000 of an autoscale maximum, as the service creates them).
    #[arg(long, env = "STRATA_INITIAL_PARTITIONS")]
    initial_partitions: Option<u32>,
    /// The most physical partitions one container may have; splits (by size or throughput)
    /// stop there.
    #[arg(long, env = "STRATA_MAX_PARTITIONS", default_value_t = crate::store::container::DEFAULT_MAX_PARTITIONS,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_partitions: u32,
    /// Answer cross-partition queries that need client-side merging with 400/1004, exactly as
    /// the Cosmos gateway does.
    #[arg(long, env = "STRATA_GATEWAY_COMPAT")]
    gateway_compat: bool,
    /// Throttle requests beyond each physical partition's share of the provisioned RU/s with
    /// 429 (off by default, like the official emulator).
    #[arg(long, env = "STRATA_ENFORCE_THROUGHPUT")]
    enforce_throughput: bool,
    /// Minutes of all-versions-and-deletes change feed history kept for containers that set
    /// no `changeFeedPolicy` (0: none, as the service; a policy's `retentionDuration` wins).
    #[arg(
        long,
        env = "STRATA_CHANGE_FEED_RETENTION",
        default_value_t = 0,
        value_name = "MINUTES"
    )]
    change_feed_retention: u64,
    /// Milliseconds a stored procedure, trigger or UDF call may run before it is stopped (its
    /// writes rolled back, 408 to the client).
    #[arg(
        long,
        env = "STRATA_SCRIPT_TIMEOUT_MS",
        default_value_t = 5000,
        value_name = "MS"
    )]
    script_timeout_ms: u64,
    /// Milliseconds a physical partition that a throughput increase will split reports
    /// `"status": "splitting"` in the partition key range feed before the split is made, as
    /// the service's ranges do while a scale-up is under way (0: split at once).
    #[arg(
        long,
        env = "STRATA_SPLIT_NOTICE_MS",
        default_value_t = 3000,
        value_name = "MS"
    )]
    split_notice_ms: u64,
    /// Do not serve the Data Explorer (`/_explorer/index.html`).
    #[arg(long, env = "STRATA_NO_EXPLORER")]
    no_explorer: bool,
    /// The address clients reach this server by, when not the listen address (e.g. a
    /// container's published address): put in the certificate and the banner.
    #[arg(long, env = "STRATA_PUBLIC_HOST")]
    public_host: Option<String>,
    /// Where the generated TLS certificate is kept (default: the data folder, or with
    /// --in-memory `$XDG_CONFIG_HOME/strata` / `~/.config/strata`), so clients that trusted it
    /// keep working across restarts.
    #[arg(long, env = "STRATA_CERT_DIR")]
    cert_dir: Option<PathBuf>,
    /// Keep the sample of served queries (the partition-key advisor's workload, see `strata
    /// advise`) in the data folder too, so it outlives restarts.
    #[arg(
        long,
        env = "STRATA_RECORD_QUERIES",
        conflicts_with = "no_query_sample"
    )]
    record_queries: bool,
    /// Do not sample the queries served (by default a bounded sample is kept in memory).
    #[arg(long, env = "STRATA_NO_QUERY_SAMPLE")]
    no_query_sample: bool,
    /// Refuse the account keys and resource tokens, as an account with `disableLocalAuth`:
    /// clients authenticate with Entra ID tokens (type=aad) only.
    #[arg(long, env = "STRATA_DISABLE_LOCAL_AUTH")]
    disable_local_auth: bool,
    /// The data-plane RBAC policy for Entra ID principals (JSON: roleDefinitions,
    /// roleAssignments), also what `PUT /_strata/rbac` rewrites. Default: rbac.json in the
    /// data folder.
    #[arg(long, env = "STRATA_RBAC", value_name = "FILE")]
    rbac: Option<PathBuf>,
    /// Accept real Entra ID tokens: the tenant's signing keys, a JWKS file as
    /// https://login.microsoftonline.com/<tenant>/discovery/v2.0/keys serves it. Tokens must
    /// name the tenant of --entra-tenant.
    #[arg(
        long,
        env = "STRATA_ENTRA_JWKS",
        value_name = "FILE",
        requires = "entra_tenant"
    )]
    entra_jwks: Option<PathBuf>,
    /// The Entra ID tenant (directory) id whose tokens --entra-jwks verifies.
    #[arg(
        long,
        env = "STRATA_ENTRA_TENANT",
        value_name = "ID",
        requires = "entra_jwks"
    )]
    entra_tenant: Option<String>,
    /// Serve a multi-region account: each region (names separated by commas, the write region
    /// first) on its own port from --port up, all over the one store. Faults and failovers are
    /// set through /_strata/regions or the explorer.
    #[arg(long, env = "STRATA_REGIONS", value_name = "NAMES")]
    regions: Option<String>,
    /// With --regions: every region takes writes (multi-region writes).
    #[arg(long, env = "STRATA_MULTI_WRITE", requires = "regions")]
    multi_write: bool,
    /// With --regions: each region is also reached, and advertised, by host name on every
    /// region's port, as the service names regional endpoints: a client of
    /// https://localhost:8081/ reads "West US" at https://localhost-westus:8081/ (the
    /// names must resolve to this machine, e.g. in /etc/hosts).
    #[arg(long, env = "STRATA_REGION_HOSTS", requires = "regions")]
    region_hosts: bool,
    /// With --regions: per-partition automatic failover from the start (also set through the
    /// management API): the account advertises enablePerPartitionFailoverBehavior, and a
    /// single-write account's other regions take the writes an SDK fails over to them.
    #[arg(long, env = "STRATA_PER_PARTITION_FAILOVER", requires = "regions")]
    per_partition_failover: bool,
    /// Serve the management API of Microsoft's SDK test emulator (split and merge partitions,
    /// pause replication, per-partition failover) on this port of 127.0.0.1, without a key (0:
    /// any free port); the last line printed is then its JSON `ready` record.
    #[arg(long, env = "STRATA_MANAGEMENT_PORT", value_name = "PORT")]
    management_port: Option<u16>,
    /// Also write the certificate clients should trust (PEM) to this file once serving — the
    /// image writes it where the official Linux emulator keeps its `emulator.pem`, which the
    /// Testcontainers module for Python copies out of the container. Nothing is written over
    /// plain HTTP, which has no certificate.
    #[arg(long, env = "STRATA_CERT_COPY", value_name = "FILE")]
    cert_copy: Option<PathBuf>,
}

/// Parses a byte size: a number with an optional KB/MB/GB/TB suffix (binary units).
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_uppercase();
    let (num, mult) = [
        ("TB", 1u64 << 40),
        ("GB", 1 << 30),
        ("MB", 1 << 20),
        ("KB", 1 << 10),
        ("B", 1),
    ]
    .iter()
    .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((t.clone(), 1));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 16KB, 64MB, 50GB)"))?;
    n.checked_mul(mult)
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("'{s}' is out of range"))
}

/// The async runtime: a worker per core (a local store's connections run on [`crate::cores`]);
/// with PostgreSQL (`--store`), whose connections run here, more: each storage call blocks its
/// worker for a network round trip (as a disk read does with fjall, only longer).
fn runtime(remote: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if remote {
        b.worker_threads((num_cpus::get() * 8).max(16));
    }
    b.enable_all().build()
}

/// Runs the emulator until Ctrl-C or SIGTERM (the whole `strata` binary).
pub fn main() {
    let matches = Cli::command().get_matches();
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let runtime = match runtime(cli.command.is_none() && cli.serve.store.is_some()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strata: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let from_emulator_env = match emulator_env(&mut cli.serve, &matches, &|k| std::env::var(k).ok())
    {
        Ok(applied) => applied,
        Err(e) => {
            eprintln!("strata: {e}");
            std::process::exit(2);
        }
    };
    let outcome = match cli.command {
        None => {
            runtime.block_on(run(cli.serve, from_emulator_env));
            return;
        }
        Some(Command::Export(a)) => runtime.block_on(crate::transfer::export::export(a)),
        Some(Command::Import(a)) => runtime.block_on(crate::transfer::import::import(a)),
        Some(Command::Copy(a)) => runtime.block_on(crate::transfer::copy::copy(a)),
        Some(Command::Partitions(a)) => runtime.block_on(partitions::show(a)),
        Some(Command::Advise(a)) => runtime.block_on(advise::advise(a)),
        Some(Command::Regions(a)) => runtime.block_on(regions::regions(a)),
        Some(Command::Ready(a)) => runtime.block_on(ready(a)),
        Some(Command::Trust(a)) => runtime.block_on(trust::trust(a)),
    };
    match outcome {
        Ok(summary) => println!("{summary}"),
        Err(e) => {
            eprintln!("strata: {e}");
            std::process::exit(1);
        }
    }
}

/// The official emulators' environment variables, for setups that switch to strata
/// unchanged: each sets the flag it maps to when neither the command line nor a `STRATA_`
/// variable did. Returns what was applied (for the log); a value that does not parse is an
/// error, not a silent default.
fn emulator_env(
    a: &mut Args,
    m: &ArgMatches,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    let defaulted = |id: &str| matches!(m.value_source(id), None | Some(ValueSource::DefaultValue));
    let mut applied = Vec::new();
    let mut take = |name: &str, id: &str| -> Option<String> {
        let v = var(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())?;
        if !defaulted(id) {
            return None;
        }
        applied.push(format!("{name}={v}"));
        Some(v)
    };
    let boolean = |name: &str, v: &str| match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(format!("{name}='{v}' is not true or false")),
    };
    if let Some(v) = take("PORT", "port") {
        a.port = v
            .parse()
            .map_err(|_| format!("PORT='{v}' is not a port number"))?;
    }
    if let Some(v) = take("PROTOCOL", "tls") {
        a.tls = match v.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" | "https-insecure" => true,
            _ => return Err(format!("PROTOCOL='{v}' is not http or https")),
        };
    }
    if let Some(v) = take("DATA_PATH", "data_dir") {
        a.data_dir = Some(PathBuf::from(v));
    }
    if let Some(v) = take("LOG_LEVEL", "log") {
        a.log = match v.to_ascii_lowercase().as_str() {
            "warning" => "warn".to_string(),
            "information" => "info".to_string(),
            "critical" | "fatal" => "error".to_string(),
            other => other.to_string(),
        };
    }
    if let Some(v) = take("ENABLE_EXPLORER", "no_explorer") {
        a.no_explorer = !boolean("ENABLE_EXPLORER", &v)?;
    }
    // Testcontainers for Python passes `str(None)` when no partition count was asked for.
    let unset = |v: &String| v != "None";
    if let Some(v) = take("AZURE_COSMOS_EMULATOR_PARTITION_COUNT", "max_partitions").filter(unset) {
        a.max_partitions = v
            .parse()
            .ok()
            .filter(|n| (1..=65_536).contains(n))
            .ok_or_else(|| {
                format!(
                    "AZURE_COSMOS_EMULATOR_PARTITION_COUNT='{v}' is not a number from 1 to 65536"
                )
            })?;
    }
    if let Some(v) = take("AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE", "in_memory") {
        a.in_memory = !boolean("AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE", &v)?;
    }
    if let Some(v) = take("AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE", "public_host") {
        a.public_host = Some(v);
    }
    if let Some(v) = take("AZURE_COSMOS_EMULATOR_KEY", "key") {
        a.key = v;
    }
    // The log names what was applied, never a key.
    for line in applied.iter_mut() {
        if line.starts_with("AZURE_COSMOS_EMULATOR_KEY=") {
            *line = "AZURE_COSMOS_EMULATOR_KEY=(a key)".into();
        }
    }
    Ok(applied)
}

/// The data folder when none is named: one per user, the same whatever the working folder
/// (as the official emulators keep theirs in one place), so `cd server && cargo run` finds
/// the same data as a start from the repository's root.
fn default_data_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = if cfg!(windows) {
        env("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        env("HOME").map(|h| h.join("Library").join("Application Support"))
    } else {
        env("XDG_DATA_HOME").or_else(|| env("HOME").map(|h| h.join(".local").join("share")))
    };
    base.map_or_else(|| PathBuf::from("strata-data"), |b| b.join("strata"))
}

/// Earlier versions kept data in `./strata-data` by default: when the working folder has a
/// store there and the new default is elsewhere, say how to keep using it.
fn note_old_data_dir(default: &std::path::Path) {
    let old = std::path::Path::new("strata-data");
    let same = old.canonicalize().ok() == default.canonicalize().ok();
    if old.join("fjall").exists() && !same {
        tracing::warn!(
            "./strata-data holds data of an earlier strata, which kept data in the working folder; this server uses {}. Start with --data-dir strata-data to use it, or move it there",
            default.display()
        );
    }
}

/// Where a generated certificate lives without a data folder: the user's config folder, so
/// that it stays the same across `--in-memory` restarts.
fn default_cert_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("strata")
}

/// The log filter: storage-engine chatter stays below info unless asked for by name.
fn log_filter(log: &str) -> tracing_subscriber::EnvFilter {
    let quiet = ["fjall", "lsm_tree", "sfa", "value_log"]
        .iter()
        .filter(|c| !log.contains(*c))
        .map(|c| format!(",{c}=warn"))
        .collect::<String>();
    tracing_subscriber::EnvFilter::try_new(format!("{log}{quiet}"))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("info{quiet}")))
}

/// Runs the emulator with the given arguments until a shutdown signal.
pub async fn run(args: Args, from_emulator_env: Vec<String>) {
    use std::io::IsTerminal;
    // Logs on stderr (stdout carries the banner); colours only for a terminal.
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(log_filter(&args.log))
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .init();
    if !from_emulator_env.is_empty() {
        tracing::info!(
            "from the official emulator's environment variables: {}",
            from_emulator_env.join(", ")
        );
    }
    if args.record_queries && args.in_memory {
        tracing::warn!("--record-queries keeps the query sample in the data folder; with --in-memory there is none, so it stays in memory");
    }
    let data_dir = (!args.in_memory).then(|| {
        let dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
        if args.data_dir.is_none() {
            note_old_data_dir(&dir);
        }
        dir
    });
    let (cfg, cert_file) = match server_config(&args, data_dir.clone()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("strata: {e}");
            std::process::exit(2);
        }
    };
    let running = match crate::start(cfg).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strata: cannot start: {e}");
            std::process::exit(1);
        }
    };
    if let (Some(copy), Some(cert)) = (&args.cert_copy, &cert_file) {
        if let Err(e) = copy_certificate(cert, copy) {
            eprintln!("strata: {e}");
            std::process::exit(1);
        }
    }
    let mut banner = banner::banner(&args, &running, data_dir.as_deref(), cert_file.as_deref());
    if let Some(record) = banner::ready_record(&args, &running) {
        banner.push(record);
    }
    // A closed stdout (a parent that read the first line and left) must not stop the server.
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        for line in banner {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
    wait_for_signal().await;
    tracing::info!("shutting down: finishing in-flight requests and flushing storage");
    if let Err(e) = running.stop().await {
        eprintln!("strata: shutdown error: {e}");
        std::process::exit(1);
    }
}

/// The regions the flags name (one, by default).
fn regions_config(args: &Args) -> Result<crate::regions::RegionsConfig, String> {
    Ok(match &args.regions {
        Some(list) => crate::regions::RegionsConfig {
            by_host: args.region_hosts,
            per_partition_failover: args.per_partition_failover,
            ..crate::regions::RegionsConfig::parse(list, args.multi_write)?
        },
        None => Default::default(),
    })
}

/// What the server runs with, from its flags: the configuration, and the certificate file
/// the banner names (none for plain HTTP).
fn server_config(
    args: &Args,
    data_dir: Option<PathBuf>,
) -> Result<(ServerConfig, Option<PathBuf>), String> {
    let cert_dir = args
        .cert_dir
        .clone()
        .or_else(|| data_dir.clone())
        .unwrap_or_else(default_cert_dir);
    let regions = regions_config(args)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => Some(Tls::Files {
            cert: c.clone(),
            key: k.clone(),
        }),
        _ if args.tls => Some(Tls::SelfSigned {
            dir: cert_dir.clone(),
            names: {
                let hosts = ["localhost".to_string(), args.host.clone()]
                    .into_iter()
                    .chain(args.public_host.clone());
                // Each region's host name too, when regions are reached by name.
                hosts
                    .flat_map(|h| {
                        let by_region = regions.host_names(&h);
                        std::iter::once(h).chain(by_region)
                    })
                    .collect()
            },
        }),
        _ => None,
    };
    let cert_file = match &tls {
        Some(Tls::Files { cert, .. }) => Some(cert.clone()),
        Some(Tls::SelfSigned { dir, .. }) => Some(dir.join("tls-cert.pem")),
        None => None,
    };
    let cfg = ServerConfig {
        host: args.host.clone(),
        port: args.port,
        key: args.key.clone(),
        read_only_key: args.read_only_key.clone(),
        store: StoreConfig {
            data_dir: data_dir.clone(),
            postgres: args.store.clone(),
            limits: Limits {
                partition_split_bytes: args.partition_split_bytes,
                logical_partition_limit_bytes: args.logical_partition_limit_bytes,
                initial_partitions: args.initial_partitions,
                max_partitions: args.max_partitions,
                change_feed_retention: (args.change_feed_retention > 0)
                    .then_some(args.change_feed_retention),
                script_timeout: std::time::Duration::from_millis(args.script_timeout_ms.max(1)),
                split_notice: std::time::Duration::from_millis(args.split_notice_ms),
                query_memory_bytes: usize::try_from(args.query_memory_bytes).unwrap_or(usize::MAX),
                vector_rows_memory_bytes: usize::try_from(args.vector_rows_memory_bytes)
                    .unwrap_or(usize::MAX),
                vector_rows: None,
            },
        },
        tls,
        gateway_compat: args.gateway_compat,
        enforce_throughput: args.enforce_throughput,
        connections: crate::net::Connections::default(),
        explorer: !args.no_explorer,
        public_host: args.public_host.clone(),
        queries: match (&data_dir, args.record_queries, args.no_query_sample) {
            (_, _, true) => Recording::Off,
            (Some(dir), true, _) => Recording::File(dir.join("queries.json")),
            _ => Recording::Memory,
        },
        disable_local_auth: args.disable_local_auth,
        rbac: args.rbac.clone(),
        entra: match (&args.entra_jwks, &args.entra_tenant) {
            (Some(file), Some(tenant)) => {
                Some(crate::api::security::aad::Jwks::load(file, tenant)?)
            }
            _ => None,
        },
        regions,
        management_port: args.management_port,
    };
    Ok((cfg, cert_file))
}

/// Writes the certificate clients trust to `to` as well (`--cert-copy`), creating its folder.
fn copy_certificate(cert: &Path, to: &Path) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot copy the certificate to {}: {e}", to.display());
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    std::fs::copy(cert, to).map(|_| ()).map_err(fail)
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("16KB").unwrap(), 16 * 1024);
        assert_eq!(parse_size("50gb").unwrap(), 50 << 30);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<(Args, Vec<String>), String> {
        let m = Cli::command()
            .try_get_matches_from(std::iter::once("strata").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut cli = Cli::from_arg_matches(&m).map_err(|e| e.to_string())?;
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let applied = emulator_env(&mut cli.serve, &m, &|k| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })?;
        Ok((cli.serve, applied))
    }

    #[test]
    fn the_official_emulators_variables_map_onto_flags() {
        let (a, applied) = parse(
            &[],
            &[
                ("PORT", "9000"),
                ("PROTOCOL", "https"),
                ("DATA_PATH", "/data"),
                ("LOG_LEVEL", "warning"),
                ("ENABLE_EXPLORER", "false"),
                ("AZURE_COSMOS_EMULATOR_PARTITION_COUNT", "25"),
                ("AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE", "false"),
                ("AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE", "10.1.2.3"),
            ],
        )
        .expect("parses");
        assert_eq!((a.port, a.tls, a.log.as_str()), (9000, true, "warn"));
        assert_eq!(a.data_dir, Some(PathBuf::from("/data")));
        assert!(a.no_explorer && a.in_memory);
        assert_eq!(a.max_partitions, 25);
        assert_eq!(a.public_host.as_deref(), Some("10.1.2.3"));
        assert_eq!(applied.len(), 8);
    }

    /// What the Testcontainers module for Python sets, its defaults included: the partition
    /// count as `str(None)`, persistence as `str(False)`, the key.
    #[test]
    fn the_python_testcontainers_modules_variables_are_taken() {
        let key = "dGhlIGtleSBvZiBhIHRlc3QgYWNjb3VudA==";
        let (a, applied) = parse(
            &[],
            &[
                ("AZURE_COSMOS_EMULATOR_PARTITION_COUNT", "None"),
                ("AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE", "False"),
                ("AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE", "172.17.0.1"),
                ("AZURE_COSMOS_EMULATOR_KEY", key),
            ],
        )
        .expect("parses");
        assert_eq!(a.max_partitions, 1024, "None leaves the default");
        assert!(a.in_memory);
        assert_eq!(a.key, key);
        assert!(applied.iter().all(|l| !l.contains(key)), "{applied:?}");
    }

    #[test]
    fn flags_win_over_the_emulators_variables_and_bad_values_are_errors() {
        let (a, applied) = parse(&["--port", "7000"], &[("PORT", "9000")]).expect("parses");
        assert_eq!((a.port, applied.len()), (7000, 0));
        let e = parse(&[], &[("PROTOCOL", "ftp")]).err().unwrap_or_default();
        assert!(e.contains("PROTOCOL='ftp'"), "{e}");
        let e = parse(
            &[],
            &[("AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE", "maybe")],
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("not true or false"), "{e}");
    }
}
