//! The parts of the Cosmos DB REST protocol that clients and the server must agree on, written
//! once: master-key signing (docs/PROTOCOL.md 2.2), which resource a signature covers, the
//! well-known emulator key, header names, and strata's query-route header. The server, the
//! SDK, the tests' client and the bench client all use these, so they cannot drift apart.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::borrow::{Borrow, Cow};

/// The well-known key of the Cosmos DB emulator (public; not a secret).
pub const EMULATOR_KEY: &str =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

/// The REST API version the official SDKs send in `x-ms-version`.
pub const API_VERSION: &str = "2020-07-15";

/// The properties the service stamps on every item and a client never sets: a write drops
/// what the client sent under these names, the store writes its own, an export leaves them
/// out. `_lsn` appears on change feed items.
pub const SYSTEM_PROPERTIES: [&str; 6] = ["_rid", "_self", "_etag", "_ts", "_attachments", "_lsn"];

/// Header names, written once: the server and the SDK spell no header name themselves.
pub mod header {
    pub const AUTHORIZATION: &str = "authorization";
    pub const DATE: &str = "x-ms-date";
    pub const VERSION: &str = "x-ms-version";
    pub const PARTITION_KEY: &str = "x-ms-documentdb-partitionkey";
    pub const CONTINUATION: &str = "x-ms-continuation";
    pub const MAX_ITEM_COUNT: &str = "x-ms-max-item-count";
    pub const IS_QUERY: &str = "x-ms-documentdb-isquery";
    pub const REQUEST_CHARGE: &str = "x-ms-request-charge";
    pub const RETRY_AFTER_MS: &str = "x-ms-retry-after-ms";
    pub const SUB_STATUS: &str = "x-ms-substatus";
    pub const SESSION_TOKEN: &str = "x-ms-session-token";
    /// The body formats a client accepts in answers (`JsonText`, `CosmosBinary`).
    pub const SUPPORTED_SERIALIZATION_FORMATS: &str = "x-ms-cosmos-supported-serialization-formats";
    // Every other header either side reads or writes, by name.
    pub const ACTIVITY_ID: &str = "x-ms-activity-id";
    pub const ALT_CONTENT_PATH: &str = "x-ms-alt-content-path";
    pub const BATCH_ATOMIC: &str = "x-ms-cosmos-batch-atomic";
    pub const BATCH_CONTINUE_ON_ERROR: &str = "x-ms-cosmos-batch-continue-on-error";
    pub const CHANGEFEED_WIRE_FORMAT_VERSION: &str = "x-ms-cosmos-changefeed-wire-format-version";
    pub const CONTENT_PATH: &str = "x-ms-content-path";
    pub const CONTENT_TYPE: &str = "content-type";
    pub const DATABASEACCOUNT_CONSUMED_MB: &str = "x-ms-databaseaccount-consumed-mb";
    pub const DATABASEACCOUNT_PROVISIONED_MB: &str = "x-ms-databaseaccount-provisioned-mb";
    pub const DATABASEACCOUNT_RESERVED_MB: &str = "x-ms-databaseaccount-reserved-mb";
    pub const ENABLE_CROSS_PARTITION: &str = "x-ms-documentdb-query-enablecrosspartition";
    pub const ENABLE_SCAN: &str = "x-ms-documentdb-query-enable-scan";
    pub const END_EPK: &str = "x-ms-end-epk";
    pub const ETAG: &str = "etag";
    pub const EXPIRY_SECONDS: &str = "x-ms-documentdb-expiry-seconds";
    pub const EXPLORER_TOKEN: &str = "x-strata-explorer-token";
    pub const GATEWAYVERSION: &str = "x-ms-gatewayversion";
    pub const GLOBAL_COMMITTED_LSN: &str = "x-ms-global-committed-lsn";
    pub const IF_MATCH: &str = "if-match";
    pub const IF_NONE_MATCH: &str = "if-none-match";
    pub const INDEX_TRANSFORMATION_PROGRESS: &str =
        "x-ms-documentdb-collection-index-transformation-progress";
    pub const INDEX_UTILIZATION: &str = "x-ms-cosmos-index-utilization";
    pub const INTENDED_COLLECTION_RID: &str = "x-ms-cosmos-intended-collection-rid";
    pub const IS_BATCH_REQUEST: &str = "x-ms-cosmos-is-batch-request";
    pub const IS_PARTITION_KEY_DELETE_PENDING: &str = "x-ms-cosmos-is-partition-key-delete-pending";
    pub const IS_QUERY_PLAN_REQUEST: &str = "x-ms-cosmos-is-query-plan-request";
    pub const IS_UPSERT: &str = "x-ms-documentdb-is-upsert";
    pub const ITEM_COUNT: &str = "x-ms-item-count";
    pub const ITEM_LSN: &str = "x-ms-item-lsn";
    pub const LSN: &str = "lsn";
    pub const MAX_MEDIA_STORAGE_USAGE_MB: &str = "x-ms-max-media-storage-usage-mb";
    pub const MEDIA_STORAGE_USAGE_MB: &str = "x-ms-media-storage-usage-mb";
    pub const OFFER_AUTOPILOT_SETTINGS: &str = "x-ms-cosmos-offer-autopilot-settings";
    pub const OFFER_REPLACE_PENDING: &str = "x-ms-offer-replace-pending";
    pub const OFFER_THROUGHPUT: &str = "x-ms-offer-throughput";
    pub const PARTITION_KEY_RANGE_ID: &str = "x-ms-documentdb-partitionkeyrangeid";
    pub const POPULATE_INDEX_METRICS: &str = "x-ms-cosmos-populateindexmetrics";
    pub const POPULATE_QUERY_METRICS: &str = "x-ms-documentdb-populatequerymetrics";
    pub const POPULATE_PARTITION_STATISTICS: &str = "x-ms-documentdb-populatepartitionstatistics";
    pub const POPULATE_QUERY_ADVICE: &str = "x-ms-cosmos-populatequeryadvice";
    pub const POST_TRIGGER_INCLUDE: &str = "x-ms-documentdb-post-trigger-include";
    pub const PREFER: &str = "prefer";
    pub const PRIORITY_LEVEL: &str = "x-ms-cosmos-priority-level";
    pub const PRE_TRIGGER_INCLUDE: &str = "x-ms-documentdb-pre-trigger-include";
    pub const QUERY_ADVICE: &str = "x-ms-cosmos-query-advice";
    pub const QUERY_METRICS: &str = "x-ms-documentdb-query-metrics";
    pub const REQUEST_DURATION_MS: &str = "x-ms-request-duration-ms";
    pub const RESOURCE_QUOTA: &str = "x-ms-resource-quota";
    pub const RESOURCE_USAGE: &str = "x-ms-resource-usage";
    pub const SCHEMAVERSION: &str = "x-ms-schemaversion";
    pub const SCRIPT_ENABLE_LOGGING: &str = "x-ms-documentdb-script-enable-logging";
    pub const SCRIPT_LOG_RESULTS: &str = "x-ms-documentdb-script-log-results";
    pub const SERVICEVERSION: &str = "x-ms-serviceversion";
    pub const START_EPK: &str = "x-ms-start-epk";
    pub const THROUGHPUT_BUCKET: &str = "x-ms-cosmos-throughput-bucket";
    pub const SUPPORTED_QUERY_FEATURES: &str = "x-ms-cosmos-supported-query-features";

    /// strata's own: how a query page was routed (see [`super::QueryRoute`]).
    pub const QUERY_ROUTE: &str = "x-strata-query-route";
    /// strata's own: how far a global secondary index is behind its source, on its
    /// container's read: `changes=N;seconds=S`.
    pub const GSI_LAG: &str = "x-strata-gsi-lag";
    /// strata's own: `true` on a query asks for its plan in [`QUERY_PLAN`].
    pub const EXPLAIN: &str = "x-strata-explain";
    /// strata's own: the query's plan as an indented tree, one line per operator, with line
    /// breaks written `\n` (see [`super::unescape_plan`]).
    pub const QUERY_PLAN: &str = "x-strata-query-plan";
    /// Set on a request one strata process forwards to the process serving a shared store.
    pub const FORWARDED: &str = "x-strata-forwarded";
}

/// A decoded account key, kept as an HMAC state already keyed with it: every request is
/// signed or verified from a copy, without hashing the key again (two SHA-256 blocks saved
/// per signature).
#[derive(Clone)]
pub struct MasterKey(Hmac<Sha256>);

impl MasterKey {
    /// Decodes a base64 account key.
    pub fn from_base64(key: &str) -> Result<Self, String> {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(key.trim())
            .map_err(|e| format!("the account key is not valid base64: {e}"))?;
        Hmac::<Sha256>::new_from_slice(&raw)
            .map(MasterKey)
            .map_err(|e| format!("the account key cannot key HMAC-SHA256: {e}"))
    }

    /// Whether `other` (a base64 account key) is this key, compared in constant time (through
    /// the tags both give one message). An emulator's Entra ID token carries the account key
    /// as its signature.
    pub fn is_key(&self, other: &str) -> bool {
        const PROBE: &str = "strata: the same account key?";
        match MasterKey::from_base64(other) {
            Ok(o) => {
                let tag = o.mac(PROBE).finalize().into_bytes();
                self.mac(PROBE).verify_slice(&tag).is_ok()
            }
            Err(_) => false,
        }
    }

    fn mac(&self, text: &str) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        mac.update(text.as_bytes());
        mac
    }

    /// The signature of a request, as the SDKs compute it.
    pub fn sign(&self, verb: &str, scope: &AuthScope, x_ms_date: &str, date: &str) -> Vec<u8> {
        self.mac(&string_to_sign(verb, scope, x_ms_date, date))
            .finalize()
            .into_bytes()
            .to_vec()
    }

    /// The full `authorization` header value (URL-encoded) for a request.
    pub fn authorization(&self, verb: &str, scope: &AuthScope, x_ms_date: &str) -> String {
        let sig =
            base64::engine::general_purpose::STANDARD.encode(self.sign(verb, scope, x_ms_date, ""));
        percent_encoding::utf8_percent_encode(
            &format!("type=master&ver=1.0&sig={sig}"),
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string()
    }

    /// Whether `sig` signs this request for `scope`, or for one of the other spellings the
    /// SDKs use for the same resource ([`AuthScope::alternates`]). Constant-time comparison.
    pub fn verifies(
        &self,
        verb: &str,
        scope: &AuthScope,
        x_ms_date: &str,
        date: &str,
        sig: &[u8],
    ) -> bool {
        let one = |s: &AuthScope| {
            self.mac(&string_to_sign(verb, s, x_ms_date, date))
                .verify_slice(sig)
                .is_ok()
        };
        one(scope) || scope.alternates().iter().any(one)
    }
}

/// The text the signature covers: built in one buffer (every request is verified, and the
/// lowercased copies of its parts were allocations of their own).
pub fn string_to_sign(verb: &str, scope: &AuthScope, x_ms_date: &str, date: &str) -> String {
    let link = &scope.resource_link;
    let mut out = String::with_capacity(
        verb.len() + scope.resource_type.len() + link.len() + x_ms_date.len() + date.len() + 5,
    );
    push_lowercase(&mut out, verb);
    out.push('\n');
    push_lowercase(&mut out, &scope.resource_type);
    out.push('\n');
    out.push_str(link);
    out.push('\n');
    push_lowercase(&mut out, x_ms_date);
    out.push('\n');
    push_lowercase(&mut out, date);
    out.push('\n');
    out
}

/// Appends `s` lowercased as `str::to_lowercase` does (ASCII, what requests carry, in place).
fn push_lowercase(out: &mut String, s: &str) {
    if s.is_ascii() {
        let start = out.len();
        out.push_str(s);
        out[start..].make_ascii_lowercase();
    } else {
        out.push_str(&s.to_lowercase());
    }
}

/// What the master-key signature covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthScope {
    pub resource_type: String,
    pub resource_link: String,
    /// Other spellings the official SDKs sign for this very resource. Name-based links have
    /// none: names are case-sensitive, so `dbs/QA` and `dbs/qa` are different resources.
    pub signed_as: SignedAs,
}

/// Which other spellings of a scope the SDKs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignedAs {
    /// Only the link exactly as the path has it.
    #[default]
    Exact,
    /// A rid-based link (offers, and `_self` links such as `dbs/AQAAQQ==/colls/…`): the SDKs
    /// sign it lower-cased, or as the resource's own rid alone (`offers/BAAA` is signed as
    /// `baaa`). Rids are case-insensitive.
    RidLink,
    /// Delete-by-partition-key, signed on the container as `colls` (Python) or
    /// `partitionkey` (other SDKs).
    PartitionKeyDelete,
}

impl AuthScope {
    /// An exact scope.
    pub fn new(resource_type: impl Into<String>, resource_link: impl Into<String>) -> Self {
        AuthScope {
            resource_type: resource_type.into(),
            resource_link: resource_link.into(),
            signed_as: SignedAs::Exact,
        }
    }

    /// The other spellings that also verify (see [`SignedAs`]).
    pub fn alternates(&self) -> Vec<AuthScope> {
        match self.signed_as {
            SignedAs::Exact => Vec::new(),
            SignedAs::PartitionKeyDelete => {
                vec![AuthScope::new("partitionkey", self.resource_link.clone())]
            }
            SignedAs::RidLink => {
                let lowered = self.resource_link.to_lowercase();
                let rid = lowered.rsplit('/').next().unwrap_or("").to_string();
                [lowered, rid]
                    .into_iter()
                    .filter(|l| *l != self.resource_link)
                    .map(|l| AuthScope::new(self.resource_type.clone(), l))
                    .collect()
            }
        }
    }
}

/// Splits and percent-decodes a request path; empty segments (trailing slashes) are dropped.
/// The error names the segment that is not valid percent-encoded UTF-8. A segment without
/// escapes is borrowed from `path` (a string per segment was 1% of a point read's CPU).
pub fn path_segments(path: &str) -> Result<Vec<Cow<'_, str>>, String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            // Most segments have nothing to decode: found with one search, not by the
            // decoder's byte-by-byte walk.
            if !s.contains('%') {
                return Ok(Cow::Borrowed(s));
            }
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map_err(|_| s.to_string())
        })
        .collect()
}

/// The resource type and link a signature covers (docs/PROTOCOL.md 2.2): an odd number of segments
/// is a feed (type = last segment, link = the rest); an even number is one resource.
pub fn auth_scope<S: Borrow<str>>(segs: &[S]) -> AuthScope {
    // Delete-by-partition-key is signed on the container.
    if let [coll @ .., op, kind] = segs {
        if op.borrow() == "operations" && kind.borrow() == "partitionkeydelete" {
            return AuthScope {
                signed_as: SignedAs::PartitionKeyDelete,
                ..AuthScope::new("colls", coll.join("/"))
            };
        }
    }
    let scope = match segs.len() {
        0 => AuthScope::new("", ""),
        n if n % 2 == 1 => AuthScope::new(segs[n - 1].borrow(), segs[..n - 1].join("/")),
        n => AuthScope::new(segs[n - 2].borrow(), segs.join("/")),
    };
    if matches!(segs, [first, _] if first.borrow() == "offers") || is_rid_based(segs) {
        return AuthScope {
            signed_as: SignedAs::RidLink,
            ..scope
        };
    }
    scope
}

/// The scope of a request path as a client sends it (percent-encoded); a path that is not
/// valid percent-encoded UTF-8 gets the account scope, which the server will refuse.
pub fn auth_scope_of_path(path: &str) -> AuthScope {
    auth_scope(&path_segments(path).unwrap_or_default())
}

/// Whether a `dbs/...` path addresses resources by rid, by the official SDKs' own rule
/// (`IsNameBased` in azure-cosmos): the database segment is 8 characters of valid base64, the
/// length of a database rid. Such links are signed lower-cased; any other is a name.
pub fn is_rid_based<S: Borrow<str>>(segs: &[S]) -> bool {
    match segs {
        [first, db, ..] if first.borrow().eq_ignore_ascii_case("dbs") && db.borrow().len() == 8 => {
            base64::engine::general_purpose::STANDARD
                .decode(db.borrow())
                .is_ok()
        }
        _ => false,
    }
}

/// A printed query plan as a header value: line breaks become `\n`, backslashes `\\`, and
/// anything outside printable ASCII `\u{…}` (header values are ASCII).
pub fn escape_plan(plan: &str) -> String {
    let mut out = String::with_capacity(plan.len());
    for ch in plan.trim_end().chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(ch),
            other => out.push_str(&format!("\\u{{{:x}}}", other as u32)),
        }
    }
    out
}

/// The plan text back from an `x-strata-query-plan` header value.
///
/// ```
/// use strata_query::protocol::{escape_plan, unescape_plan};
/// let plan = "Route: single (full partition key header); partitions [0]\n  Project: *\n";
/// assert_eq!(unescape_plan(&escape_plan(plan)), plan.trim_end());
/// ```
pub fn unescape_plan(header: &str) -> String {
    let mut out = String::with_capacity(header.len());
    let mut it = header.chars().peekable();
    while let Some(ch) = it.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('u') if it.peek() == Some(&'{') => {
                it.next();
                let hex: String = it.by_ref().take_while(|c| *c != '}').collect();
                out.extend(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// How strata routed a query page: the `x-strata-query-route` header, e.g.
/// `targeted; ranges=3,5; scanned=120`.
///
/// ```
/// let r = strata_query::protocol::QueryRoute::parse("targeted; ranges=3,5; scanned=120").unwrap();
/// assert_eq!(r.kind, "targeted");
/// assert_eq!(r.ranges, vec!["3", "5"]);
/// assert_eq!(r.scanned, 120);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryRoute {
    /// `single`, `targeted` or `fanout`.
    pub kind: String,
    /// Ids of the physical partitions (partition key ranges) visited.
    pub ranges: Vec<String>,
    /// Documents scanned for this page.
    pub scanned: u64,
}

impl QueryRoute {
    /// Parses the header; `None` if it is not one.
    ///
    /// ```
    /// assert!(strata_query::protocol::QueryRoute::parse("garbage").is_none());
    /// ```
    pub fn parse(h: &str) -> Option<Self> {
        let mut parts = h.split(';').map(str::trim);
        let kind = parts.next()?.to_string();
        if !matches!(kind.as_str(), "single" | "targeted" | "fanout") {
            return None;
        }
        let mut ranges = Vec::new();
        let mut scanned = 0;
        for p in parts {
            if let Some(r) = p.strip_prefix("ranges=") {
                ranges = r
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
            } else if let Some(s) = p.strip_prefix("scanned=") {
                scanned = s.parse().unwrap_or(0);
            }
        }
        Some(Self {
            kind,
            ranges,
            scanned,
        })
    }
}

impl std::fmt::Display for QueryRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; ranges={}; scanned={}",
            self.kind,
            self.ranges.join(","),
            self.scanned
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &str) -> Vec<String> {
        path_segments(p)
            .unwrap()
            .into_iter()
            .map(Cow::into_owned)
            .collect()
    }

    #[test]
    fn protocol_signature_vectors() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let date = "Tue, 01 Oct 2024 12:00:00 GMT";
        let b64 = |v: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(v);
        for (verb, path, want) in [
            (
                "GET",
                "/dbs/db1/colls/hpk/docs/1",
                "OHLbsr6bLJPTYji+rB+RUiPjLCBIJQq+zRS7IlaU9U0=",
            ),
            (
                "POST",
                "/dbs/db1/colls/hpk/docs",
                "lXLzoEXs2rKJkfcmDHlFl7pixD7YRFH9r801rutW0gE=",
            ),
            ("GET", "/", "TCpv7klme4e3gg7gFSCpnubeVH8DBNZoqM4ZACzc4DM="),
            (
                "GET",
                "/dbs/db1/colls/hpk/pkranges",
                "dCsodlwxXuM7MMoYBFk6KOZORB7V3uMpwuCztr1GSxM=",
            ),
            (
                "POST",
                "/dbs/db1/colls",
                "J8PTnjngDxunHOztDL3UDoiRUJqaE8nbFqiYmAXiGCQ=",
            ),
        ] {
            let scope = auth_scope_of_path(path);
            assert_eq!(b64(key.sign(verb, &scope, date, "")), want, "{verb} {path}");
            let sig = key.sign(verb, &scope, date, "");
            assert!(key.verifies(verb, &scope, date, "", &sig));
            assert!(!key.verifies("PUT", &scope, date, "", &sig));
        }
    }

    #[test]
    fn the_signed_text_lowercases_all_but_the_link() {
        let s = AuthScope::new("Docs", "dbs/DB/colls/C/docs/Ünï");
        assert_eq!(
            string_to_sign("GET", &s, "Tue, 01 Oct 2024 12:00:00 GMT", ""),
            "get\ndocs\ndbs/DB/colls/C/docs/Ünï\ntue, 01 oct 2024 12:00:00 gmt\n\n"
        );
        // Beyond ASCII, as `str::to_lowercase`.
        let odd = AuthScope::new("DÖCS", "x");
        assert_eq!(
            string_to_sign("PUT", &odd, "", "ΣΑΣ"),
            "put\ndöcs\nx\n\nσας\n"
        );
    }

    #[test]
    fn scopes_follow_the_protocol() {
        assert_eq!(
            auth_scope(&segs("/dbs/db1/colls/hpk/docs/1/")),
            AuthScope::new("docs", "dbs/db1/colls/hpk/docs/1")
        );
        assert_eq!(
            auth_scope(&segs("/dbs/db1/colls/hpk/docs")),
            AuthScope::new("docs", "dbs/db1/colls/hpk")
        );
        assert_eq!(auth_scope(&segs("/")).resource_type, "");
        assert_eq!(segs("/dbs/db1/colls/hpk/docs/a%20b%C3%BC/")[5], "a bü");
        assert!(path_segments("/dbs/%FF").is_err());
        // Names are exact; rid links (8-character base64 database segment) and offers are not.
        assert!(auth_scope(&segs("/dbs/QA")).alternates().is_empty());
        assert!(is_rid_based(&segs("/dbs/AQAAQQ==/colls/AQAAQYAAAAE=")));
        assert!(!is_rid_based(&segs("/dbs/my-db/colls/c")));
        // The SDK's rule, quirks included: "database" is 8 valid base64 characters, so the
        // SDK signs a path under it lower-cased, and strata accepts that spelling.
        assert!(is_rid_based(&segs("/dbs/database/colls/c")));
        let offer = auth_scope(&segs("/offers/BAAA"));
        assert!(offer
            .alternates()
            .contains(&AuthScope::new("offers", "baaa")));
    }

    #[test]
    fn route_header_round_trips() {
        let r = QueryRoute::parse("targeted; ranges=3,5; scanned=120").unwrap();
        assert_eq!(r.ranges, vec!["3", "5"]);
        assert_eq!(QueryRoute::parse(&r.to_string()), Some(r));
        assert_eq!(QueryRoute::parse("sideways"), None);
    }
}
