//! The benchmark dataset: multi-tenant events keyed `/TenantId/UserId/SessionId`, with
//! Zipf-skewed tenant sizes. Item `i` is a pure function of `i`, so any item can be addressed
//! (read, updated) without keeping a list of what was loaded.

use serde_json::{json, Value};

pub struct Dataset {
    pub items: u64,
    pub item_size: usize,
    /// Cumulative Zipf weights over tenants.
    cdf: Vec<f64>,
}

pub const USERS_PER_TENANT: u64 = 50;
pub const SESSIONS_PER_USER: u64 = 8;

fn mix(x: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&x.to_le_bytes())
}

/// About `len` bytes of text drawn from a small vocabulary, different for every `seed`: it
/// compresses about as well as prose (to roughly half with LZ4), where a run of one letter —
/// what the padding was before — compresses to nothing and flattered every size on disk.
pub fn text(seed: u64, len: usize) -> String {
    const WORDS: [&str; 32] = [
        "order",
        "shipped",
        "customer",
        "payment",
        "invoice",
        "status",
        "pending",
        "review",
        "account",
        "update",
        "region",
        "north",
        "device",
        "sensor",
        "reading",
        "alert",
        "user",
        "session",
        "login",
        "checkout",
        "cart",
        "item",
        "price",
        "total",
        "discount",
        "coupon",
        "delivery",
        "address",
        "city",
        "warehouse",
        "stock",
        "return",
    ];
    let mut out = String::with_capacity(len + 12);
    let mut x = seed;
    while out.len() < len {
        x = mix(x);
        out.push_str(WORDS[(x % 32) as usize]);
        out.push(' ');
        // A number now and then, as records have.
        if x.is_multiple_of(7) {
            out.push_str(&(x % 10_000).to_string());
            out.push(' ');
        }
    }
    out.truncate(len);
    out
}

impl Dataset {
    pub fn new(items: u64, item_size: usize, tenants: usize) -> Self {
        let weights: Vec<f64> = (0..tenants)
            .map(|k| 1.0 / ((k + 1) as f64).powf(1.1))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Self {
            items,
            item_size,
            cdf,
        }
    }

    pub fn tenant(&self, i: u64) -> u64 {
        let u = (mix(i) >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1) as u64
    }

    /// (TenantId, UserId, SessionId) of item `i`.
    pub fn key(&self, i: u64) -> (String, String, String) {
        let t = self.tenant(i);
        let u = mix(i ^ 0x5555) % USERS_PER_TENANT;
        let s = mix(i ^ 0xaaaa) % SESSIONS_PER_USER;
        (format!("tenant{t:03}"), format!("user{u}"), format!("s{s}"))
    }

    pub fn pk_header(&self, i: u64) -> String {
        let (t, u, s) = self.key(i);
        json!([t, u, s]).to_string()
    }

    pub fn id(i: u64) -> String {
        format!("e{i}")
    }

    /// The document of item `i`, version `v`, padded to about `item_size` bytes.
    pub fn doc(&self, i: u64, v: u64) -> Value {
        let (t, u, s) = self.key(i);
        let base = 130 + t.len() + u.len() + s.len();
        let pad = self.item_size.saturating_sub(base);
        // `g` is shared by ten consecutive items: the indexing suite's selective lookup.
        json!({"id": Self::id(i), "TenantId": t, "UserId": u, "SessionId": s, "n": i, "g": i / 10, "v": v, "pad": text(i ^ v.rotate_left(32), pad)})
    }

    pub fn definition() -> Value {
        json!({"paths": ["/TenantId", "/UserId", "/SessionId"], "kind": "MultiHash", "version": 2})
    }
}
