//! Master-key request signing, exactly as the official SDKs do it.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Signs requests with the account key.
#[derive(Clone)]
pub(crate) struct Signer {
    key: Vec<u8>,
}

impl Signer {
    pub(crate) fn new(key_base64: &str) -> Result<Self, crate::Error> {
        let key = base64::engine::general_purpose::STANDARD
            .decode(key_base64.trim())
            .map_err(|e| {
                crate::Error::invalid(format!("the account key is not valid base64: {e}"))
            })?;
        Ok(Self { key })
    }

    /// The `authorization` header for a request on `path` (as sent, percent-encoded).
    pub(crate) fn authorization(&self, verb: &str, path: &str, date: &str) -> String {
        let (rtype, link) = scope(path);
        let text = format!(
            "{}\n{}\n{}\n{}\n\n",
            verb.to_lowercase(),
            rtype.to_lowercase(),
            link,
            date.to_lowercase()
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(text.as_bytes());
        let sig = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        percent_encoding::utf8_percent_encode(
            &format!("type=master&ver=1.0&sig={sig}"),
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string()
    }
}

/// Resource type and link of a path: odd segment counts are feeds, even ones resources.
fn scope(path: &str) -> (String, String) {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    if let [coll @ .., op, kind] = segs.as_slice()
        && op == "operations"
        && kind == "partitionkeydelete"
    {
        return ("colls".into(), coll.join("/"));
    }
    match segs.len() {
        0 => (String::new(), String::new()),
        n if n % 2 == 1 => (segs[n - 1].clone(), segs[..n - 1].join("/")),
        n => (segs[n - 2].clone(), segs.join("/")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_vector() {
        let s = Signer::new(crate::EMULATOR_KEY).unwrap();
        let auth = s.authorization(
            "GET",
            "/dbs/db1/colls/hpk/docs/1",
            "Tue, 01 Oct 2024 12:00:00 GMT",
        );
        let decoded = percent_encoding::percent_decode_str(&auth)
            .decode_utf8()
            .unwrap();
        assert_eq!(
            decoded,
            "type=master&ver=1.0&sig=OHLbsr6bLJPTYji+rB+RUiPjLCBIJQq+zRS7IlaU9U0="
        );
        assert_eq!(
            scope("/dbs/db1/colls/hpk/docs"),
            ("docs".into(), "dbs/db1/colls/hpk".into())
        );
        assert_eq!(
            scope("/dbs/d/colls/c/docs/a%20b"),
            ("docs".into(), "dbs/d/colls/c/docs/a b".into())
        );
    }
}
