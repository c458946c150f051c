//! The Data Explorer signed in with an Entra ID token. An account that refuses its keys
//! (`--disable-local-auth`) must not be reachable through the explorer's key-equivalent
//! secret, so there the page trades a token for a session of that principal instead: every
//! request the page makes is then the token's principal's, under its role assignments, as
//! the same token sent by an SDK would be — and the session ends when the token expires.

use crate::api::security::aad::{self, Identity};
use crate::api::security::auth::Keys;
use crate::error::CosmosError;
use std::collections::HashMap;
use std::sync::Mutex;

/// The most signed-in sessions kept at once; past it the one expiring first is dropped.
const MAX_SESSIONS: usize = 256;

/// Sessions by their secret: who, and until when (seconds since the epoch).
#[derive(Default)]
pub struct Sessions {
    by_secret: Mutex<HashMap<String, (Identity, i64)>>,
}

impl Sessions {
    /// Verifies `jwt` as an `type=aad` authorization would be and opens a session for its
    /// principal: the session's secret and the token's expiry.
    pub fn sign_in(
        &self,
        keys: &Keys,
        jwt: &str,
        now: i64,
    ) -> Result<(String, Identity, i64), CosmosError> {
        let account = aad::AccountKeys {
            read_write: &keys.read_write,
            read_only: keys.read_only.as_ref(),
            jwks: keys.entra.as_deref(),
            skew: aad::TOKEN_CLOCK_SKEW,
        };
        let identity = aad::verify(&account, jwt, now)?;
        let exp = aad::expiry(jwt).unwrap_or(now);
        let secret = crate::api::explorer::random_secret();
        if secret.is_empty() {
            return Err(CosmosError::unauthorized(
                "The Data Explorer cannot open a session: no randomness for its secret.",
            ));
        }
        let mut all = crate::store::container::lock(&self.by_secret);
        all.retain(|_, (_, until)| *until > now);
        if all.len() >= MAX_SESSIONS {
            let first = all
                .iter()
                .min_by_key(|(_, (_, until))| *until)
                .map(|(s, _)| s.clone());
            if let Some(s) = first {
                all.remove(&s);
            }
        }
        all.insert(secret.clone(), (identity.clone(), exp));
        Ok((secret, identity, exp))
    }

    /// The principal of a session secret, while its token is valid; `None` for an unknown
    /// secret.
    pub fn get(&self, secret: &str, now: i64) -> Option<Result<Identity, CosmosError>> {
        let mut all = crate::store::container::lock(&self.by_secret);
        let (identity, until) = all.get(secret)?.clone();
        if until <= now {
            all.remove(secret);
            return Some(Err(CosmosError::unauthorized(
                "The Data Explorer's Entra ID session ended with its token: sign in again with a fresh token.",
            )));
        }
        Some(Ok(identity))
    }
}
