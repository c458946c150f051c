//! Request authorization: master-key signing with the shared protocol code
//! ([`strata_query::protocol`]), so the SDK signs exactly as the server verifies; or resource
//! tokens, chosen per request by the resource they were issued for.

use strata_query::protocol::{MasterKey, auth_scope_of_path, path_segments};

/// Authorizes requests: with the account key, or with resource tokens.
#[derive(Clone)]
pub(crate) enum Signer {
    Key(MasterKey),
    /// (resource link without slashes at the ends, token), most specific link first.
    Tokens(Vec<(String, String)>),
}

fn trim_link(l: &str) -> String {
    l.trim_matches('/').to_string()
}

impl Signer {
    pub(crate) fn new(key_base64: &str) -> Result<Self, crate::Error> {
        let key = MasterKey::from_base64(key_base64).map_err(crate::Error::invalid)?;
        Ok(Signer::Key(key))
    }

    pub(crate) fn tokens(tokens: Vec<(String, String)>) -> Result<Self, crate::Error> {
        if tokens.is_empty() {
            return Err(crate::Error::invalid("no resource tokens were given"));
        }
        let mut t: Vec<(String, String)> = tokens
            .into_iter()
            .map(|(l, t)| (trim_link(&l), t))
            .collect();
        t.sort_by_key(|(link, _)| std::cmp::Reverse(link.len()));
        Ok(Signer::Tokens(t))
    }

    /// The `authorization` header for a request on `path` (as sent, percent-encoded).
    pub(crate) fn authorization(&self, verb: &str, path: &str, date: &str) -> String {
        match self {
            Signer::Key(key) => key.authorization(verb, &auth_scope_of_path(path), date),
            Signer::Tokens(tokens) => {
                let token = choose(tokens, path);
                percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
                    .to_string()
            }
        }
    }
}

/// The token for a request path: one issued for the path or an ancestor of it (the most
/// specific), else one issued for a descendant (reading a container's properties with a
/// document's token, as the SDKs do), else the first.
fn choose<'a>(tokens: &'a [(String, String)], path: &str) -> &'a str {
    let segs = path_segments(path).unwrap_or_default().join("/");
    let within = |link: &str| segs == link || segs.starts_with(&format!("{link}/"));
    let above = |link: &str| segs.is_empty() || link.starts_with(&format!("{segs}/"));
    tokens
        .iter()
        .find(|(l, _)| within(l))
        .or_else(|| tokens.iter().find(|(l, _)| above(l)))
        .or_else(|| tokens.first())
        .map(|(_, t)| t.as_str())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_chosen_by_resource() {
        let s = Signer::tokens(vec![
            ("dbs/app/colls/c".into(), "coll".into()),
            ("/dbs/app/colls/c/docs/d1/".into(), "doc".into()),
            ("dbs/app/colls/other".into(), "other".into()),
        ])
        .unwrap();
        let Signer::Tokens(t) = &s else { panic!() };
        assert_eq!(choose(t, "/dbs/app/colls/c/docs/d1"), "doc");
        assert_eq!(choose(t, "/dbs/app/colls/c/docs/d2"), "coll");
        assert_eq!(choose(t, "/dbs/app/colls/c/docs"), "coll");
        assert_eq!(choose(t, "/dbs/app/colls/other/docs"), "other");
        assert_eq!(choose(t, "/dbs/app"), "doc");
        assert_eq!(choose(t, "/"), "doc");
        assert!(Signer::tokens(vec![]).is_err());
    }

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
