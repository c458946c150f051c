//! Account keys at rest: a copy job's record must keep the connection strings it copies with
//! (the job resumes after a restart), but never a key in clear. Each `AccountKey=` value is
//! sealed with XChaCha20-Poly1305 under a key derived from the server's own secret
//! (`token.key` in the data folder) and written as `AccountKey=sealed:<base64>`; only this
//! server can open it, and an altered record fails to open instead of yielding a wrong key.

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const PREFIX: &str = "sealed:";
const NONCE: usize = 24;

/// Seals and opens the account keys in connection strings.
#[derive(Clone)]
pub struct Sealer {
    cipher: XChaCha20Poly1305,
}

impl Sealer {
    /// A sealer under `key` (32 bytes, derived for this purpose only).
    pub fn new(key: [u8; 32]) -> Self {
        Self {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }

    /// `conn` with its `AccountKey` value sealed (other parts, and strings without a key, as
    /// they are).
    pub fn seal(&self, conn: &str) -> Result<String, String> {
        map_key(conn, |key| {
            if key.starts_with(PREFIX) {
                return Ok(key.to_string());
            }
            let mut nonce = [0u8; NONCE];
            getrandom::fill(&mut nonce).map_err(|e| format!("no randomness: {e}"))?;
            let sealed = self
                .cipher
                .encrypt(XNonce::from_slice(&nonce), key.as_bytes())
                .map_err(|_| "the account key could not be sealed".to_string())?;
            let blob = [&nonce[..], &sealed].concat();
            Ok(format!(
                "{PREFIX}{}",
                base64::engine::general_purpose::STANDARD.encode(blob)
            ))
        })
    }

    /// `conn` with a sealed `AccountKey` opened; a key in clear (a record written before keys
    /// were sealed) is left as it is.
    pub fn open(&self, conn: &str) -> Result<String, String> {
        map_key(conn, |key| {
            let Some(b64) = key.strip_prefix(PREFIX) else {
                return Ok(key.to_string());
            };
            let unreadable =
                || "its account key was sealed by another server secret, or altered".to_string();
            let blob = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| unreadable())?;
            if blob.len() <= NONCE {
                return Err(unreadable());
            }
            let (nonce, sealed) = blob.split_at(NONCE);
            let clear = self
                .cipher
                .decrypt(XNonce::from_slice(nonce), sealed)
                .map_err(|_| unreadable())?;
            String::from_utf8(clear).map_err(|_| unreadable())
        })
    }
}

/// `conn` with the value of its `AccountKey` part replaced by `f` of it.
fn map_key(conn: &str, f: impl Fn(&str) -> Result<String, String>) -> Result<String, String> {
    let mut parts = Vec::new();
    for part in conn.split(';') {
        match part.split_once('=') {
            Some((k, v)) if k.trim().eq_ignore_ascii_case("accountkey") => {
                parts.push(format!("{k}={}", f(v.trim())?));
            }
            _ => parts.push(part.to_string()),
        }
    }
    Ok(parts.join(";"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sealed_and_opened_only_by_their_server() {
        let conn = "AccountEndpoint=https://acct.example:443/;AccountKey=c2VjcmV0LWtleQ==;";
        let s = Sealer::new([7; 32]);
        let sealed = s.seal(conn).unwrap();
        assert!(!sealed.contains("c2VjcmV0LWtleQ=="), "{sealed}");
        assert!(sealed.starts_with("AccountEndpoint=https://acct.example:443/;AccountKey=sealed:"));
        assert_eq!(s.open(&sealed).unwrap(), conn);
        // Sealing twice gives other bytes (a fresh nonce), both open; sealing is idempotent.
        let again = s.seal(conn).unwrap();
        assert_ne!(again, sealed);
        assert_eq!(s.seal(&sealed).unwrap(), sealed);
        // Another server's secret, or an altered record, does not open.
        assert!(Sealer::new([8; 32]).open(&sealed).is_err());
        let mut bytes = sealed.clone().into_bytes();
        let n = bytes.len() - 6;
        bytes[n] = if bytes[n] == b'A' { b'B' } else { b'A' };
        assert!(s.open(&String::from_utf8(bytes).unwrap()).is_err());
        // Strings without a key, and keys in clear from older records, pass.
        assert_eq!(
            s.seal("http://127.0.0.1:8081/").unwrap(),
            "http://127.0.0.1:8081/"
        );
        assert_eq!(s.open(conn).unwrap(), conn);
    }
}
