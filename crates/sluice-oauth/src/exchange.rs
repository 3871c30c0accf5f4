//! RFC 8693 token exchange: a client's own validated token (the subject token) is exchanged at
//! the configured token endpoint for a token toward one upstream, for the same person; the
//! gateway authenticates there as its client (and, when asked, sends its own token from the
//! client credentials grant as the actor token). Tokens are cached per principal, and per
//! digest of the subject token (a new client token is exchanged again), until a minute before
//! they expire. The subject token is never logged, shown by `Debug` or put in an error.
//!
//! The gateway's own token toward the upstream ([`Exchanger::own_token`]: the client
//! credentials grant, aimed at the upstream with `resource`) is what it reads the upstream's
//! lists with, acting for nobody.

use crate::client::ClientCredentials;
use crate::error::AuthError;
use crate::fetch::Fetcher;
use crate::token::REFRESH_MARGIN;
use crate::token::{self, SigningKey, TokenRequest};
use parking_lot::Mutex;
use reqwest::header::HeaderValue;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// `grant_type` of a token exchange.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The access token type URI (RFC 8693 section 3).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// How long an exchanged token that says no `expires_in` is kept, seconds.
pub const UNSAID_LIFETIME: u64 = 300;

/// What an exchange asks for, and as whom.
#[derive(Clone)]
pub struct ExchangeConfig {
    /// The token endpoint.
    pub token_endpoint: String,
    /// `audience`.
    pub audience: Option<String>,
    /// `resource`.
    pub resource: Option<String>,
    /// `scope` (joined with spaces; empty: not sent).
    pub scopes: Vec<String>,
    /// `requested_token_type`.
    pub requested_token_type: String,
    /// `subject_token_type`.
    pub subject_token_type: String,
    /// Send the gateway's own token (client credentials grant) as `actor_token`.
    pub actor: bool,
    /// The gateway's client at the token endpoint.
    pub client: ClientCredentials,
    /// Its `private_key_jwt` key.
    pub signing_key: Option<SigningKey>,
}

impl std::fmt::Debug for ExchangeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeConfig")
            .field("token_endpoint", &self.token_endpoint)
            .field("audience", &self.audience)
            .field("resource", &self.resource)
            .field("scopes", &self.scopes)
            .field("actor", &self.actor)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// A token held: the header to send and when it stops being used (seconds since the epoch).
struct Held {
    subject: [u8; 32],
    header: Arc<HeaderValue>,
    until: u64,
}

/// One upstream's token exchange, with its cache.
pub struct Exchanger {
    cfg: ExchangeConfig,
    fetcher: Fetcher,
    /// By principal: the token exchanged for the subject token of that digest.
    held: Mutex<HashMap<String, Held>>,
    /// The gateway's actor token and when it stops being used.
    actor: Mutex<Option<(String, u64)>>,
    /// The gateway's own token toward the upstream, and when it stops being used.
    own: Mutex<Option<(Arc<HeaderValue>, u64)>>,
}

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanger")
            .field("cfg", &self.cfg)
            .field("held", &self.held.lock().len())
            .finish_non_exhaustive()
    }
}

/// The time an exchanged token is used until: [`REFRESH_MARGIN`] before it expires.
fn use_until(now: u64, expires_in: Option<u64>) -> u64 {
    match expires_in {
        Some(s) => now + s.saturating_sub(REFRESH_MARGIN.as_secs()),
        None => now + UNSAID_LIFETIME,
    }
}

impl Exchanger {
    /// An exchanger for `cfg`, over the bounded `fetcher`.
    pub fn new(cfg: ExchangeConfig, fetcher: Fetcher) -> Exchanger {
        Exchanger {
            cfg,
            fetcher,
            held: Mutex::new(HashMap::new()),
            actor: Mutex::new(None),
            own: Mutex::new(None),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &ExchangeConfig {
        &self.cfg
    }

    /// The `Authorization` value for `principal`'s requests to the upstream: the token
    /// exchanged for `subject_token` (the client's own, validated token), from the cache while
    /// it has more than a minute left and the client still presents the same token.
    pub async fn token_for(
        &self,
        principal: &str,
        subject_token: &str,
    ) -> Result<Arc<HeaderValue>, AuthError> {
        let subject: [u8; 32] = Sha256::digest(subject_token.as_bytes()).into();
        let now = token::now();
        if let Some(h) = self.held.lock().get(principal) {
            if h.subject == subject && now < h.until {
                return Ok(h.header.clone());
            }
        }
        let (token, expires_in) = self
            .exchange(subject_token)
            .await
            .map_err(|e| scrub(e, subject_token))?;
        let mut value =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| AuthError::Token {
                grant: "token-exchange",
                why: format!(
                    "{}: the issued token cannot be sent in a header",
                    self.cfg.token_endpoint
                ),
            })?;
        value.set_sensitive(true);
        let header = Arc::new(value);
        let mut held = self.held.lock();
        held.retain(|_, h| now < h.until);
        held.insert(
            principal.to_string(),
            Held {
                subject,
                header: header.clone(),
                until: use_until(now, expires_in),
            },
        );
        Ok(header)
    }

    /// Forget `principal`'s exchanged token (the upstream refused it): the next request
    /// exchanges again.
    pub fn forget(&self, principal: &str) {
        self.held.lock().remove(principal);
    }

    /// Can the gateway get a token of its own at the token endpoint (a client with a secret or
    /// a key: the client credentials grant)?
    pub fn has_own_credentials(&self) -> bool {
        let c = &self.cfg.client;
        !c.client_id.is_empty()
            && match c.auth_method.as_str() {
                "private_key_jwt" => self.cfg.signing_key.is_some(),
                "none" => false,
                _ => c.client_secret.is_some(),
            }
    }

    /// The gateway's own token toward the upstream, acting for nobody: the client credentials
    /// grant with `resource` (the configured one, else the `audience`) and the scopes; what the
    /// upstream's lists are read with. Cached until a minute before it expires.
    pub async fn own_token(&self) -> Result<Arc<HeaderValue>, AuthError> {
        let now = token::now();
        if let Some((h, until)) = self.own.lock().as_ref() {
            if now < *until {
                return Ok(h.clone());
            }
        }
        let c = &self.cfg;
        let resource = c.resource.as_deref().or(c.audience.as_deref());
        let t = token::request(
            &self.fetcher,
            &c.token_endpoint,
            &c.client,
            c.signing_key.as_ref(),
            resource,
            TokenRequest::ClientCredentials(&c.scopes),
        )
        .await?;
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", t.access_token)).map_err(|_| {
                AuthError::Token {
                    grant: "client_credentials",
                    why: format!(
                        "{}: the issued token cannot be sent in a header",
                        c.token_endpoint
                    ),
                }
            })?;
        value.set_sensitive(true);
        let header = Arc::new(value);
        let until = use_until(now, t.expires_in.map(|d| d.as_secs()));
        *self.own.lock() = Some((header.clone(), until));
        Ok(header)
    }

    /// The gateway's own token, for `actor_token` (client credentials; cached likewise).
    async fn actor_token(&self) -> Result<String, AuthError> {
        let now = token::now();
        if let Some((t, until)) = self.actor.lock().as_ref() {
            if now < *until {
                return Ok(t.clone());
            }
        }
        let t = token::request(
            &self.fetcher,
            &self.cfg.token_endpoint,
            &self.cfg.client,
            self.cfg.signing_key.as_ref(),
            None,
            TokenRequest::ClientCredentials(&[]),
        )
        .await?;
        let until = use_until(now, t.expires_in.map(|d| d.as_secs()));
        *self.actor.lock() = Some((t.access_token.clone(), until));
        Ok(t.access_token)
    }

    /// One exchange: the issued token and its `expires_in`.
    async fn exchange(&self, subject_token: &str) -> Result<(String, Option<u64>), AuthError> {
        let c = &self.cfg;
        let mut form: Vec<(&'static str, String)> = vec![
            ("grant_type", GRANT_TYPE.to_string()),
            ("subject_token", subject_token.to_string()),
            ("subject_token_type", c.subject_token_type.clone()),
            ("requested_token_type", c.requested_token_type.clone()),
        ];
        if let Some(a) = &c.audience {
            form.push(("audience", a.clone()));
        }
        if let Some(r) = &c.resource {
            form.push(("resource", r.clone()));
        }
        if !c.scopes.is_empty() {
            form.push(("scope", c.scopes.join(" ")));
        }
        if c.actor {
            form.push(("actor_token", self.actor_token().await?));
            form.push(("actor_token_type", ACCESS_TOKEN_TYPE.to_string()));
        }
        let fail = |why: String| AuthError::Token {
            grant: "token-exchange",
            why: format!("{}: {why}", c.token_endpoint),
        };
        let (status, answer) = token::post_as_client(
            &self.fetcher,
            &c.token_endpoint,
            &c.client,
            c.signing_key.as_ref(),
            form,
        )
        .await?;
        let text = |k: &str| answer.get(k).and_then(Value::as_str);
        if !status.is_success() {
            return Err(fail(match (text("error"), text("error_description")) {
                (Some(e), Some(d)) => format!("{e}: {d}"),
                (Some(e), None) => e.to_string(),
                _ => format!("HTTP {status}"),
            }));
        }
        let token = text("access_token")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| fail("the answer has no access_token".into()))?;
        Ok((
            token.to_string(),
            answer.get("expires_in").and_then(Value::as_u64),
        ))
    }
}

/// `e` with any copy of the subject token taken out (an authorization server may echo it).
fn scrub(e: AuthError, subject_token: &str) -> AuthError {
    if subject_token.is_empty() || !e.to_string().contains(subject_token) {
        return e;
    }
    let clean = |s: String| s.replace(subject_token, "[subject token]");
    match e {
        AuthError::Token { grant, why } => AuthError::Token {
            grant,
            why: clean(why),
        },
        AuthError::Fetch { url, why } => AuthError::Fetch {
            url: clean(url),
            why: clean(why),
        },
        other => AuthError::Config(clean(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{answer, Recorder};

    const SUBJECT: &str = "client-subject-token-secret";

    fn cfg(endpoint: String, actor: bool) -> ExchangeConfig {
        ExchangeConfig {
            token_endpoint: endpoint,
            audience: Some("crm".into()),
            resource: Some("https://crm.example.com/mcp".into()),
            scopes: vec!["crm.read".into(), "crm.write".into()],
            requested_token_type: ACCESS_TOKEN_TYPE.into(),
            subject_token_type: ACCESS_TOKEN_TYPE.into(),
            actor,
            client: ClientCredentials {
                issuer: "http://127.0.0.1".into(),
                client_id: "sluice".into(),
                client_secret: Some("gateway-secret".into()),
                auth_method: "client_secret_basic".into(),
            },
            signing_key: None,
        }
    }

    fn issued(token: &str, expires_in: u64) -> String {
        answer(
            200,
            &format!(
                r#"{{"access_token": "{token}", "issued_token_type": "{ACCESS_TOKEN_TYPE}", "token_type": "Bearer", "expires_in": {expires_in}}}"#
            ),
        )
    }

    #[tokio::test]
    async fn the_request_is_rfc_8693s_and_the_token_is_cached_per_principal_and_subject() {
        let server = Recorder::start(vec![
            issued("up-alice-1", 3600),
            issued("up-bob", 3600),
            issued("up-alice-2", 3600),
        ])
        .await;
        let x = Exchanger::new(cfg(server.url("/token"), false), Fetcher::new(Vec::new()));
        let a = x.token_for("alice", SUBJECT).await.unwrap();
        assert_eq!(a.to_str().unwrap(), "Bearer up-alice-1");
        assert!(a.is_sensitive());
        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        let form = seen[0].form();
        let get = |k: &str| form.get(k).map(String::as_str);
        assert_eq!(get("grant_type"), Some(GRANT_TYPE));
        assert_eq!(get("subject_token"), Some(SUBJECT));
        assert_eq!(get("subject_token_type"), Some(ACCESS_TOKEN_TYPE));
        assert_eq!(get("requested_token_type"), Some(ACCESS_TOKEN_TYPE));
        assert_eq!(get("audience"), Some("crm"));
        assert_eq!(get("resource"), Some("https://crm.example.com/mcp"));
        assert_eq!(get("scope"), Some("crm.read crm.write"));
        assert_eq!(get("actor_token"), None);
        assert!(seen[0]
            .header("authorization")
            .unwrap()
            .starts_with("Basic "));
        // Cached: the same principal with the same token asks nothing.
        let again = x.token_for("alice", SUBJECT).await.unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(server.requests().len(), 1);
        // Another principal, even with the same client token, has an exchange of its own.
        let b = x.token_for("bob", SUBJECT).await.unwrap();
        assert_eq!(b.to_str().unwrap(), "Bearer up-bob");
        // A new client token is exchanged again.
        let a2 = x.token_for("alice", "a-newer-client-token").await.unwrap();
        assert_eq!(a2.to_str().unwrap(), "Bearer up-alice-2");
        assert_eq!(server.requests().len(), 3);
        // Debug of everything holds no token.
        let shown = format!("{x:?} {:?} {a:?}", x.config());
        for secret in [SUBJECT, "up-alice-1", "gateway-secret"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_token_near_its_expiry_is_exchanged_again_and_forget_forgets() {
        let server = Recorder::start(vec![issued("short", 30), issued("next", 3600)]).await;
        let x = Exchanger::new(cfg(server.url("/token"), false), Fetcher::new(Vec::new()));
        x.token_for("alice", SUBJECT).await.unwrap();
        // 30 s left is inside the minute's margin: not reused.
        let t = x.token_for("alice", SUBJECT).await.unwrap();
        assert_eq!(t.to_str().unwrap(), "Bearer next");
        x.forget("alice");
        x.token_for("alice", SUBJECT).await.unwrap();
        assert_eq!(server.requests().len(), 3);
    }

    #[tokio::test]
    async fn the_actor_token_is_the_gateways_own() {
        let server = Recorder::start(vec![
            answer(
                200,
                r#"{"access_token": "gateway-actor", "token_type": "Bearer", "expires_in": 3600}"#,
            ),
            issued("up", 3600),
            issued("up2", 3600),
        ])
        .await;
        let x = Exchanger::new(cfg(server.url("/token"), true), Fetcher::new(Vec::new()));
        x.token_for("alice", SUBJECT).await.unwrap();
        x.token_for("bob", SUBJECT).await.unwrap();
        let seen = server.requests();
        assert_eq!(seen.len(), 3, "one client credentials grant, two exchanges");
        assert_eq!(
            seen[0].form().get("grant_type").map(String::as_str),
            Some("client_credentials")
        );
        for s in &seen[1..] {
            let f = s.form();
            assert_eq!(
                f.get("actor_token").map(String::as_str),
                Some("gateway-actor")
            );
            assert_eq!(
                f.get("actor_token_type").map(String::as_str),
                Some(ACCESS_TOKEN_TYPE)
            );
        }
    }

    #[tokio::test]
    async fn the_gateways_own_token_is_aimed_at_the_upstream_and_cached() {
        let server = Recorder::start(vec![answer(
            200,
            r#"{"access_token": "gateway-own", "token_type": "Bearer", "expires_in": 3600}"#,
        )])
        .await;
        let x = Exchanger::new(cfg(server.url("/token"), false), Fetcher::new(Vec::new()));
        assert!(x.has_own_credentials());
        let t = x.own_token().await.unwrap();
        assert_eq!(t.to_str().unwrap(), "Bearer gateway-own");
        assert!(t.is_sensitive());
        assert!(Arc::ptr_eq(&t, &x.own_token().await.unwrap()), "cached");
        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        let form = seen[0].form();
        let get = |k: &str| form.get(k).map(String::as_str);
        assert_eq!(get("grant_type"), Some("client_credentials"));
        assert_eq!(get("resource"), Some("https://crm.example.com/mcp"));
        assert_eq!(get("scope"), Some("crm.read crm.write"));
        // A public client has no token of its own.
        let mut public = cfg(server.url("/token"), false);
        public.client.client_secret = None;
        public.client.auth_method = "none".into();
        assert!(!Exchanger::new(public, Fetcher::new(Vec::new())).has_own_credentials());
    }

    #[tokio::test]
    async fn the_subject_token_never_reaches_an_error() {
        // An authorization server that echoes the subject token in its refusal.
        let server = Recorder::start(vec![answer(
            400,
            &format!(
                r#"{{"error": "invalid_grant", "error_description": "bad subject_token {SUBJECT}"}}"#
            ),
        )])
        .await;
        let x = Exchanger::new(cfg(server.url("/token"), false), Fetcher::new(Vec::new()));
        let e = x.token_for("alice", SUBJECT).await.unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(!text.contains(SUBJECT), "{text}");
        assert_eq!(
            e.to_string(),
            format!(
                "the token endpoint refused the token-exchange request: {}: invalid_grant: bad subject_token [subject token]",
                server.url("/token")
            )
        );
        // Nothing listening, and a refused scheme: errors name the URL only.
        let x = Exchanger::new(
            cfg("http://127.0.0.1:9/token".into(), false),
            Fetcher::new(Vec::new()),
        );
        let e = x.token_for("alice", SUBJECT).await.unwrap_err();
        assert_eq!(e.to_string(), "http://127.0.0.1:9/token: cannot connect");
        let x = Exchanger::new(
            cfg("http://idp.example.com/token".into(), false),
            Fetcher::new(Vec::new()),
        );
        let e = x.token_for("alice", SUBJECT).await.unwrap_err().to_string();
        assert!(e.contains("plain http is allowed only to loopback"), "{e}");
        assert!(!e.contains(SUBJECT));
        // A success without a token is refused.
        let server = Recorder::start(vec![answer(200, r#"{"token_type": "Bearer"}"#)]).await;
        let x = Exchanger::new(cfg(server.url("/token"), false), Fetcher::new(Vec::new()));
        let e = x.token_for("alice", SUBJECT).await.unwrap_err().to_string();
        assert!(e.ends_with("the answer has no access_token"), "{e}");
    }
}
