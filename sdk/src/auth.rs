//! Master-key request signing: the shared protocol code ([`strata_query::protocol`]), so the
//! SDK signs exactly as the server verifies.

use strata_query::protocol::{MasterKey, auth_scope_of_path};

/// Signs requests with the account key.
#[derive(Clone)]
pub(crate) struct Signer {
    key: MasterKey,
}

impl Signer {
    pub(crate) fn new(key_base64: &str) -> Result<Self, crate::Error> {
        let key = MasterKey::from_base64(key_base64).map_err(crate::Error::invalid)?;
        Ok(Self { key })
    }

    /// The `authorization` header for a request on `path` (as sent, percent-encoded).
    pub(crate) fn authorization(&self, verb: &str, path: &str, date: &str) -> String {
        self.key
            .authorization(verb, &auth_scope_of_path(path), date)
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
    }
}
