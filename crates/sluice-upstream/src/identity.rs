//! An upstream's OAuth identity built from its configuration: the client settings, the
//! redirect URI and client ID metadata document under the gateway's public URL, the signing key
//! of `private_key_jwt`, and the "needs login" hint that names the command to run; and for a
//! `per_user` upstream, [`PerUser`]: one identity per principal, each with its own grant; for an
//! `exchange` upstream, its [`Exchanger`] ([`exchanger_for`]).

use parking_lot::Mutex;
use sluice_config::{OAuthMode, UpstreamSpec};
use sluice_oauth::{
    flow, AuthError, ClientSettings, ExchangeConfig, Exchanger, Fetcher, Identity, IdentityConfig,
    Mode, Revoked, SigningKey, Status,
};
use sluice_vault::Vault;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Why an upstream's OAuth identity could not be made.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The `private_key_jwt` key file could not be read.
    #[error("cannot read the private key {}: {source}", path.display())]
    ReadKey {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The key file does not hold a usable key.
    #[error("{}: {source}", path.display())]
    BadKey {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: sluice_oauth::AuthError,
    },
    /// The upstream signs in with `oauth` and the gateway has no vault to keep grants in.
    #[error("it signs in with oauth and no vault is configured")]
    NoVault,
}

/// The path of the OAuth callback under the public URL.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// The path of the client ID metadata document under the public URL.
pub const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";

/// What every upstream identity of a gateway shares.
#[derive(Clone)]
pub struct OAuthContext {
    /// Where grants and registrations are kept.
    pub vault: Vault,
    /// The bounded HTTP client of discovery and the token endpoint.
    pub fetcher: Fetcher,
    /// The gateway's public base URL (no trailing slash).
    pub public_url: String,
    /// The home folder, for the hint (`--home DIR`), when not the default.
    pub home_hint: Option<String>,
}

impl OAuthContext {
    /// The redirect URI every sign-in of this gateway uses.
    pub fn redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.public_url)
    }

    /// The URL of this gateway's client ID metadata document, when the public URL is https
    /// (an authorization server fetches it).
    pub fn metadata_url(&self) -> Option<String> {
        self.public_url
            .starts_with("https://")
            .then(|| format!("{}{CLIENT_METADATA_PATH}", self.public_url))
    }

    /// The client settings of `spec`'s identity.
    pub fn client_settings(&self, spec: &UpstreamSpec) -> ClientSettings {
        let o = spec.oauth.as_ref();
        ClientSettings {
            client_id: o.and_then(|o| o.client_id.clone()),
            client_secret: o.and_then(|o| o.client_secret.clone()),
            issuer: o.and_then(|o| o.issuer.clone()),
            auth_method: o.and_then(|o| o.token_endpoint_auth.clone()),
            metadata_url: o
                .and_then(|o| o.client_metadata_url.clone())
                .or_else(|| self.metadata_url()),
            client_name: "Sluice MCP gateway".into(),
            redirect_uri: self.redirect_uri(),
        }
    }
}

/// The grant key of an upstream's shared identity in the vault.
pub fn grant_key(upstream: &str) -> String {
    format!("upstream:{upstream}")
}

/// The grant key of `principal`'s own grant for a `per_user` upstream: the principal is part
/// of the key, so one principal's grant is never read through another's identity. (Upstream ids
/// hold no `:`, so the prefix `user:<upstream>:` names the upstream alone.)
pub fn user_grant_key(upstream: &str, principal: &str) -> String {
    format!("user:{upstream}:{principal}")
}

/// The upstream and principal of a [`user_grant_key`] (None: another kind of key).
pub fn parse_user_grant_key(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix("user:")?.split_once(':')
}

/// The `private_key_jwt` key of `spec`'s `oauth`, when it names one.
fn signing_key(spec: &UpstreamSpec) -> Result<Option<SigningKey>, IdentityError> {
    let Some(o) = &spec.oauth else {
        return Ok(None);
    };
    let key = match &o.private_key_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| IdentityError::ReadKey {
                path: path.clone(),
                source: e,
            })?;
            Some(
                SigningKey::from_pem(&pem, o.signing_alg.as_deref(), None).map_err(|source| {
                    IdentityError::BadKey {
                        path: path.clone(),
                        source,
                    }
                })?,
            )
        }
        None => None,
    };
    Ok(key)
}

/// The identity of `spec` (None: it has no `oauth`, or it exchanges its users' tokens). Err:
/// its key file does not load.
pub fn identity_for(
    spec: &UpstreamSpec,
    ctx: &OAuthContext,
) -> Result<Option<Arc<Identity>>, IdentityError> {
    let Some(o) = &spec.oauth else {
        return Ok(None);
    };
    let signing_key = signing_key(spec)?;
    let mode = match o.mode {
        OAuthMode::Shared => Mode::Person {
            hint: match &ctx.home_hint {
                Some(h) => format!("run sluice upstream login {} --home {h}", spec.id),
                None => format!("run sluice upstream login {}", spec.id),
            },
        },
        OAuthMode::ClientCredentials => Mode::ClientCredentials,
        // The shared identity of a per-user upstream lists its tools (an operator's login);
        // each user's own grant is `PerUser`'s.
        OAuthMode::PerUser => Mode::Person {
            hint: match &ctx.home_hint {
                Some(h) => format!(
                    "run sluice upstream login {} --home {h} (the login that lists its tools; each user connects their own account)",
                    spec.id
                ),
                None => format!(
                    "run sluice upstream login {} (the login that lists its tools; each user connects their own account)",
                    spec.id
                ),
            },
        },
        // No identity of its own: every token is a principal's, exchanged (`Exchanger`).
        OAuthMode::Exchange => return Ok(None),
        OAuthMode::Enterprise => match &o.enterprise {
            Some(e) => Mode::Enterprise(Arc::new(sluice_oauth::EnterpriseConfig {
                idp_token_endpoint: e.idp_token_endpoint.clone(),
                idp_client: sluice_oauth::ClientCredentials {
                    issuer: e.idp_token_endpoint.clone(),
                    client_id: e.idp_client_id.clone().unwrap_or_default(),
                    client_secret: e.idp_client_secret.clone(),
                    auth_method: if e.idp_client_secret.is_some() {
                        "client_secret_basic".into()
                    } else {
                        "none".into()
                    },
                },
                assertion: sluice_oauth::Assertion::File(e.identity_assertion_file.clone()),
            })),
            None => return Ok(None),
        },
    };
    let mut client = ctx.client_settings(spec);
    if o.mode == OAuthMode::ClientCredentials
        && signing_key.is_some()
        && client.auth_method.is_none()
    {
        client.auth_method = Some("private_key_jwt".into());
    }
    Ok(Some(Identity::new(
        IdentityConfig {
            server_url: spec.url.clone(),
            grant_key: grant_key(&spec.id),
            client,
            scopes: o.scopes.clone(),
            mode,
            signing_key,
        },
        ctx.fetcher.clone(),
        ctx.vault.clone(),
        None,
    )))
}

/// The token exchange of an `exchange` upstream (None: another mode). The gateway's client at
/// the token endpoint is the configured one: `private_key_jwt` when a key is given (or
/// `token_endpoint_auth` says so), else `client_secret_basic` with a secret, else `none`. Err:
/// its key file does not load.
pub fn exchanger_for(
    spec: &UpstreamSpec,
    ctx: &OAuthContext,
) -> Result<Option<Arc<Exchanger>>, IdentityError> {
    let Some((o, x)) = spec
        .oauth
        .as_ref()
        .and_then(|o| Some((o, o.exchange.as_ref()?)))
    else {
        return Ok(None);
    };
    let signing_key = signing_key(spec)?;
    let auth_method = o.token_endpoint_auth.clone().unwrap_or_else(|| {
        if signing_key.is_some() {
            "private_key_jwt".into()
        } else if o.client_secret.is_some() {
            "client_secret_basic".into()
        } else {
            "none".into()
        }
    });
    // A `private_key_jwt` assertion's audience: the issuer when configured, else the token
    // endpoint's origin.
    let issuer = o.issuer.clone().unwrap_or_else(|| {
        let e = &x.token_endpoint;
        let host_at = e.find("://").map_or(0, |i| i + 3);
        let end = e[host_at..].find('/').map_or(e.len(), |i| host_at + i);
        e[..end].to_string()
    });
    Ok(Some(Arc::new(Exchanger::new(
        ExchangeConfig {
            token_endpoint: x.token_endpoint.clone(),
            audience: x.audience.clone(),
            resource: x.resource.clone(),
            scopes: o.scopes.clone(),
            requested_token_type: x.requested_token_type.clone(),
            subject_token_type: x.subject_token_type.clone(),
            actor: x.actor,
            client: sluice_oauth::ClientCredentials {
                issuer,
                client_id: o.client_id.clone().unwrap_or_default(),
                client_secret: o.client_secret.clone(),
                auth_method,
            },
            signing_key,
        },
        ctx.fetcher.clone(),
    ))))
}

/// How a user connects their own account, for the "needs login" of a per-user identity.
pub fn connect_hint(upstream: &str) -> String {
    format!(
        "connect your own account to {upstream}: call one of its tools and open the link your client shows"
    )
}

/// A `per_user` upstream's identities, one per principal, each with its own grant in the vault
/// under [`user_grant_key`]. Made once per upstream (its configuration and the gateway's
/// [`OAuthContext`]); an identity is made at a principal's first use and kept.
pub struct PerUser {
    upstream: String,
    template: IdentityConfig,
    ctx: OAuthContext,
    identities: Mutex<HashMap<String, Arc<Identity>>>,
}

impl std::fmt::Debug for PerUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerUser")
            .field("upstream", &self.upstream)
            .field("held", &self.identities.lock().len())
            .finish()
    }
}

impl PerUser {
    /// The per-user identities of `spec` (None: it is not a `per_user` upstream). Err: its key
    /// file does not load.
    pub fn new(spec: &UpstreamSpec, ctx: &OAuthContext) -> Result<Option<PerUser>, IdentityError> {
        let Some(o) = spec.oauth.as_ref().filter(|o| o.mode == OAuthMode::PerUser) else {
            return Ok(None);
        };
        Ok(Some(PerUser {
            upstream: spec.id.clone(),
            template: IdentityConfig {
                server_url: spec.url.clone(),
                grant_key: String::new(),
                client: ctx.client_settings(spec),
                scopes: o.scopes.clone(),
                mode: Mode::Person {
                    hint: connect_hint(&spec.id),
                },
                signing_key: signing_key(spec)?,
            },
            ctx: ctx.clone(),
            identities: Mutex::new(HashMap::new()),
        }))
    }

    /// The upstream's id.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// The `private_key_jwt` key its users' grants are refreshed with, when configured.
    pub fn signing_key(&self) -> Option<&SigningKey> {
        self.template.signing_key.as_ref()
    }

    /// The gateway's OAuth context (vault, fetcher, public URL).
    pub fn context(&self) -> &OAuthContext {
        &self.ctx
    }

    /// Does `principal` hold a grant in memory now (an identity already made that holds a
    /// token; no vault read, none made)?
    pub fn holds(&self, principal: &str) -> bool {
        self.identities
            .lock()
            .get(principal)
            .is_some_and(|i| i.holds_grant())
    }

    /// `principal`'s identity toward this upstream (made at the first use, then kept). Its
    /// [`Identity::ready`] says "needs login" with [`connect_hint`] until the principal has
    /// connected; [`Identity::start_sign_in_for`] starts that.
    pub fn identity(&self, principal: &str) -> Arc<Identity> {
        let mut held = self.identities.lock();
        if let Some(i) = held.get(principal) {
            return i.clone();
        }
        let mut cfg = self.template.clone();
        cfg.grant_key = user_grant_key(&self.upstream, principal);
        let identity = Identity::new(cfg, self.ctx.fetcher.clone(), self.ctx.vault.clone(), None);
        held.insert(principal.to_string(), identity.clone());
        identity
    }

    /// Whether `principal` holds a grant for this upstream (in memory or in the vault; a vault
    /// that fails counts as not, and is logged) that needs no new sign-in (the upstream asked
    /// for more scopes, or its refresh was refused: the principal must connect again).
    pub async fn connected(&self, principal: &str) -> bool {
        let identity = self.identity(principal);
        match identity.ready().await {
            Ok(()) => !matches!(identity.status(), Status::NeedsLogin(_)),
            Err(AuthError::NeedsLogin(_)) => false,
            Err(e) => {
                tracing::warn!(upstream = %self.upstream, "reading a user's grant failed: {e}");
                false
            }
        }
    }

    /// Every principal with a grant for this upstream, with its status (expiry, scopes,
    /// whether it refreshes), in the vault's order (sorted by principal).
    pub async fn principals(&self) -> Result<Vec<(String, Status)>, AuthError> {
        principals_of(&self.ctx.vault, &self.upstream).await
    }

    /// Forget what is held in memory of `principal`'s grant (it was revoked on another
    /// replica): the next use reads the vault again.
    pub fn forget(&self, principal: &str) {
        self.identities.lock().remove(principal);
    }

    /// End `principal`'s connection: the grant is forgotten (memory and vault) and revoked at
    /// the authorization server when it has a revocation endpoint (RFC 7009). `Ok(None)`: the
    /// principal held no grant.
    pub async fn revoke(&self, principal: &str) -> Result<Option<Revoked>, AuthError> {
        let identity = self.identity(principal);
        let outcome = identity.revoke().await;
        self.identities.lock().remove(principal);
        outcome
    }
}

/// Every principal with a grant for `upstream` in `vault`, with its status: what
/// [`PerUser::principals`] reads, for the CLI, which has no [`PerUser`].
pub async fn principals_of(
    vault: &Vault,
    upstream: &str,
) -> Result<Vec<(String, Status)>, AuthError> {
    let prefix = user_grant_key(upstream, "");
    let mut out = Vec::new();
    for key in vault.keys(flow::GRANTS).await? {
        let Some(principal) = key.strip_prefix(&prefix) else {
            continue;
        };
        let Some(g) = flow::load(vault, &key).await? else {
            continue;
        };
        out.push((
            principal.to_string(),
            Status::Connected {
                expires_at: g.expires_at,
                scopes: g.scopes.clone(),
                refreshable: g.refresh_token.is_some(),
            },
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_config::{Transport, UpstreamOAuth};
    use sluice_oauth::{ClientCredentials, Grant};
    use sluice_vault::Keyring;

    fn ctx() -> OAuthContext {
        OAuthContext {
            vault: Vault::memory(Keyring::new(vec![[7u8; 32]]).unwrap()),
            fetcher: Fetcher::new(Vec::new()),
            public_url: "http://127.0.0.1:8750".into(),
            home_hint: None,
        }
    }

    fn spec(id: &str, mode: OAuthMode) -> UpstreamSpec {
        let mut s = UpstreamSpec::http(id, "http://127.0.0.1:9/mcp", Transport::Http);
        s.oauth = Some(UpstreamOAuth {
            mode,
            client_id: None,
            client_secret: None,
            issuer: None,
            scopes: vec!["crm.read".into()],
            token_endpoint_auth: None,
            private_key_file: None,
            signing_alg: None,
            client_metadata_url: None,
            exchange: None,
            enterprise: None,
        });
        s
    }

    fn grant(token: &str) -> Grant {
        Grant {
            access_token: token.into(),
            refresh_token: Some(format!("{token}-refresh")),
            expires_at: Some(4_000_000_000),
            scopes: vec!["crm.read".into()],
            token_endpoint: "http://127.0.0.1:9/token".into(),
            resource: None,
            client: ClientCredentials {
                issuer: "http://127.0.0.1:9".into(),
                client_id: "c".into(),
                client_secret: None,
                auth_method: "none".into(),
            },
            obtained_at: 0,
            revocation_endpoint: None,
        }
    }

    #[test]
    fn an_exchange_upstream_has_an_exchanger_and_no_identity() {
        let c = ctx();
        let mut s = spec("crm", OAuthMode::Exchange);
        let o = s.oauth.as_mut().unwrap();
        o.client_id = Some("sluice".into());
        o.client_secret = Some("gateway-secret".into());
        o.exchange = Some(sluice_config::TokenExchange {
            token_endpoint: "https://idp.example.com/oauth/token".into(),
            audience: Some("crm".into()),
            resource: None,
            requested_token_type: sluice_config::ACCESS_TOKEN_TYPE.into(),
            subject_token_type: sluice_config::ACCESS_TOKEN_TYPE.into(),
            actor: true,
        });
        assert!(identity_for(&s, &c).unwrap().is_none());
        let x = exchanger_for(&s, &c).unwrap().unwrap();
        let cfg = x.config();
        assert_eq!(cfg.client.auth_method, "client_secret_basic");
        assert_eq!(cfg.client.issuer, "https://idp.example.com");
        assert_eq!(cfg.scopes, ["crm.read"]);
        assert!(cfg.actor);
        assert!(!format!("{x:?}").contains("gateway-secret"));
        assert!(exchanger_for(&spec("crm", OAuthMode::PerUser), &c)
            .unwrap()
            .is_none());
    }

    #[test]
    fn only_per_user_upstreams_have_one() {
        let c = ctx();
        assert!(PerUser::new(&spec("crm", OAuthMode::Shared), &c)
            .unwrap()
            .is_none());
        assert!(PerUser::new(&spec("crm", OAuthMode::PerUser), &c)
            .unwrap()
            .is_some());
        assert_eq!(user_grant_key("crm", "jwt:alice"), "user:crm:jwt:alice");
        assert_eq!(
            parse_user_grant_key("user:crm:jwt:alice"),
            Some(("crm", "jwt:alice"))
        );
        assert_eq!(parse_user_grant_key(&grant_key("crm")), None);
    }

    #[tokio::test]
    async fn each_principal_has_its_own_grant() {
        let c = ctx();
        let users = PerUser::new(&spec("crm", OAuthMode::PerUser), &c)
            .unwrap()
            .unwrap();
        // A grant of the same name for another upstream, and the shared one: neither is a
        // user's grant for crm.
        flow::store(
            &c.vault,
            &user_grant_key("crm2", "alice"),
            &grant("crm2-alice"),
        )
        .await
        .unwrap();
        flow::store(&c.vault, &grant_key("crm"), &grant("shared"))
            .await
            .unwrap();
        assert!(!users.connected("alice").await);
        let Err(AuthError::NeedsLogin(hint)) = users.identity("alice").ready().await else {
            panic!("alice is not connected yet");
        };
        assert_eq!(hint, connect_hint("crm"));

        flow::store(
            &c.vault,
            &user_grant_key("crm", "alice"),
            &grant("alice-token"),
        )
        .await
        .unwrap();
        assert!(users.connected("alice").await);
        let alice = users.identity("alice");
        assert_eq!(
            alice.bearer().unwrap().to_str().unwrap(),
            "Bearer alice-token"
        );
        assert!(Arc::ptr_eq(&alice, &users.identity("alice")));
        // Bob never reads Alice's grant, however he asks.
        assert!(!users.connected("bob").await);
        let bob = users.identity("bob");
        assert!(bob.bearer().is_none());
        assert!(!bob.reload().await.unwrap());
        assert!(matches!(bob.ready().await, Err(AuthError::NeedsLogin(_))));
        // A principal whose name extends another's is another principal.
        assert!(!users.connected("alice:evil").await);
        assert!(!users.connected("").await);

        flow::store(&c.vault, &user_grant_key("crm", "bob"), &grant("bob-token"))
            .await
            .unwrap();
        assert!(users.connected("bob").await);
        assert_eq!(bob.bearer().unwrap().to_str().unwrap(), "Bearer bob-token");
        assert_eq!(
            alice.bearer().unwrap().to_str().unwrap(),
            "Bearer alice-token"
        );

        let listed = users.principals().await.unwrap();
        let names: Vec<&str> = listed.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["alice", "bob"]);
        assert_eq!(
            listed[0].1,
            Status::Connected {
                expires_at: Some(4_000_000_000),
                scopes: vec!["crm.read".into()],
                refreshable: true
            }
        );
        // Debug of the registry and its statuses hold no token.
        let shown = format!("{users:?} {listed:?} {alice:?}");
        assert!(!shown.contains("alice-token"), "{shown}");

        // Revoking Alice ends hers only (no revocation endpoint: forgotten).
        assert_eq!(
            users.revoke("alice").await.unwrap(),
            Some(Revoked::NoEndpoint)
        );
        assert_eq!(users.revoke("alice").await.unwrap(), None);
        assert!(!users.connected("alice").await);
        assert!(users.identity("alice").bearer().is_none());
        assert!(users.connected("bob").await);
        let names: Vec<String> = users
            .principals()
            .await
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(names, ["bob"]);
        assert!(flow::load(&c.vault, &grant_key("crm"))
            .await
            .unwrap()
            .is_some());
    }
}
