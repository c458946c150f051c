//! The `strata` command line: flags, logging, start, and shutdown on Ctrl-C or SIGTERM.

use crate::api::auth::EMULATOR_KEY;
use crate::store::container::Limits;
use crate::store::StoreConfig;
use crate::{ServerConfig, Tls};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

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
}

/// The server's flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 8081)]
    port: u16,
    /// Folder where data is stored durably.
    #[arg(long, default_value = "strata-data")]
    data_dir: PathBuf,
    /// Keep everything in memory; nothing is written to disk.
    #[arg(long)]
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
    /// Serve HTTPS with a self-signed certificate for localhost (kept in the data folder).
    #[arg(long)]
    tls: bool,
    /// PEM certificate chain for HTTPS (with --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS (with --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// A physical partition splits when its data passes this size (e.g. 50GB, 64MB, 16KB).
    #[arg(long, default_value = "50GB", value_parser = parse_size)]
    partition_split_bytes: u64,
    /// The most data one logical partition (full partition key) may hold.
    #[arg(long, default_value = "20GB", value_parser = parse_size)]
    logical_partition_limit_bytes: u64,
    /// Physical partitions of a new container (default: one per 10,000 RU/s).
    #[arg(long)]
    initial_partitions: Option<u32>,
    /// The most physical partitions one container may have; splits (by size or throughput)
    /// stop there.
    #[arg(long, default_value_t = crate::store::container::DEFAULT_MAX_PARTITIONS,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_partitions: u32,
    /// Answer cross-partition queries that need client-side merging with 400/1004, exactly as
    /// the Cosmos gateway does.
    #[arg(long)]
    gateway_compat: bool,
    /// Throttle requests beyond each physical partition's share of the provisioned RU/s with
    /// 429 (off by default, like the official emulator).
    #[arg(long)]
    enforce_throughput: bool,
    /// Minutes of all-versions-and-deletes change feed history kept for containers that set
    /// no `changeFeedPolicy` (0: none, as the service; a policy's `retentionDuration` wins).
    #[arg(long, default_value_t = 0, value_name = "MINUTES")]
    change_feed_retention: u64,
    /// Milliseconds a stored procedure, trigger or UDF call may run before it is stopped (its
    /// writes rolled back, 408 to the client).
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    script_timeout_ms: u64,
}

/// Parses a byte size: a number with an optional KB/MB/GB/TB suffix (binary units).
fn parse_size(s: &str) -> Result<u64, String> {
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

/// Runs the emulator until Ctrl-C or SIGTERM (the whole `strata` binary).
pub fn main() {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strata: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let cli = Cli::parse();
    let outcome = match cli.command {
        None => {
            runtime.block_on(run(cli.serve));
            return;
        }
        Some(Command::Export(a)) => runtime.block_on(crate::transfer::export::export(a)),
        Some(Command::Import(a)) => runtime.block_on(crate::transfer::import::import(a)),
        Some(Command::Copy(a)) => runtime.block_on(crate::transfer::copy::copy(a)),
    };
    match outcome {
        Ok(summary) => println!("{summary}"),
        Err(e) => {
            eprintln!("strata: {e}");
            std::process::exit(1);
        }
    }
}

/// Runs the emulator with the given arguments until a shutdown signal.
pub async fn run(args: Args) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&args.log)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .init();
    let data_dir = (!args.in_memory).then(|| args.data_dir.clone());
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => Some(Tls::Files {
            cert: c.clone(),
            key: k.clone(),
        }),
        _ if args.tls => Some(Tls::SelfSigned {
            dir: data_dir.clone(),
        }),
        _ => None,
    };
    let cfg = ServerConfig {
        host: args.host.clone(),
        port: args.port,
        key: args.key.clone(),
        read_only_key: args.read_only_key.clone(),
        store: StoreConfig {
            data_dir: data_dir.clone(),
            limits: Limits {
                partition_split_bytes: args.partition_split_bytes,
                logical_partition_limit_bytes: args.logical_partition_limit_bytes,
                initial_partitions: args.initial_partitions,
                max_partitions: args.max_partitions,
                change_feed_retention: (args.change_feed_retention > 0)
                    .then_some(args.change_feed_retention),
                script_timeout: std::time::Duration::from_millis(args.script_timeout_ms.max(1)),
            },
        },
        tls,
        gateway_compat: args.gateway_compat,
        enforce_throughput: args.enforce_throughput,
        connections: crate::net::Connections::default(),
    };
    let running = match crate::start(cfg).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("strata: cannot start: {e}");
            std::process::exit(1);
        }
    };
    let storage = match &data_dir {
        Some(d) => format!("data in {}", d.display()),
        None => "data in memory only".to_string(),
    };
    println!("strata listening on {} ({storage})", running.url());
    wait_for_signal().await;
    tracing::info!("shutting down: finishing in-flight requests and flushing storage");
    if let Err(e) = running.stop().await {
        eprintln!("strata: shutdown error: {e}");
        std::process::exit(1);
    }
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
