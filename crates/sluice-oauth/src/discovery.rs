//! Where to sign in: the protected resource metadata (RFC 9728: from the challenge, then the
//! well-known places in the specification's order) and the authorization server's metadata
//! (RFC 8414 and OpenID discovery, with the path-insertion variants; the `issuer` checked).

use crate::challenge::Challenge;
use crate::error::AuthError;
use crate::fetch::{Fetched, Fetcher};
use serde_json::Value;
use url::Url;

/// What the MCP server says about itself (RFC 9728).
#[derive(Debug, Clone, PartialEq)]
pub struct ProtectedResource {
    /// The `resource` exactly as published (sent as RFC 8707's `resource`); None when the
    /// server publishes no metadata (2025-03-26 servers).
    pub resource: Option<String>,
    /// `authorization_servers`.
    pub authorization_servers: Vec<String>,
    /// `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
}

/// An authorization server's metadata (RFC 8414 / OpenID Connect Discovery).
#[derive(Debug, Clone, PartialEq)]
pub struct AuthServer {
    /// `issuer`, checked against the URL it was found for.
    pub issuer: String,
    /// `authorization_endpoint`.
    pub authorization_endpoint: String,
    /// `token_endpoint`.
    pub token_endpoint: String,
    /// `registration_endpoint` (RFC 7591), when offered.
    pub registration_endpoint: Option<String>,
    /// `revocation_endpoint` (RFC 7009), when offered.
    pub revocation_endpoint: Option<String>,
    /// `scopes_supported`.
    pub scopes_supported: Option<Vec<String>>,
    /// `token_endpoint_auth_methods_supported` (default `client_secret_basic`).
    pub token_auth_methods: Vec<String>,
    /// `client_id_metadata_document_supported`.
    pub client_id_metadata_documents: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    pub iss_parameter: bool,
    /// `grant_types_supported` (default authorization_code + implicit per RFC 8414).
    pub grant_types: Vec<String>,
}

/// The result of discovery for one MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    /// The MCP server's own metadata.
    pub resource: ProtectedResource,
    /// The authorization server chosen (the first listed).
    pub server: AuthServer,
    /// The scopes to ask for: the challenge's, else the resource's `scopes_supported`, else
    /// none; `offline_access` added when the authorization server lists it.
    pub scopes: Vec<String>,
}

/// Discover the resource and authorization server metadata for `server_url`, starting from
/// the 401's `challenge`.
pub async fn discover(
    fetcher: &Fetcher,
    server_url: &str,
    challenge: &Challenge,
) -> Result<Discovered, AuthError> {
    let server = fetcher.check(server_url)?;
    let resource = protected_resource(fetcher, &server, challenge).await?;
    let issuer = match resource.authorization_servers.first() {
        Some(i) => i.clone(),
        // A 2025-03-26 server: its own origin is the authorization server.
        None => origin(&server),
    };
    let legacy = resource.resource.is_none();
    let meta = auth_server(fetcher, &issuer, legacy).await?;
    let mut scopes = challenge
        .scope
        .clone()
        .or_else(|| resource.scopes_supported.clone())
        .unwrap_or_default();
    offline_access(&mut scopes, &meta);
    Ok(Discovered {
        resource,
        server: meta,
        scopes,
    })
}

/// Ask the MCP server at `server_url` for its challenge, as a client without a token would meet
/// it: an `initialize` (some servers let the handshake through and guard the rest), then a
/// `tools/list` in the session it gave, then a 2026-07-28 `server/discover`. None when none of
/// them is refused.
pub async fn probe(fetcher: &Fetcher, server_url: &str) -> Result<Option<Challenge>, AuthError> {
    use serde_json::json;
    let info = json!({"name": "sluice", "version": env!("CARGO_PKG_VERSION")});
    let legacy = "2025-11-25";
    let modern = "2026-07-28";
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": legacy, "capabilities": {}, "clientInfo": info},
    });
    let refused = |status: reqwest::StatusCode| status.as_u16() == 401 || status.as_u16() == 403;
    let (status, values, headers) = fetcher
        .probe(server_url, &initialize.to_string(), &[])
        .await?;
    if refused(status) {
        return Ok(Some(Challenge::parse(values.iter().map(String::as_str))));
    }
    let mut then = vec![("MCP-Protocol-Version", legacy.to_string())];
    if let Some(s) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
        then.push(("Mcp-Session-Id", s.to_string()));
    }
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (status, values, _) = fetcher.probe(server_url, &list.to_string(), &then).await?;
    if refused(status) {
        return Ok(Some(Challenge::parse(values.iter().map(String::as_str))));
    }
    let discover = json!({
        "jsonrpc": "2.0", "id": 2, "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": modern,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": info,
        }},
    });
    let modern_headers = [
        ("MCP-Protocol-Version", modern.to_string()),
        ("Mcp-Method", "server/discover".to_string()),
    ];
    let (status, values, _) = fetcher
        .probe(server_url, &discover.to_string(), &modern_headers)
        .await?;
    if refused(status) {
        return Ok(Some(Challenge::parse(values.iter().map(String::as_str))));
    }
    Ok(None)
}

/// Add `offline_access` when the authorization server lists it (and the client asks for
/// scopes at all, or refresh tokens are offered).
pub fn offline_access(scopes: &mut Vec<String>, server: &AuthServer) {
    let listed = server
        .scopes_supported
        .as_ref()
        .is_some_and(|s| s.iter().any(|x| x == "offline_access"));
    if listed && !scopes.iter().any(|s| s == "offline_access") {
        scopes.push("offline_access".into());
    }
}

fn origin(u: &Url) -> String {
    u.origin().ascii_serialization()
}

/// RFC 9728 metadata: the challenge's `resource_metadata`, else the path-suffixed well-known
/// URL, else the root one; none at all is a 2025-03-26 server (empty metadata).
async fn protected_resource(
    fetcher: &Fetcher,
    server: &Url,
    challenge: &Challenge,
) -> Result<ProtectedResource, AuthError> {
    let mut candidates = Vec::new();
    if let Some(u) = &challenge.resource_metadata {
        candidates.push(u.clone());
    } else {
        let path = server.path().trim_end_matches('/');
        if !path.is_empty() {
            candidates.push(format!(
                "{}/.well-known/oauth-protected-resource{path}",
                origin(server)
            ));
        }
        candidates.push(format!(
            "{}/.well-known/oauth-protected-resource",
            origin(server)
        ));
    }
    for url in candidates {
        let Fetched::Json(doc) = fetcher.get_json(&url).await? else {
            continue;
        };
        let resource = doc
            .get("resource")
            .and_then(Value::as_str)
            .ok_or_else(|| AuthError::Metadata {
                url: url.clone(),
                why: "no `resource`".into(),
            })?
            .to_string();
        if !resource_matches(&resource, server) {
            return Err(AuthError::Metadata {
                url,
                why: format!(
                    "the resource {resource:?} is not the server {:?} (refusing to sign in for another resource)",
                    server.as_str()
                ),
            });
        }
        let authorization_servers = strings(&doc, "authorization_servers").unwrap_or_default();
        if authorization_servers.is_empty() {
            return Err(AuthError::Metadata {
                url,
                why: "no `authorization_servers`".into(),
            });
        }
        return Ok(ProtectedResource {
            resource: Some(resource),
            authorization_servers,
            scopes_supported: strings(&doc, "scopes_supported"),
        });
    }
    if challenge.resource_metadata.is_some() {
        return Err(AuthError::Discovery(server.to_string()));
    }
    Ok(ProtectedResource {
        resource: None,
        authorization_servers: Vec::new(),
        scopes_supported: None,
    })
}

/// Is `resource` (as published) the server at `server`, or a prefix of it (same origin, path
/// a prefix on a segment boundary)?
fn resource_matches(resource: &str, server: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.origin() != server.origin() || r.fragment().is_some() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = server.path().trim_end_matches('/');
    sp == rp || sp.starts_with(&format!("{rp}/")) || rp.is_empty()
}

/// The metadata URLs of `issuer`, in the specification's order.
pub fn metadata_urls(issuer: &Url) -> Vec<String> {
    let o = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{o}/.well-known/oauth-authorization-server"),
            format!("{o}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{o}/.well-known/oauth-authorization-server{path}"),
            format!("{o}/.well-known/openid-configuration{path}"),
            format!("{o}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// The authorization server's metadata. `legacy`: a 2025-03-26 server without resource
/// metadata, whose missing metadata means the default endpoints at its origin.
pub(crate) async fn auth_server(
    fetcher: &Fetcher,
    issuer: &str,
    legacy: bool,
) -> Result<AuthServer, AuthError> {
    let parsed = fetcher.check(issuer)?;
    for url in metadata_urls(&parsed) {
        let Fetched::Json(doc) = fetcher.get_json(&url).await? else {
            continue;
        };
        let meta = parse_auth_server(&url, (!legacy).then_some(issuer), &doc)?;
        // Its endpoints are held to the same rules as discovery (https except loopback):
        // never a `javascript:` URL for a person to open, never a token sent in clear.
        let endpoints = [
            Some(&meta.authorization_endpoint),
            Some(&meta.token_endpoint),
            meta.registration_endpoint.as_ref(),
            meta.revocation_endpoint.as_ref(),
        ];
        for e in endpoints.into_iter().flatten() {
            fetcher.check(e).map_err(|err| AuthError::Metadata {
                url: url.clone(),
                why: format!("endpoint refused: {err}"),
            })?;
        }
        return Ok(meta);
    }
    if legacy {
        // 2025-03-26 "fallbacks for servers without metadata discovery".
        let o = parsed.origin().ascii_serialization();
        return Ok(AuthServer {
            issuer: o.clone(),
            authorization_endpoint: format!("{o}/authorize"),
            token_endpoint: format!("{o}/token"),
            registration_endpoint: Some(format!("{o}/register")),
            revocation_endpoint: None,
            scopes_supported: None,
            token_auth_methods: vec!["client_secret_basic".into()],
            client_id_metadata_documents: false,
            iss_parameter: false,
            grant_types: vec!["authorization_code".into(), "refresh_token".into()],
        });
    }
    Err(AuthError::Discovery(format!(
        "{issuer} (no authorization server metadata at any well-known URL)"
    )))
}

fn same_issuer(a: &str, b: &str) -> bool {
    a == b || a.trim_end_matches('/') == b.trim_end_matches('/') && !a.is_empty()
}

/// `issuer`: the issuer the metadata must name (None: a 2025-03-26 server's own metadata, which
/// that revision did not bind to an issuer).
fn parse_auth_server(
    url: &str,
    issuer: Option<&str>,
    doc: &Value,
) -> Result<AuthServer, AuthError> {
    let bad = |why: String| AuthError::Metadata {
        url: url.into(),
        why,
    };
    let got = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
    if let Some(issuer) = issuer.filter(|i| !same_issuer(got, i)) {
        return Err(bad(format!(
            "the metadata's issuer {got:?} is not {issuer:?} (refusing a mismatched authorization server)"
        )));
    }
    let endpoint = |k: &str| -> Result<String, AuthError> {
        doc.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad(format!("no `{k}`")))
    };
    let pkce = strings(doc, "code_challenge_methods_supported").unwrap_or_default();
    if !pkce.iter().any(|m| m == "S256") {
        return Err(bad(
            "the authorization server does not list PKCE S256 in code_challenge_methods_supported (refusing to sign in without it)".into(),
        ));
    }
    Ok(AuthServer {
        issuer: got.to_string(),
        authorization_endpoint: endpoint("authorization_endpoint")?,
        token_endpoint: endpoint("token_endpoint")?,
        registration_endpoint: doc
            .get("registration_endpoint")
            .and_then(Value::as_str)
            .map(str::to_string),
        revocation_endpoint: doc
            .get("revocation_endpoint")
            .and_then(Value::as_str)
            .map(str::to_string),
        scopes_supported: strings(doc, "scopes_supported"),
        token_auth_methods: strings(doc, "token_endpoint_auth_methods_supported")
            .unwrap_or_else(|| vec!["client_secret_basic".into()]),
        client_id_metadata_documents: doc
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        iss_parameter: doc
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        grant_types: strings(doc, "grant_types_supported")
            .unwrap_or_else(|| vec!["authorization_code".into(), "implicit".into()]),
    })
}

fn strings(doc: &Value, key: &str) -> Option<Vec<String>> {
    doc.get(key).and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_insert_the_issuer_path() {
        let u = Url::parse("https://as.example.com/tenant1").unwrap();
        assert_eq!(
            metadata_urls(&u),
            vec![
                "https://as.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://as.example.com/.well-known/openid-configuration/tenant1",
                "https://as.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        let root = Url::parse("https://as.example.com").unwrap();
        assert_eq!(
            metadata_urls(&root),
            vec![
                "https://as.example.com/.well-known/oauth-authorization-server",
                "https://as.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_must_be_the_server_or_a_prefix_of_it() {
        let s = Url::parse("https://mcp.example.com/v1/mcp").unwrap();
        assert!(resource_matches("https://mcp.example.com/v1/mcp", &s));
        assert!(resource_matches("https://mcp.example.com/v1", &s));
        assert!(resource_matches("https://mcp.example.com", &s));
        assert!(!resource_matches("https://mcp.example.com/v1/mc", &s));
        assert!(!resource_matches("https://evil.example.com/v1/mcp", &s));
        assert!(!resource_matches("https://mcp.example.com/other", &s));
    }

    #[test]
    fn auth_server_metadata_is_checked() {
        let doc = serde_json::json!({
            "issuer": "https://as.example.com",
            "authorization_endpoint": "https://as.example.com/authorize",
            "token_endpoint": "https://as.example.com/token",
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["a", "offline_access"],
        });
        let m = parse_auth_server("u", Some("https://as.example.com"), &doc).unwrap();
        assert_eq!(m.token_auth_methods, vec!["client_secret_basic"]);
        assert_eq!(m.revocation_endpoint, None);
        let mut revocable = doc.clone();
        revocable["revocation_endpoint"] = serde_json::json!("https://as.example.com/revoke");
        let r = parse_auth_server("u", Some("https://as.example.com"), &revocable).unwrap();
        assert_eq!(
            r.revocation_endpoint.as_deref(),
            Some("https://as.example.com/revoke")
        );
        assert!(!m.iss_parameter);
        let mut scopes = vec!["a".to_string()];
        offline_access(&mut scopes, &m);
        assert_eq!(scopes, vec!["a", "offline_access"]);
        let e = parse_auth_server("u", Some("https://other.example.com"), &doc).unwrap_err();
        assert!(
            e.to_string()
                .contains("is not \"https://other.example.com\""),
            "{e}"
        );
        let mut no_pkce = doc.clone();
        no_pkce["code_challenge_methods_supported"] = serde_json::json!(["plain"]);
        let e = parse_auth_server("u", Some("https://as.example.com"), &no_pkce).unwrap_err();
        assert!(e.to_string().contains("PKCE S256"), "{e}");
    }
}
