//! Who may use the MCP listener, and what each caller may see and call.
//!
//! [`Authenticator`] turns a request's credentials into a [`Principal`] or a [`Denial`] (the
//! HTTP status and `WWW-Authenticate` challenge to answer with): static tokens stored as SHA-256
//! hashes ([`tokens`]), and JWT access tokens checked like an OAuth 2.1 resource server —
//! signature against a JWKS ([`jwks`]), `iss`, `aud`, `exp`/`nbf`, scopes ([`jwt`]). It also
//! writes the RFC 9728 protected-resource metadata. [`Policy`] applies the access rules to tools,
//! prompts and resources.

pub mod jwks;
pub mod jwt;
pub mod policy;
pub mod tokens;

pub use policy::{Item, Policy};

use serde_json::{json, Value};
use sluice_config::AuthConfig;
use sluice_core::Principal;
use std::sync::Arc;

/// Why a request was not let in, and how to say so over HTTP.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    /// 401, 403 or 503.
    pub status: u16,
    /// The OAuth error code (`invalid_token`, `insufficient_scope`, `temporarily_unavailable`),
    /// or `None` when no credentials were sent.
    pub error: Option<&'static str>,
    /// What was wrong, for the caller and the log.
    pub description: String,
}

/// The authentication layer of one configuration.
#[derive(Debug)]
pub struct Authenticator {
    resource: String,
    metadata_url: String,
    authorization_servers: Vec<String>,
    required_scopes: Vec<String>,
    scopes_supported: Vec<String>,
    tokens: tokens::StaticTokens,
    jwt: Option<jwt::JwtVerifier>,
}

impl Authenticator {
    /// Build from the configuration, or `None` when authentication is off. `listen` is the MCP
    /// listener's address (the default resource URI is `http://<listen>/mcp`).
    pub fn new(cfg: &AuthConfig, listen: &str) -> Option<Arc<Authenticator>> {
        if !cfg.enabled {
            return None;
        }
        let resource = cfg
            .resource
            .clone()
            .unwrap_or_else(|| format!("http://{listen}/mcp"));
        let jwt = cfg
            .oauth
            .as_ref()
            .map(|o| jwt::JwtVerifier::new(o, &resource));
        Some(Arc::new(Authenticator {
            metadata_url: metadata_url(&resource),
            resource,
            authorization_servers: cfg.authorization_servers.clone(),
            required_scopes: cfg.required_scopes.clone(),
            scopes_supported: cfg.scopes_supported.clone(),
            tokens: tokens::StaticTokens::new(&cfg.tokens),
            jwt,
        }))
    }

    /// Check an OpenID Connect ID token from the configured issuer (see
    /// [`jwt::JwtVerifier::verify_id_token`]); returns its `sub`. Without an issuer, refused.
    pub async fn verify_id_token(
        &self,
        token: &str,
        client_id: &str,
        nonce: &str,
    ) -> Result<String, Denial> {
        match &self.jwt {
            Some(jwt) => jwt.verify_id_token(token, client_id, nonce).await,
            None => Err(invalid("no issuer is configured to check an ID token")),
        }
    }

    /// The canonical resource URI.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Check a request's credentials: the `Authorization: Bearer …` header value, else an
    /// `X-API-Key` header value.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        api_key: Option<&str>,
    ) -> Result<Arc<Principal>, Denial> {
        let token = match (authorization, api_key) {
            (Some(h), _) => {
                let (scheme, rest) = h.trim().split_once(' ').unwrap_or((h.trim(), ""));
                if !scheme.eq_ignore_ascii_case("bearer") || rest.trim().is_empty() {
                    return Err(invalid(
                        "the Authorization header must be \"Bearer <token>\"",
                    ));
                }
                rest.trim()
            }
            (None, Some(k)) if !k.trim().is_empty() => k.trim(),
            _ => {
                return Err(Denial {
                    status: 401,
                    error: None,
                    description: "authentication required".into(),
                })
            }
        };
        let principal = if let Some(p) = self.tokens.find(token) {
            p
        } else if let (Some(jwt), true) = (&self.jwt, jwt::looks_like_jwt(token)) {
            jwt.verify(token).await?
        } else {
            return Err(invalid("unknown token"));
        };
        let missing: Vec<&str> = self
            .required_scopes
            .iter()
            .filter(|s| !principal.has_scope(s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Denial {
                status: 403,
                error: Some("insufficient_scope"),
                description: format!("the token lacks the scope {}", missing.join(" ")),
            });
        }
        Ok(Arc::new(principal))
    }

    /// The `WWW-Authenticate` header value for a denial.
    pub fn challenge(&self, denial: &Denial) -> String {
        let mut parts = Vec::new();
        if let Some(e) = denial.error {
            parts.push(format!("error=\"{e}\""));
            parts.push(format!(
                "error_description=\"{}\"",
                denial.description.replace(['"', '\\'], "'")
            ));
        }
        parts.push(format!("resource_metadata=\"{}\"", self.metadata_url));
        if !self.required_scopes.is_empty() {
            parts.push(format!("scope=\"{}\"", self.required_scopes.join(" ")));
        }
        format!("Bearer {}", parts.join(", "))
    }

    /// The RFC 9728 protected-resource metadata document.
    pub fn metadata(&self) -> Value {
        let mut doc = json!({
            "resource": self.resource,
            "bearer_methods_supported": ["header"],
            "resource_name": "Sluice MCP gateway",
        });
        if !self.authorization_servers.is_empty() {
            doc["authorization_servers"] = json!(self.authorization_servers);
        }
        if !self.scopes_supported.is_empty() {
            doc["scopes_supported"] = json!(self.scopes_supported);
        }
        doc
    }
}

fn invalid(description: impl Into<String>) -> Denial {
    Denial {
        status: 401,
        error: Some("invalid_token"),
        description: description.into(),
    }
}

/// RFC 9728 §3.1: the well-known segment goes between the host and the resource's path
/// (`https://h/mcp` → `https://h/.well-known/oauth-protected-resource/mcp`).
pub fn metadata_url(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("http", resource));
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    format!("{scheme}://{host}/.well-known/oauth-protected-resource{path}")
}

/// The lowercase hex SHA-256 of a token: what `tokens[].sha256` stores.
pub fn hash_token(token: &str) -> String {
    tokens::hash(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_follow_rfc_9728() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8750"),
            "http://127.0.0.1:8750/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_url("https://h/a/b/"),
            "https://h/.well-known/oauth-protected-resource/a/b"
        );
    }
}
