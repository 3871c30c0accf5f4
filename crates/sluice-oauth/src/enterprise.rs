//! Enterprise-managed authorization (the MCP extension
//! `io.modelcontextprotocol/enterprise-managed-authorization`, SEP-990): the client holds an
//! identity assertion from the enterprise's identity provider (an OpenID ID token), exchanges
//! it at the IdP's token endpoint (RFC 8693) for an Identity Assertion JWT Authorization Grant
//! (ID-JAG) whose audience is the MCP server's authorization server, and presents that grant
//! there with the JWT bearer grant (RFC 7523) for an access token. No person, no browser. The
//! assertion and the grant are never logged, shown by `Debug` or put in an error.

use crate::client::ClientCredentials;
use crate::error::AuthError;
use crate::fetch::Fetcher;
use crate::token::{self, SigningKey, Tokens};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// RFC 8693 `subject_token_type` of an OpenID ID token.
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";
/// The token type of an ID-JAG.
pub const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// RFC 7523's `grant_type`.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Where the identity assertion comes from.
#[derive(Clone)]
pub enum Assertion {
    /// A file, read at each grant (whatever renews the ID token rewrites it).
    File(PathBuf),
    /// A value given at start (`sluice client --identity-assertion-file` reads it once).
    Value(String),
}

impl std::fmt::Debug for Assertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Assertion::File(p) => f.debug_tuple("File").field(p).finish(),
            Assertion::Value(_) => f.write_str("Value([hidden])"),
        }
    }
}

impl Assertion {
    /// The assertion now (a file's content, trimmed).
    fn read(&self) -> Result<String, AuthError> {
        match self {
            Assertion::Value(v) => Ok(v.clone()),
            Assertion::File(p) => std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .map_err(|e| {
                    AuthError::Config(format!("the identity assertion file {}: {e}", p.display()))
                }),
        }
    }
}

/// The identity provider's side of the flow.
#[derive(Clone, Debug)]
pub struct EnterpriseConfig {
    /// The IdP's token endpoint, where the assertion is exchanged for an ID-JAG.
    pub idp_token_endpoint: String,
    /// The client at the IdP (`none` without a secret: its `client_id` in the form).
    pub idp_client: ClientCredentials,
    /// The identity assertion (an ID token of the IdP).
    pub assertion: Assertion,
}

/// Step 1: the assertion exchanged at the IdP for an ID-JAG toward the authorization server
/// `audience` (its issuer) for the MCP server `resource`.
pub async fn id_jag(
    fetcher: &Fetcher,
    cfg: &EnterpriseConfig,
    audience: &str,
    resource: &str,
    scopes: &[String],
) -> Result<String, AuthError> {
    let assertion = cfg.assertion.read()?;
    let mut form: Vec<(&'static str, String)> = vec![
        ("grant_type", crate::exchange::GRANT_TYPE.to_string()),
        ("requested_token_type", ID_JAG_TYPE.to_string()),
        ("subject_token", assertion.clone()),
        ("subject_token_type", ID_TOKEN_TYPE.to_string()),
        ("audience", audience.to_string()),
        ("resource", resource.to_string()),
    ];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let (status, answer) = token::post_as_client(
        fetcher,
        &cfg.idp_token_endpoint,
        &cfg.idp_client,
        None,
        form,
    )
    .await
    .map_err(|e| scrub(e, &assertion))?;
    let fail = |why: String| AuthError::Token {
        grant: "token-exchange",
        why: format!("{}: {why}", cfg.idp_token_endpoint),
    };
    if !status.is_success() {
        return Err(scrub(fail(refusal(&answer, status)), &assertion));
    }
    answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .ok_or_else(|| fail("the answer has no access_token (the ID-JAG)".into()))
}

/// Step 2: the ID-JAG presented at the authorization server's `token_endpoint` with the JWT
/// bearer grant, as `client`: the tokens it issues.
pub async fn access_token(
    fetcher: &Fetcher,
    token_endpoint: &str,
    client: &ClientCredentials,
    key: Option<&SigningKey>,
    id_jag: &str,
    resource: Option<&str>,
    scopes: &[String],
) -> Result<Tokens, AuthError> {
    let mut form: Vec<(&'static str, String)> = vec![
        ("grant_type", JWT_BEARER.to_string()),
        ("assertion", id_jag.to_string()),
    ];
    if let Some(r) = resource {
        form.push(("resource", r.to_string()));
    }
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let (status, answer) = token::post_as_client(fetcher, token_endpoint, client, key, form)
        .await
        .map_err(|e| scrub(e, id_jag))?;
    let fail = |why: String| AuthError::Token {
        grant: "jwt-bearer",
        why: format!("{token_endpoint}: {why}"),
    };
    if !status.is_success() {
        return Err(scrub(fail(refusal(&answer, status)), id_jag));
    }
    let text = |k: &str| answer.get(k).and_then(Value::as_str);
    let access_token = text("access_token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail("the answer has no access_token".into()))?
        .to_string();
    Ok(Tokens {
        access_token,
        refresh_token: text("refresh_token").map(String::from),
        expires_in: answer
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(Duration::from_secs),
        scopes: text("scope").map(|s| s.split_whitespace().map(String::from).collect()),
        id_token: None,
    })
}

/// What a token endpoint's refusal says.
fn refusal(answer: &Value, status: reqwest::StatusCode) -> String {
    let text = |k: &str| answer.get(k).and_then(Value::as_str);
    match (text("error"), text("error_description")) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e.to_string(),
        _ => format!("HTTP {status}"),
    }
}

/// `e` with any copy of `secret` taken out (a server may echo what it refused).
fn scrub(e: AuthError, secret: &str) -> AuthError {
    if secret.is_empty() || !e.to_string().contains(secret) {
        return e;
    }
    let clean = |s: String| s.replace(secret, "[assertion]");
    match e {
        AuthError::Token { grant, why } => AuthError::Token {
            grant,
            why: clean(why),
        },
        other => AuthError::Config(clean(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{answer, Recorder};

    const ID_TOKEN: &str = "idp-id-token-secret";
    const JAG: &str = "the-id-jag-secret";

    fn client(id: &str, secret: Option<&str>, method: &str) -> ClientCredentials {
        ClientCredentials {
            issuer: "http://127.0.0.1".into(),
            client_id: id.into(),
            client_secret: secret.map(String::from),
            auth_method: method.into(),
        }
    }

    #[tokio::test]
    async fn the_assertion_becomes_an_id_jag_then_an_access_token() {
        let idp = Recorder::start(vec![answer(
            200,
            &format!(
                r#"{{"access_token": "{JAG}", "issued_token_type": "{ID_JAG_TYPE}", "token_type": "N_A"}}"#
            ),
        )])
        .await;
        let cfg = EnterpriseConfig {
            idp_token_endpoint: idp.url("/token"),
            idp_client: client("idp-client", None, "none"),
            assertion: Assertion::Value(ID_TOKEN.into()),
        };
        let f = Fetcher::new(Vec::new());
        let scopes = vec!["mcp".to_string()];
        let jag = id_jag(
            &f,
            &cfg,
            "https://as.example.com",
            "https://mcp.example.com/mcp",
            &scopes,
        )
        .await
        .unwrap();
        assert_eq!(jag, JAG);
        let seen = idp.requests();
        let form = seen[0].form();
        let get = |k: &str| form.get(k).map(String::as_str);
        assert_eq!(get("grant_type"), Some(crate::exchange::GRANT_TYPE));
        assert_eq!(get("subject_token"), Some(ID_TOKEN));
        assert_eq!(get("subject_token_type"), Some(ID_TOKEN_TYPE));
        assert_eq!(get("requested_token_type"), Some(ID_JAG_TYPE));
        assert_eq!(get("audience"), Some("https://as.example.com"));
        assert_eq!(get("resource"), Some("https://mcp.example.com/mcp"));
        assert_eq!(get("client_id"), Some("idp-client"));

        let mcp_as = Recorder::start(vec![answer(
            200,
            r#"{"access_token": "at-1", "token_type": "Bearer", "expires_in": 3600, "scope": "mcp"}"#,
        )])
        .await;
        let t = access_token(
            &f,
            &mcp_as.url("/token"),
            &client("mcp-client", Some("mcp-secret"), "client_secret_basic"),
            None,
            &jag,
            Some("https://mcp.example.com/mcp"),
            &scopes,
        )
        .await
        .unwrap();
        assert_eq!(t.access_token, "at-1");
        assert_eq!(t.expires_in, Some(Duration::from_secs(3600)));
        let seen = mcp_as.requests();
        let form = seen[0].form();
        assert_eq!(form.get("grant_type").map(String::as_str), Some(JWT_BEARER));
        assert_eq!(form.get("assertion").map(String::as_str), Some(JAG));
        assert!(seen[0]
            .header("authorization")
            .unwrap()
            .starts_with("Basic "));
        assert!(format!("{cfg:?}").contains("[hidden]"));
        assert!(!format!("{cfg:?}").contains(ID_TOKEN));
    }

    #[tokio::test]
    async fn refusals_never_hold_the_assertion_or_the_grant() {
        let idp = Recorder::start(vec![answer(
            400,
            &format!(r#"{{"error": "invalid_grant", "error_description": "bad {ID_TOKEN}"}}"#),
        )])
        .await;
        let cfg = EnterpriseConfig {
            idp_token_endpoint: idp.url("/token"),
            idp_client: client("idp-client", None, "none"),
            assertion: Assertion::Value(ID_TOKEN.into()),
        };
        let f = Fetcher::new(Vec::new());
        let e = id_jag(&f, &cfg, "a", "r", &[])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid_grant") && !e.contains(ID_TOKEN), "{e}");
        let mcp_as = Recorder::start(vec![answer(
            400,
            &format!(r#"{{"error": "invalid_grant", "error_description": "bad {JAG}"}}"#),
        )])
        .await;
        let e = access_token(
            &f,
            &mcp_as.url("/token"),
            &client("c", Some("s"), "client_secret_basic"),
            None,
            JAG,
            None,
            &[],
        )
        .await
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("invalid_grant") && !e.contains(JAG), "{e}");
        let missing = EnterpriseConfig {
            assertion: Assertion::File("/nonexistent/id-token".into()),
            ..cfg
        };
        let e = id_jag(&f, &missing, "a", "r", &[])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/id-token"), "{e}");
    }
}
