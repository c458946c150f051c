//! The account's regions. By default one, "South Central US", as the official emulator
//! reports. Under `--regions "West US,East US"` each region is served on its own port over the
//! same store, and the account read from any of them lists every region's endpoint: the SDKs'
//! preferred and excluded locations, circuit breakers and failover then work on one machine
//! as against a multi-region account.
//!
//! A single-write account has one write region (the first named; a failover moves it): a
//! write sent to another region answers 403 with sub-status 3 (WriteForbidden), as the service
//! answers, and the SDKs re-read the account and retry in the region it names. With
//! `--multi-write` every region takes writes. Faults are set per region through
//! `/_strata/regions` (or the explorer): the region answers 503, refuses writes, holds requests
//! and then answers 408, or adds latency — to everything but strata's own endpoints, so the
//! fault can always be cleared.

use crate::error::CosmosError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The region a single-region account reports, as the official emulator.
pub const DEFAULT_REGION: &str = "South Central US";

/// Sub-status of a write refused by a region that does not take writes.
pub const WRITE_FORBIDDEN: u32 = 3;

/// Sub-status of a 404 for a read whose session the region has not caught up with.
pub const READ_SESSION_NOT_AVAILABLE: u32 = 1002;

/// The highest LSN a session token (`range:version#lsn[#region=lsn...]`, comma-separated
/// per range) asks for.
fn session_lsn(token: &str) -> Option<u64> {
    token
        .split(',')
        .filter_map(|part| part.split_once(':')?.1.split('#').nth(1)?.parse().ok())
        .max()
}

/// The regions to serve, from the flags.
#[derive(Debug, Clone, Default)]
pub struct RegionsConfig {
    /// Region names, the write region (or the first in failover priority) first. Empty: one.
    pub names: Vec<String>,
    /// Every region takes writes.
    pub multi_write: bool,
    /// Regions are also reached, and advertised, by host name: `<account>-<region>` (see
    /// [`Regions::region_of_host`]).
    pub by_host: bool,
    /// Per-partition automatic failover on from the start (see
    /// [`Regions::per_partition_failover`]).
    pub per_partition_failover: bool,
}

impl RegionsConfig {
    /// Parses `--regions`: names separated by commas, each named once.
    pub fn parse(list: &str, multi_write: bool) -> Result<Self, String> {
        let names: Vec<String> = list
            .split(',')
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Err("--regions names no region (example: \"West US,East US\")".into());
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
                return Err(format!("--regions names '{n}' twice"));
            }
        }
        Ok(Self {
            names,
            multi_write,
            by_host: false,
            per_partition_failover: false,
        })
    }

    /// Each region's host name made from `host` (`localhost` → `localhost-westus`, ...)
    /// under `--region-hosts`, for the self-signed certificate; none for an address.
    pub fn host_names(&self, host: &str) -> Vec<String> {
        let Some(label) = first_label(host).filter(|_| self.by_host) else {
            return Vec::new();
        };
        let rest = &host[label.len()..];
        self.names
            .iter()
            .map(|n| format!("{label}-{}{rest}", slug(n)))
            .collect()
    }
}

/// What a region does to the requests it receives besides serving them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    #[default]
    None,
    /// 503 ServiceUnavailable to every request: the region is down.
    Unavailable,
    /// 403 WriteForbidden to every write: the region stopped taking writes (a failover
    /// under way), reads are served.
    WriteForbidden,
    /// Each request is held `holdMs`, then answered 408 RequestTimeout (a client with a
    /// shorter timeout sees its own timeout first).
    Timeout,
}

/// A region's injected fault, as `/_strata/regions/{name}` takes and shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fault {
    #[serde(default)]
    pub kind: FaultKind,
    /// Added before every request the region serves.
    #[serde(default)]
    pub latency_ms: u64,
    /// How long a `timeout` fault holds a request.
    #[serde(default = "default_hold")]
    pub hold_ms: u64,
}

fn default_hold() -> u64 {
    5_000
}

impl Default for Fault {
    fn default() -> Self {
        Self {
            kind: FaultKind::None,
            latency_ms: 0,
            hold_ms: default_hold(),
        }
    }
}

/// The most a fault may hold or delay a request: past it, the connection limits of the
/// server would close it anyway.
const MAX_DELAY_MS: u64 = 120_000;

impl Fault {
    fn check(&self) -> Result<(), CosmosError> {
        if self.latency_ms > MAX_DELAY_MS || self.hold_ms > MAX_DELAY_MS {
            return Err(CosmosError::bad_request(format!(
                "latencyMs and holdMs are at most {MAX_DELAY_MS} ms."
            )));
        }
        Ok(())
    }
}

/// The regions of the account, their ports and faults: one cheap handle.
#[derive(Clone)]
pub struct Regions {
    inner: Arc<Inner>,
}

struct Inner {
    names: Vec<String>,
    /// Each name as a host name spells it ([`slug`]), when regions are reached by host name.
    slugs: Option<Vec<String>>,
    multi_write: bool,
    /// Each region's port, once its listener is bound.
    ports: Vec<AtomicU16>,
    /// The write region of a single-write account (an index into `names`).
    write: AtomicUsize,
    faults: Vec<Mutex<Fault>>,
    /// Whether the account advertises per-partition automatic failover
    /// (`enablePerPartitionFailoverBehavior`), which the SDKs act on.
    per_partition_failover: AtomicBool,
    /// Regions whose replication is paused: the LSN each container's log had reached then
    /// (by container `_rid`).
    paused: Vec<Mutex<Option<HashMap<String, u64>>>>,
}

/// A region as the account lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    pub name: String,
    pub database_account_endpoint: String,
}

/// The account's `writableLocations` and `readableLocations`.
#[derive(Debug, Clone, Default)]
pub struct Locations {
    pub writable: Vec<Location>,
    pub readable: Vec<Location>,
}

/// One region as the control endpoint shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegionView {
    pub name: String,
    pub port: u16,
    pub writable: bool,
    pub fault: Fault,
}

impl Regions {
    pub fn new(cfg: &RegionsConfig) -> Self {
        let names = if cfg.names.is_empty() {
            vec![DEFAULT_REGION.to_string()]
        } else {
            cfg.names.clone()
        };
        Self {
            inner: Arc::new(Inner {
                multi_write: cfg.multi_write,
                ports: names.iter().map(|_| AtomicU16::new(0)).collect(),
                faults: names.iter().map(|_| Mutex::new(Fault::default())).collect(),
                write: AtomicUsize::new(0),
                per_partition_failover: AtomicBool::new(cfg.per_partition_failover),
                paused: names.iter().map(|_| Mutex::new(None)).collect(),
                slugs: cfg.by_host.then(|| names.iter().map(|n| slug(n)).collect()),
                names,
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.inner.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.names.is_empty()
    }

    /// Whether regions are reached by host name (`--region-hosts`).
    pub fn by_host(&self) -> bool {
        self.inner.slugs.is_some()
    }

    pub fn multi_write(&self) -> bool {
        self.inner.multi_write
    }

    /// Records the port region `i` listens on.
    pub fn set_port(&self, i: usize, port: u16) {
        if let Some(p) = self.inner.ports.get(i) {
            p.store(port, Ordering::Relaxed);
        }
    }

    fn port(&self, i: usize) -> u16 {
        self.inner
            .ports
            .get(i)
            .map_or(0, |p| p.load(Ordering::Relaxed))
    }

    fn index(&self, name: &str) -> Result<usize, CosmosError> {
        self.inner
            .names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                CosmosError::not_found(format!(
                    "The account has no region '{name}'; its regions are {}.",
                    self.inner.names.join(", ")
                ))
            })
    }

    pub fn writable(&self, i: usize) -> bool {
        self.inner.multi_write || i == self.inner.write.load(Ordering::Relaxed)
    }

    fn fault(&self, i: usize) -> Fault {
        self.inner
            .faults
            .get(i)
            .and_then(|f| f.lock().ok().map(|f| *f))
            .unwrap_or_default()
    }

    /// The regions in failover priority (the write region first), each with its endpoint as
    /// reached through `endpoint` (`scheme://host:port/`, as the client addressed region
    /// `reached`): the account's writable and readable locations. The client's port may not
    /// be ours (a load balancer, a port mapping, another strata process forwarding to this
    /// one): each region keeps the same offset from it, so one region is named exactly as the
    /// client reached it.
    pub fn locations(&self, endpoint: &str, reached: usize) -> Locations {
        let write = self.inner.write.load(Ordering::Relaxed);
        let order = std::iter::once(write).chain((0..self.len()).filter(|i| *i != write));
        let offset = port_of(endpoint).map(|p| i32::from(p) - i32::from(self.port(reached)));
        let mut out = Locations::default();
        for i in order {
            let port = match offset {
                Some(d) if self.port(i) != 0 && self.port(reached) != 0 => {
                    u16::try_from(i32::from(self.port(i)) + d).unwrap_or(self.port(i))
                }
                _ => self.port(i),
            };
            let location = Location {
                name: self.inner.names[i].clone(),
                database_account_endpoint: self
                    .host_endpoint(endpoint, i)
                    .unwrap_or_else(|| with_port(endpoint, port)),
            };
            if self.writable(i) {
                out.writable.push(location.clone());
            }
            out.readable.push(location);
        }
        out
    }

    /// The region `host` (`name[:port]`) names under `--region-hosts`: its first label is
    /// `<account>-<region>`, the region's name lowercased without spaces, as the SDKs'
    /// `LocationCache.GetLocationalEndpoint` makes a regional endpoint of the account's
    /// (`contoso.documents.azure.com` → `contoso-westus.documents.azure.com`). `None` for
    /// any other host, or without the flag: the port the request reached decides.
    pub fn region_of_host(&self, host: &str) -> Option<usize> {
        let slugs = self.inner.slugs.as_ref()?;
        let label = first_label(host)?;
        let label = label.as_bytes();
        slugs.iter().position(|s| {
            let cut = label.len().saturating_sub(s.len() + 1);
            cut > 0 && label[cut] == b'-' && label[cut + 1..].eq_ignore_ascii_case(s.as_bytes())
        })
    }

    /// Region `i`'s endpoint by host name, as reached through `endpoint`: its first label's
    /// account part (less any region's suffix) and `-<region>`, on the port it reached.
    /// `None` without `--region-hosts`, or when the client used an address.
    fn host_endpoint(&self, endpoint: &str, i: usize) -> Option<String> {
        let slugs = self.inner.slugs.as_ref()?;
        let (scheme, rest) = endpoint.split_once("://")?;
        let authority = rest.trim_end_matches('/');
        let label = first_label(authority)?;
        let account = match self.region_of_host(authority) {
            Some(r) => &label[..label.len() - slugs[r].len() - 1],
            None => label,
        };
        let rest = &authority[label.len()..];
        Some(format!("{scheme}://{account}-{}{rest}/", slugs[i]))
    }

    /// Every region with its port, write role and fault.
    pub fn view(&self) -> Vec<RegionView> {
        (0..self.len())
            .map(|i| RegionView {
                name: self.inner.names[i].clone(),
                port: self.port(i),
                writable: self.writable(i),
                fault: self.fault(i),
            })
            .collect()
    }

    /// Sets (or with the default, clears) a region's fault.
    pub fn set_fault(&self, name: &str, fault: Fault) -> Result<(), CosmosError> {
        fault.check()?;
        let i = self.index(name)?;
        if let Ok(mut f) = self.inner.faults[i].lock() {
            *f = fault;
        }
        tracing::info!(region = %self.inner.names[i], ?fault, "region fault set");
        Ok(())
    }

    /// Makes `name` the write region of a single-write account (a manual failover).
    pub fn fail_over(&self, name: &str) -> Result<(), CosmosError> {
        if self.inner.multi_write {
            return Err(CosmosError::bad_request(
                "Every region of a multi-write account takes writes; there is no write region to move.",
            ));
        }
        let i = self.index(name)?;
        self.inner.write.store(i, Ordering::Relaxed);
        tracing::info!(region = %self.inner.names[i], "write region moved");
        Ok(())
    }

    /// Turns the account's per-partition automatic failover on or off.
    pub fn set_per_partition_failover(&self, on: bool) {
        self.inner
            .per_partition_failover
            .store(on, Ordering::Relaxed);
    }

    /// Whether the account has per-partition automatic failover: it advertises
    /// `enablePerPartitionFailoverBehavior`, and while its write region fails writes a
    /// single-write account's other regions take the writes an SDK moves to them rather than
    /// refusing them 403/3 (one store serves every region, so the write is the same wherever
    /// it lands; see [`Regions::failed_over`]).
    pub fn per_partition_failover(&self) -> bool {
        self.inner.per_partition_failover.load(Ordering::Relaxed)
    }

    /// Pauses replication into region `name`: from now on it has seen each container only up
    /// to `seen` (the LSN of each container's log now; containers created later, nothing).
    /// Returns the region's name as configured.
    pub fn pause_replication(
        &self,
        name: &str,
        seen: HashMap<String, u64>,
    ) -> Result<String, CosmosError> {
        let i = self.index(name)?;
        if let Ok(mut p) = self.inner.paused[i].lock() {
            // Pausing twice keeps the first point: the region has seen no more since.
            p.get_or_insert(seen);
        }
        tracing::info!(region = %self.inner.names[i], "replication paused");
        Ok(self.inner.names[i].clone())
    }

    /// Resumes replication into region `name`: it catches up at once.
    pub fn resume_replication(&self, name: &str) -> Result<String, CosmosError> {
        let i = self.index(name)?;
        if let Ok(mut p) = self.inner.paused[i].lock() {
            *p = None;
        }
        tracing::info!(region = %self.inner.names[i], "replication resumed");
        Ok(self.inner.names[i].clone())
    }

    /// A read in region `i` of container `rid` with session token `token`: 404/1002
    /// (ReadSessionNotAvailable) when the region's replication is paused behind the session,
    /// as a lagging replica answers; the SDKs then retry in the write region. A region that
    /// takes writes has seen its own writes, so its reads always pass.
    pub fn check_session(
        &self,
        i: usize,
        rid: &str,
        token: Option<&str>,
    ) -> Result<(), CosmosError> {
        let Some(token) = token else { return Ok(()) };
        if self.writable(i) {
            return Ok(());
        }
        let Some(Ok(paused)) = self.inner.paused.get(i).map(|p| p.lock()) else {
            return Ok(());
        };
        let Some(seen) = paused.as_ref() else {
            return Ok(());
        };
        let seen = seen.get(rid).copied().unwrap_or(0);
        match session_lsn(token) {
            Some(lsn) if lsn > seen => Err(CosmosError::new(
                axum::http::StatusCode::NOT_FOUND,
                "NotFound",
                format!(
                    "The read session is not available in region '{}': its replication is paused at LSN {seen}, behind the session's {lsn}.",
                    self.inner.names[i]
                ),
            )
            .with_sub_status(READ_SESSION_NOT_AVAILABLE)),
            _ => Ok(()),
        }
    }

    /// Applies region `i`'s fault and write role to a request before it is served.
    pub async fn gate(&self, i: usize, write: bool) -> Result<(), CosmosError> {
        let fault = self.fault(i);
        if fault.latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(fault.latency_ms)).await;
        }
        let name = self.inner.names.get(i).map_or("", String::as_str);
        match fault.kind {
            FaultKind::Unavailable => {
                return Err(CosmosError::service_unavailable(format!(
                    "The region '{name}' is unavailable (a fault set through /_strata/regions)."
                )))
            }
            FaultKind::Timeout => {
                tokio::time::sleep(Duration::from_millis(fault.hold_ms)).await;
                return Err(CosmosError::request_timeout(format!(
                    "The region '{name}' did not answer in time (a fault set through /_strata/regions)."
                )));
            }
            FaultKind::WriteForbidden if write => return Err(write_forbidden(name)),
            _ => {}
        }
        if write && !self.writable(i) && !self.failed_over() {
            return Err(write_forbidden(name));
        }
        Ok(())
    }

    /// Whether the partitions of a single-write account with per-partition automatic failover
    /// have failed over: its write region fails writes (a fault that makes it unavailable,
    /// time out or refuse writes), so the service would move each partition's writes to the
    /// next region. Until then a read region refuses writes 403/3, as the service's do for a
    /// partition that has not failed over — the Python SDK's failover tests expect exactly
    /// that of the region their injected errors sent a write to.
    fn failed_over(&self) -> bool {
        let w = self.inner.write.load(Ordering::Relaxed);
        self.per_partition_failover()
            && matches!(
                self.fault(w).kind,
                FaultKind::Unavailable | FaultKind::Timeout | FaultKind::WriteForbidden
            )
    }
}

fn write_forbidden(region: &str) -> CosmosError {
    CosmosError::forbidden(format!(
        "The requested operation cannot be performed at this region: '{region}' does not take writes. Send writes to the account's write region (its writableLocations)."
    ))
    .with_sub_status(WRITE_FORBIDDEN)
}

/// A region's name as the SDKs spell it in a host name (`_normalize_region_name`:
/// lowercased, spaces removed): "West US" → `westus`.
fn slug(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The first DNS label of `host[:port]`; `None` for an IP address.
fn first_label(host: &str) -> Option<&str> {
    let name = match host.rfind(':') {
        Some(c) if !host.contains(']') => &host[..c],
        _ => host,
    };
    if name.starts_with('[') || name.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    name.split('.').next().filter(|l| !l.is_empty())
}

/// The explicit port of `scheme://host:port/`, if any.
fn port_of(endpoint: &str) -> Option<u16> {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    match authority.rfind(':') {
        Some(c) if !authority[c..].contains(']') => authority[c + 1..].parse().ok(),
        _ => None,
    }
}

/// `endpoint` (`scheme://host[:port]/`) with its port replaced by `port` (unchanged if 0).
fn with_port(endpoint: &str, port: u16) -> String {
    if port == 0 {
        return endpoint.to_string();
    }
    let (scheme, rest) = endpoint.split_once("://").unwrap_or(("http", endpoint));
    let authority = rest.trim_end_matches('/');
    // An IPv6 literal keeps its brackets; a port follows the last colon outside them.
    let host = match authority.rfind(':') {
        Some(c) if !authority[c..].contains(']') => &authority[..c],
        _ => authority,
    };
    format!("{scheme}://{host}:{port}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Regions {
        let r = Regions::new(&RegionsConfig::parse("West US, East US", false).unwrap());
        r.set_port(0, 9000);
        r.set_port(1, 9001);
        r
    }

    #[test]
    fn a_paused_read_region_refuses_sessions_it_has_not_seen() {
        let r = two();
        let seen = HashMap::from([("c1".to_string(), 10)]);
        assert_eq!(r.pause_replication("east us", seen).unwrap(), "East US");
        assert_eq!(session_lsn("0:-1#12,3:-1#7"), Some(12));
        assert!(r.check_session(1, "c1", Some("0:-1#10")).is_ok());
        let e = r.check_session(1, "c1", Some("0:-1#11")).unwrap_err();
        assert_eq!((e.status.as_u16(), e.sub_status), (404, Some(1002)));
        // A container created since the pause: the region has seen none of it.
        assert!(r.check_session(1, "c2", Some("0:-1#1")).is_err());
        // The write region has seen its own writes; no token asks for nothing.
        assert!(r.check_session(0, "c1", Some("0:-1#99")).is_ok());
        assert!(r.check_session(1, "c1", None).is_ok());
        r.resume_replication("East US").unwrap();
        assert!(r.check_session(1, "c1", Some("0:-1#99")).is_ok());
        assert!(r.pause_replication("Mars", HashMap::new()).is_err());
    }

    #[test]
    fn names_parse_once_each() {
        assert!(RegionsConfig::parse(" , ", false).is_err());
        assert!(RegionsConfig::parse("West US,west us", false).is_err());
        assert_eq!(
            RegionsConfig::parse("A,B", true).unwrap().names,
            vec!["A", "B"]
        );
    }

    #[test]
    fn endpoints_take_each_regions_port() {
        assert_eq!(
            with_port("https://127.0.0.1:8081/", 8082),
            "https://127.0.0.1:8082/"
        );
        assert_eq!(with_port("http://[::1]:8081/", 9), "http://[::1]:9/");
        assert_eq!(with_port("http://[::1]/", 9), "http://[::1]:9/");
        assert_eq!(with_port("http://host/", 0), "http://host/");
    }

    /// As the SDKs' `LocationCache.GetLocationalEndpoint` names them.
    #[test]
    fn regions_by_host_name() {
        let cfg = RegionsConfig {
            by_host: true,
            ..RegionsConfig::parse("West US,East US,North Europe", true).unwrap()
        };
        let r = Regions::new(&cfg);
        assert_eq!(r.region_of_host("localhost-eastus:8081"), Some(1));
        assert_eq!(r.region_of_host("LOCALHOST-NorthEurope"), Some(2));
        assert_eq!(
            r.region_of_host("contoso-westus.documents.azure.com"),
            Some(0)
        );
        for other in [
            "localhost:8081",
            "eastus:8081",
            "-eastus",
            "127.0.0.1:8081",
            "[::1]:8081",
        ] {
            assert_eq!(r.region_of_host(other), None, "{other}");
        }
        // Advertised from the client's host name, whichever region it reached, on its port.
        for reached in ["https://localhost:8081/", "https://localhost-eastus:8081/"] {
            let names: Vec<String> = r
                .locations(reached, 0)
                .readable
                .into_iter()
                .map(|l| l.database_account_endpoint)
                .collect();
            assert_eq!(
                names,
                [
                    "https://localhost-westus:8081/",
                    "https://localhost-eastus:8081/",
                    "https://localhost-northeurope:8081/"
                ]
            );
        }
        assert_eq!(
            cfg.host_names("localhost"),
            [
                "localhost-westus",
                "localhost-eastus",
                "localhost-northeurope"
            ]
        );
        assert!(cfg.host_names("127.0.0.1").is_empty());
        // An address is not a name: regions keep their ports.
        let l = r.locations("https://127.0.0.1:8081/", 0);
        assert_eq!(
            l.readable[0].database_account_endpoint,
            "https://127.0.0.1:8081/"
        );
        assert_eq!(two().region_of_host("localhost-eastus:9000"), None);
    }

    #[test]
    fn a_failover_moves_the_write_region_first() {
        let r = two();
        let l = r.locations("http://localhost:9001/", 1);
        assert_eq!(
            l.writable,
            vec![Location {
                name: "West US".into(),
                database_account_endpoint: "http://localhost:9000/".into()
            }]
        );
        assert_eq!(l.readable.len(), 2);
        r.fail_over("east us").unwrap();
        let l = r.locations("http://localhost:9001/", 1);
        assert_eq!(l.writable[0].name, "East US");
        // Reached through another port (a balancer, a forwarding process): same offsets.
        let l = r.locations("http://localhost:18001/", 1);
        assert_eq!(
            l.readable[0].database_account_endpoint,
            "http://localhost:18001/"
        );
        assert_eq!(
            l.readable[1].database_account_endpoint,
            "http://localhost:18000/"
        );
        assert_eq!(l.readable[0].name, "East US");
        assert!(r.fail_over("Mars").is_err());
    }

    #[tokio::test]
    async fn faults_and_write_roles_answer_as_the_service() {
        let r = two();
        assert!(r.gate(0, true).await.is_ok());
        let e = r.gate(1, true).await.err().unwrap();
        assert_eq!((e.status.as_u16(), e.sub_status), (403, Some(3)));
        assert!(r.gate(1, false).await.is_ok());
        r.set_fault(
            "West US",
            Fault {
                kind: FaultKind::Unavailable,
                ..Fault::default()
            },
        )
        .unwrap();
        assert_eq!(r.gate(0, false).await.err().unwrap().status.as_u16(), 503);
        r.set_fault(
            "West US",
            Fault {
                kind: FaultKind::Timeout,
                hold_ms: 1,
                latency_ms: 1,
            },
        )
        .unwrap();
        assert_eq!(r.gate(0, false).await.err().unwrap().status.as_u16(), 408);
        let too_long = Fault {
            latency_ms: MAX_DELAY_MS + 1,
            ..Fault::default()
        };
        assert!(r.set_fault("West US", too_long).is_err());
        let multi = Regions::new(&RegionsConfig::parse("A,B", true).unwrap());
        assert!(multi.gate(1, true).await.is_ok());
        assert!(multi.fail_over("A").is_err());
    }
}
