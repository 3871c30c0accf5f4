//! JWT access tokens checked the way an OAuth 2.1 resource server must: an allowed asymmetric
//! algorithm (never `none`, never HMAC), a signature by a key of the issuer's JWKS, `iss`, `aud`
//! naming this resource, `exp` and `nbf` with a small leeway.

use crate::jwks::KeySet;
use crate::{invalid, Denial};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use sluice_config::OAuth;
use sluice_core::Principal;
use std::time::Duration;

/// Checks JWTs for one issuer and audience.
#[derive(Debug)]
pub struct JwtVerifier {
    issuer: String,
    audience: Vec<String>,
    algorithms: Vec<Algorithm>,
    leeway: u64,
    keys: KeySet,
}

/// Does `token` have the shape of a JWS compact serialisation (three dot-separated parts)?
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

impl JwtVerifier {
    /// A verifier for `cfg`; `resource` is the audience when `cfg.audience` is empty.
    pub fn new(cfg: &OAuth, resource: &str) -> JwtVerifier {
        JwtVerifier {
            issuer: cfg.issuer.clone(),
            audience: if cfg.audience.is_empty() {
                vec![resource.to_string()]
            } else {
                cfg.audience.clone()
            },
            algorithms: cfg
                .algorithms
                .iter()
                .filter_map(|a| a.parse().ok())
                .collect(),
            leeway: cfg.leeway_seconds,
            keys: KeySet::new(
                cfg.jwks.clone(),
                Duration::from_secs(cfg.jwks_cache_seconds),
            ),
        }
    }

    /// Check `token` and return the principal it names.
    pub async fn verify(&self, token: &str) -> Result<Principal, Denial> {
        self.verify_for(token, &self.audience).await
    }

    /// Check an OpenID Connect ID token issued to the client `client_id` in answer to a request
    /// that sent `nonce`: signature, `iss`, `aud` (the client), `exp`, and the `nonce`. Returns
    /// its `sub`.
    pub async fn verify_id_token(
        &self,
        token: &str,
        client_id: &str,
        nonce: &str,
    ) -> Result<String, Denial> {
        let p = self.verify_for(token, &[client_id.to_string()]).await?;
        if p.claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err(invalid("the ID token's nonce is not the one sent"));
        }
        p.claims
            .get("sub")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| invalid("the ID token has no sub"))
    }

    async fn verify_for(&self, token: &str, audience: &[String]) -> Result<Principal, Denial> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            invalid("malformed token: not a signed JWT, or an algorithm Sluice never accepts (none, HMAC)")
        })?;
        if !self.algorithms.contains(&header.alg) {
            return Err(invalid(format!(
                "the algorithm {:?} is not accepted",
                header.alg
            )));
        }
        let keys = self
            .keys
            .candidates(header.kid.as_deref())
            .await
            .map_err(|e| Denial {
                status: 503,
                error: Some("temporarily_unavailable"),
                description: e,
            })?;
        if keys.is_empty() {
            return Err(invalid(match &header.kid {
                Some(kid) => format!("no key {kid:?} in the issuer's key set"),
                None => "the issuer's key set is empty".to_string(),
            }));
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(audience);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let mut last = ErrorKind::InvalidSignature;
        for jwk in &keys {
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation) {
                Ok(data) => return Ok(principal(data.claims)),
                Err(e) => {
                    let kind = e.into_kind();
                    // Only a signature failure can be cured by another key.
                    if !matches!(
                        kind,
                        ErrorKind::InvalidSignature
                            | ErrorKind::InvalidKeyFormat
                            | ErrorKind::InvalidAlgorithm
                    ) {
                        return Err(invalid(describe(&kind)));
                    }
                    last = kind;
                }
            }
        }
        Err(invalid(describe(&last)))
    }
}

fn describe(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => "the token is not meant for this resource (aud)".into(),
        ErrorKind::InvalidIssuer => "the token comes from another issuer (iss)".into(),
        ErrorKind::InvalidSignature | ErrorKind::InvalidKeyFormat | ErrorKind::InvalidAlgorithm => {
            "the signature does not verify".into()
        }
        ErrorKind::MissingRequiredClaim(c) => format!("the token has no {c} claim"),
        ErrorKind::InvalidAlgorithmName => "unsupported algorithm".into(),
        other => format!("{other:?}"),
    }
}

/// The principal of verified claims: `sub` (else `client_id`), scopes from `scope` (space
/// separated) or `scp` (a list or a string).
fn principal(claims: Map<String, Value>) -> Principal {
    let id = ["sub", "client_id", "azp"]
        .iter()
        .find_map(|k| claims.get(*k).and_then(Value::as_str))
        .unwrap_or("unknown")
        .to_string();
    let mut scopes: Vec<String> = Vec::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(str::to_string)),
            Some(Value::Array(a)) => {
                scopes.extend(a.iter().filter_map(Value::as_str).map(str::to_string))
            }
            _ => {}
        }
    }
    Principal {
        id,
        kind: "jwt",
        scopes,
        claims,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn principals_from_claims() {
        let p = principal(
            json!({"sub": "alice", "scope": "mcp tools:call", "team": "ops"})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(p.id, "alice");
        assert_eq!(p.scopes, vec!["mcp", "tools:call"]);
        let p = principal(
            json!({"client_id": "bot", "scp": ["a"]})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(
            (p.id.as_str(), p.scopes.clone()),
            ("bot", vec!["a".to_string()])
        );
        assert!(looks_like_jwt("a.b.c") && !looks_like_jwt("abc"));
    }
}
