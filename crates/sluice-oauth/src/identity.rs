//! One upstream's identity at run time: the access token in memory (what every request sends,
//! read without a lock), refreshed before it expires and after a 401 (once across processes and
//! replicas: a vault lock), stepped up after a 403 `insufficient_scope`, and signed in again —
//! by a person through [`Consent`], or by the client credentials grant — when nothing else works.

use crate::challenge::Challenge;
use crate::client::{self, ClientSettings};
use crate::discovery::{self, Discovered};
use crate::error::AuthError;
use crate::fetch::Fetcher;
use crate::flow::{self, Callback};
use crate::token::{self, Grant, SigningKey, TokenRequest};
use arc_swap::ArcSwapOption;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use reqwest::header::HeaderValue;
use sluice_vault::Vault;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::token::REFRESH_MARGIN;
/// How long a refresh holds the vault lock at most (a holder that died frees it then).
pub const REFRESH_LOCK_TTL: Duration = Duration::from_secs(15);
/// Authorizations tried for more scopes before giving up.
pub const STEP_UP_LIMIT: u32 = 3;
/// The vault table of scopes a step-up found missing (key: the grant key), asked for at the
/// next sign-in.
pub const WANTED: &str = "oauth.wanted";

/// How a person is asked to sign in: open the URL, and hand back the callback's query.
pub trait Consent: Send + Sync {
    /// The redirect URI the callback arrives at.
    fn redirect_uri(&self) -> String;
    /// Show `url` to the person (or open it) and wait for the callback's query string.
    fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, AuthError>>;
}

/// How an identity gets a grant when it has none.
#[derive(Clone)]
pub enum Mode {
    /// A person signs in (once: the operator for the gateway, the user for the CLI); without
    /// [`Consent`] the identity says "needs login" with `hint`.
    Person {
        /// How to sign in, for the "needs login" message (`run sluice upstream login ID`).
        hint: String,
    },
    /// The client credentials grant, by the client itself (no person).
    ClientCredentials,
    /// Enterprise-managed authorization (no person): an identity assertion exchanged at the
    /// IdP for an ID-JAG, presented at the authorization server with the JWT bearer grant.
    Enterprise(Arc<crate::enterprise::EnterpriseConfig>),
}

/// What an identity is.
#[derive(Clone)]
pub struct IdentityConfig {
    /// The MCP server's URL.
    pub server_url: String,
    /// Where its grant lives in the vault (`upstream:ID`).
    pub grant_key: String,
    /// The client.
    pub client: ClientSettings,
    /// Scopes to ask for (empty: as discovered).
    pub scopes: Vec<String>,
    /// How it gets a grant.
    pub mode: Mode,
    /// A `private_key_jwt` key.
    pub signing_key: Option<SigningKey>,
}

/// What the admin page and `sluice upstream` show.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Not yet known (not loaded).
    Unknown,
    /// A grant is held.
    Connected {
        /// When its access token expires (seconds since the epoch).
        expires_at: Option<u64>,
        /// Its scopes.
        scopes: Vec<String>,
        /// Whether it can refresh.
        refreshable: bool,
    },
    /// A person must sign in; why.
    NeedsLogin(String),
    /// Signing in or refreshing failed; why.
    Failed(String),
}

/// One upstream's identity.
pub struct Identity {
    cfg: IdentityConfig,
    fetcher: Fetcher,
    vault: Vault,
    consent: Option<Arc<dyn Consent>>,
    /// `Bearer …` of the grant in force.
    header: ArcSwapOption<HeaderValue>,
    /// Its expiry (seconds since the epoch; 0 = none said).
    expires_at: AtomicU64,
    /// The `sub` its access token names ([`token::jwt_subject`]).
    subject: ArcSwapOption<String>,
    grant: Mutex<Option<Grant>>,
    status: Mutex<Status>,
    /// One refresh or sign-in at a time in this process.
    gate: tokio::sync::Mutex<()>,
    refreshing: AtomicBool,
    step_ups: AtomicU32,
}

impl Identity {
    /// An identity (nothing loaded yet: see [`Identity::ready`]).
    pub fn new(
        cfg: IdentityConfig,
        fetcher: Fetcher,
        vault: Vault,
        consent: Option<Arc<dyn Consent>>,
    ) -> Arc<Identity> {
        Arc::new(Identity {
            cfg,
            fetcher,
            vault,
            consent,
            header: ArcSwapOption::empty(),
            expires_at: AtomicU64::new(0),
            subject: ArcSwapOption::empty(),
            grant: Mutex::new(None),
            status: Mutex::new(Status::Unknown),
            gate: tokio::sync::Mutex::new(()),
            refreshing: AtomicBool::new(false),
            step_ups: AtomicU32::new(0),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &IdentityConfig {
        &self.cfg
    }

    /// The status now.
    pub fn status(&self) -> Status {
        self.status.lock().clone()
    }

    /// The `Authorization` value to send now, if a grant is held. A token within a minute of
    /// its expiry is refreshed in the background (the request still goes with it).
    pub fn bearer(self: &Arc<Self>) -> Option<Arc<HeaderValue>> {
        let h = self.header.load_full();
        let exp = self.expires_at.load(Ordering::Relaxed);
        if h.is_some()
            && exp != 0
            && token::now() + REFRESH_MARGIN.as_secs() >= exp
            && !self.refreshing.swap(true, Ordering::AcqRel)
        {
            let me = self.clone();
            let used = h.clone();
            tokio::spawn(async move {
                let outcome = me.renew(used.as_deref(), &Challenge::default(), true).await;
                if let Err(e) = outcome {
                    tracing::warn!(grant = %me.cfg.grant_key, "refreshing before expiry failed: {e}");
                }
                me.refreshing.store(false, Ordering::Release);
            });
        }
        h
    }

    /// Does it hold a grant in memory now (no vault read)?
    pub fn holds_grant(&self) -> bool {
        self.header.load().is_some()
    }

    /// The `sub` of the account its token acts as, when the access token names one (a JWT
    /// access token; an opaque one names none). Never the token.
    pub fn subject(&self) -> Option<Arc<String>> {
        self.subject.load_full()
    }

    /// Before connecting: the grant from memory or the vault; for client credentials, a token
    /// when one can be had without discovery. `Err(NeedsLogin)` when a person must sign in and
    /// no [`Consent`] is at hand.
    pub async fn ready(self: &Arc<Self>) -> Result<(), AuthError> {
        if self.header.load().is_some() {
            return Ok(());
        }
        let _g = self.gate.lock().await;
        if self.header.load().is_some() {
            return Ok(());
        }
        if let Some(g) = flow::load(&self.vault, &self.cfg.grant_key).await? {
            self.install(g);
            return Ok(());
        }
        match (&self.cfg.mode, &self.consent) {
            (Mode::Person { hint }, None) => {
                *self.status.lock() = Status::NeedsLogin(hint.clone());
                Err(AuthError::NeedsLogin(hint.clone()))
            }
            // A 401 will say where to sign in.
            _ => Ok(()),
        }
    }

    /// Read the grant again from the vault (a sign-in finished elsewhere); true when one is held.
    pub async fn reload(&self) -> Result<bool, AuthError> {
        match flow::load(&self.vault, &self.cfg.grant_key).await? {
            Some(g) => {
                self.install(g);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Forget the grant (in memory and in the vault).
    pub async fn forget(&self) -> Result<(), AuthError> {
        self.vault.delete(flow::GRANTS, &self.cfg.grant_key).await?;
        self.header.store(None);
        self.subject.store(None);
        *self.grant.lock() = None;
        *self.status.lock() = Status::Unknown;
        Ok(())
    }

    /// End the grant: forget it (in memory and in the vault), then revoke it at its
    /// authorization server (RFC 7009) when that has a revocation endpoint. `Ok(None)`: no grant
    /// was held. A refused revocation is an error, and the grant is forgotten all the same.
    pub async fn revoke(&self) -> Result<Option<crate::Revoked>, AuthError> {
        let _g = self.gate.lock().await;
        let grant = match flow::load(&self.vault, &self.cfg.grant_key).await? {
            Some(g) => Some(g),
            None => self.grant.lock().clone(),
        };
        self.forget().await?;
        let Some(grant) = grant else {
            return Ok(None);
        };
        let done =
            crate::revoke::revoke(&self.fetcher, &grant, self.cfg.signing_key.as_ref()).await;
        crate::events::emit(
            &self.cfg.grant_key,
            crate::events::ConnectionEventKind::Revoked,
            done.as_ref().err().map(ToString::to_string),
        );
        done.map(Some)
    }

    /// A request sent with `used` was answered 401 or 403 with `challenge`: fix what can be
    /// fixed (refresh, step-up, sign in again). Ok: send it again with [`Identity::bearer`].
    pub async fn refused(
        self: &Arc<Self>,
        status: u16,
        challenge: &Challenge,
        used: Option<&HeaderValue>,
    ) -> Result<(), AuthError> {
        if status == 403 && challenge.insufficient_scope() {
            return self.step_up(challenge, used).await;
        }
        self.renew(used, challenge, false).await
    }

    /// A request went through: the step-up count starts again.
    pub fn accepted(&self) {
        if self.step_ups.load(Ordering::Relaxed) != 0 {
            self.step_ups.store(0, Ordering::Relaxed);
        }
    }

    /// Sign in now when no grant is held and the server asks for one (a person, through the
    /// [`Consent`]; or the client credentials grant): before connecting, so the person's time
    /// is not counted against a request's deadline. Nothing happens when a grant is held or
    /// the server asks for no token.
    pub async fn sign_in_if_needed(self: &Arc<Self>) -> Result<(), AuthError> {
        self.ready().await?;
        if self.header.load().is_some() {
            return Ok(());
        }
        let Some(challenge) = discovery::probe(&self.fetcher, &self.cfg.server_url).await? else {
            return Ok(());
        };
        let _g = self.gate.lock().await;
        if self.header.load().is_some() {
            return Ok(());
        }
        self.obtain(&challenge, &[]).await
    }

    fn install(&self, g: Grant) {
        let value = HeaderValue::from_str(&format!("Bearer {}", g.access_token)).ok();
        if let Some(v) = value.as_ref() {
            let mut v = v.clone();
            v.set_sensitive(true);
            self.header.store(Some(Arc::new(v)));
        }
        self.expires_at
            .store(g.expires_at.unwrap_or(0), Ordering::Relaxed);
        self.subject
            .store(token::jwt_subject(&g.access_token).map(Arc::new));
        *self.status.lock() = Status::Connected {
            expires_at: g.expires_at,
            scopes: g.scopes.clone(),
            refreshable: g.refresh_token.is_some(),
        };
        *self.grant.lock() = Some(g);
    }

    fn changed_since(&self, used: Option<&HeaderValue>) -> bool {
        let now = self.header.load();
        match (now.as_deref(), used) {
            (Some(n), Some(u)) => n != u,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// A new access token: adopt one another process stored, else refresh, else sign in again.
    async fn renew(
        self: &Arc<Self>,
        used: Option<&HeaderValue>,
        challenge: &Challenge,
        early: bool,
    ) -> Result<(), AuthError> {
        let _g = self.gate.lock().await;
        if self.changed_since(used) {
            return Ok(());
        }
        // Once across processes and replicas. The lock outlives a token request (10 s) and
        // expires by itself when its holder died; a waiter outwaits it.
        let lock = self
            .vault
            .lock(
                &format!("refresh:{}", self.cfg.grant_key),
                REFRESH_LOCK_TTL,
                REFRESH_LOCK_TTL + Duration::from_secs(5),
            )
            .await?;
        let outcome = self.renew_locked(used, challenge, early).await;
        lock.release().await;
        outcome
    }

    async fn renew_locked(
        self: &Arc<Self>,
        used: Option<&HeaderValue>,
        challenge: &Challenge,
        early: bool,
    ) -> Result<(), AuthError> {
        let stored = flow::load(&self.vault, &self.cfg.grant_key).await?;
        if let Some(g) = &stored {
            let fresh = used.is_none_or(|u| {
                u.to_str()
                    .ok()
                    .and_then(|s| s.strip_prefix("Bearer "))
                    .is_none_or(|t| t != g.access_token)
            });
            let usable = !g.expires_within(if early {
                REFRESH_MARGIN
            } else {
                Duration::ZERO
            });
            if fresh && usable {
                self.install(g.clone());
                return Ok(());
            }
        }
        if stored.is_none() && self.grant.lock().is_some() {
            // Removed from the vault (`sluice upstream logout`): not refreshed back into it.
            self.header.store(None);
            self.subject.store(None);
            *self.grant.lock() = None;
            if matches!(self.cfg.mode, Mode::Person { .. }) && self.consent.is_none() {
                return Err(self.needs_login("the grant was removed from the vault"));
            }
        }
        if let Some(g) = stored {
            match (&self.cfg.mode, &g.refresh_token) {
                (_, Some(rt)) => {
                    match token::request(
                        &self.fetcher,
                        &g.token_endpoint,
                        &g.client,
                        self.cfg.signing_key.as_ref(),
                        g.resource.as_deref(),
                        TokenRequest::Refresh(rt),
                    )
                    .await
                    {
                        Ok(t) => {
                            let ng = t.into_grant(
                                g.client.clone(),
                                &g.token_endpoint,
                                g.resource.clone(),
                                &g.scopes,
                                Some(&g),
                            );
                            flow::store(&self.vault, &self.cfg.grant_key, &ng).await?;
                            self.install(ng);
                            tracing::info!(grant = %self.cfg.grant_key, "access token refreshed");
                            return Ok(());
                        }
                        Err(e) => {
                            tracing::warn!(grant = %self.cfg.grant_key, "refresh failed: {e}");
                            crate::events::emit(
                                &self.cfg.grant_key,
                                crate::events::ConnectionEventKind::RefreshFailed,
                                Some(e.to_string()),
                            );
                            if early {
                                return Err(e);
                            }
                            self.drop_grant().await?;
                            if self.consent.is_none()
                                && matches!(self.cfg.mode, Mode::Person { .. })
                            {
                                return Err(
                                    self.needs_login(&format!("the refresh was refused ({e})"))
                                );
                            }
                        }
                    }
                }
                // A new grant from the assertion, as at first.
                (Mode::Enterprise(_), None) => return self.obtain(challenge, &[]).await,
                (Mode::ClientCredentials, None) => {
                    return self
                        .client_credentials(
                            &g.token_endpoint,
                            g.client.clone(),
                            g.resource.clone(),
                            &g.scopes,
                        )
                        .await;
                }
                (Mode::Person { .. }, None) => {
                    if early {
                        return Ok(());
                    }
                    self.drop_grant().await?;
                    if self.consent.is_none() {
                        return Err(self.needs_login(
                            "the upstream refused the access token and there is no refresh token",
                        ));
                    }
                }
            }
        } else if early {
            return Ok(());
        }
        self.obtain(challenge, &[]).await
    }

    async fn drop_grant(&self) -> Result<(), AuthError> {
        self.vault.delete(flow::GRANTS, &self.cfg.grant_key).await?;
        self.header.store(None);
        self.subject.store(None);
        *self.grant.lock() = None;
        Ok(())
    }

    fn needs_login(&self, why: &str) -> AuthError {
        let hint = match &self.cfg.mode {
            Mode::Person { hint } => hint.clone(),
            Mode::ClientCredentials | Mode::Enterprise(_) => String::new(),
        };
        let text = if hint.is_empty() {
            why.to_string()
        } else {
            format!("{why}; {hint}")
        };
        *self.status.lock() = Status::NeedsLogin(text.clone());
        AuthError::NeedsLogin(text)
    }

    /// A 403 `insufficient_scope`: ask again with the union of what is held and what is asked.
    async fn step_up(
        self: &Arc<Self>,
        challenge: &Challenge,
        used: Option<&HeaderValue>,
    ) -> Result<(), AuthError> {
        let _g = self.gate.lock().await;
        if self.changed_since(used) {
            return Ok(());
        }
        // A sign-in elsewhere (the callback on another replica, the CLI) may have stored a
        // grant with more scopes already.
        if let Some(g) = flow::load(&self.vault, &self.cfg.grant_key).await? {
            let newer = used
                .and_then(|u| u.to_str().ok())
                .and_then(|s| s.strip_prefix("Bearer "))
                .is_none_or(|t| t != g.access_token);
            if newer {
                self.install(g);
                return Ok(());
            }
        }
        let tries = self.step_ups.fetch_add(1, Ordering::Relaxed) + 1;
        if tries > STEP_UP_LIMIT {
            return Err(AuthError::RetryLimit(STEP_UP_LIMIT));
        }
        let mut scopes = self
            .grant
            .lock()
            .as_ref()
            .map(|g| g.scopes.clone())
            .unwrap_or_else(|| self.cfg.scopes.clone());
        let before = scopes.len();
        for s in challenge.scope.iter().flatten() {
            if !scopes.contains(s) {
                scopes.push(s.clone());
            }
        }
        if scopes.len() == before {
            // Asking again for what was granted would be refused the same way.
            return Err(AuthError::ScopeRefused(scopes.join(" ")));
        }
        match (&self.cfg.mode, &self.consent) {
            (Mode::Person { .. }, None) => {
                let bytes = serde_json::to_vec(&scopes).unwrap_or_default();
                self.vault.put(WANTED, &self.cfg.grant_key, &bytes).await?;
                Err(self.needs_login(&format!(
                    "the server asks for more scopes ({})",
                    scopes.join(" ")
                )))
            }
            (Mode::ClientCredentials, _) => {
                let g = self.grant.lock().clone();
                match g {
                    Some(g) => {
                        self.client_credentials(
                            &g.token_endpoint,
                            g.client.clone(),
                            g.resource.clone(),
                            &scopes,
                        )
                        .await
                    }
                    None => self.obtain(challenge, &scopes).await,
                }
            }
            (Mode::Person { .. }, Some(_)) | (Mode::Enterprise(_), _) => {
                self.obtain(challenge, &scopes).await
            }
        }
    }

    /// Enterprise-managed authorization: the assertion exchanged at the IdP for an ID-JAG
    /// toward the authorization server of `d`, then presented there (JWT bearer grant).
    async fn enterprise(
        &self,
        e: &crate::enterprise::EnterpriseConfig,
        d: &discovery::Discovered,
        client: client::ClientCredentials,
        scopes: &[String],
    ) -> Result<(), AuthError> {
        let resource = d.resource.resource.clone();
        let failed = |e: &AuthError| *self.status.lock() = Status::Failed(e.to_string());
        let jag = crate::enterprise::id_jag(
            &self.fetcher,
            e,
            &d.server.issuer,
            resource.as_deref().unwrap_or(&self.cfg.server_url),
            scopes,
        )
        .await
        .inspect_err(failed)?;
        let t = crate::enterprise::access_token(
            &self.fetcher,
            &d.server.token_endpoint,
            &client,
            self.cfg.signing_key.as_ref(),
            &jag,
            resource.as_deref(),
            scopes,
        )
        .await
        .inspect_err(failed)?;
        let g = t.into_grant(client, &d.server.token_endpoint, resource, scopes, None);
        flow::store(&self.vault, &self.cfg.grant_key, &g).await?;
        self.install(g);
        Ok(())
    }

    async fn client_credentials(
        &self,
        token_endpoint: &str,
        client: client::ClientCredentials,
        resource: Option<String>,
        scopes: &[String],
    ) -> Result<(), AuthError> {
        let t = token::request(
            &self.fetcher,
            token_endpoint,
            &client,
            self.cfg.signing_key.as_ref(),
            resource.as_deref(),
            TokenRequest::ClientCredentials(scopes),
        )
        .await
        .inspect_err(|e| *self.status.lock() = Status::Failed(e.to_string()))?;
        let g = t.into_grant(client, token_endpoint, resource, scopes, None);
        flow::store(&self.vault, &self.cfg.grant_key, &g).await?;
        self.install(g);
        Ok(())
    }

    /// A grant from nothing: discovery from `challenge`, the client's identity, then the
    /// client credentials grant or a person's sign-in. `more`: scopes a step-up asks for.
    async fn obtain(
        self: &Arc<Self>,
        challenge: &Challenge,
        more: &[String],
    ) -> Result<(), AuthError> {
        if matches!(self.cfg.mode, Mode::Person { .. }) && self.consent.is_none() {
            return Err(self.needs_login("not signed in"));
        }
        let d = discovery::discover(&self.fetcher, &self.cfg.server_url, challenge)
            .await
            .inspect_err(|e| *self.status.lock() = Status::Failed(e.to_string()))?;
        let scopes = self.scopes_for(&d, more).await?;
        let mut settings = self.cfg.client.clone();
        if let Some(c) = &self.consent {
            settings.redirect_uri = c.redirect_uri();
        }
        let client = client::identify(&self.fetcher, &self.vault, &settings, &d.server)
            .await
            .inspect_err(|e| *self.status.lock() = Status::Failed(e.to_string()))?;
        match (&self.cfg.mode, &self.consent) {
            (Mode::Enterprise(e), _) => self.enterprise(e, &d, client, &scopes).await,
            (Mode::ClientCredentials, _) => {
                let mut client = client;
                if self.cfg.signing_key.is_some() && self.cfg.client.auth_method.is_none() {
                    client.auth_method = "private_key_jwt".into();
                }
                self.client_credentials(
                    &d.server.token_endpoint,
                    client,
                    d.resource.resource.clone(),
                    &scopes,
                )
                .await
            }
            (Mode::Person { .. }, Some(consent)) => {
                let started = flow::start(
                    &d,
                    client,
                    &settings.redirect_uri,
                    &self.cfg.grant_key,
                    &scopes,
                )?;
                let query = consent.authorize(&started.url).await?;
                let grant = flow::finish(
                    &self.fetcher,
                    &started.pending,
                    &Callback::from_query(&query),
                    self.cfg.signing_key.as_ref(),
                )
                .await
                .inspect_err(|e| *self.status.lock() = Status::Failed(e.to_string()))?;
                flow::store(&self.vault, &self.cfg.grant_key, &grant).await?;
                self.install(grant);
                Ok(())
            }
            (Mode::Person { .. }, None) => Err(self.needs_login("not signed in")),
        }
    }

    /// Start a person's sign-in to be finished by a callback at `redirect_uri` (the gateway's,
    /// or the CLI's own listener): the server probed for its challenge, discovery, the client's
    /// identity, and the flow parked in the vault. The URL is for the person to open.
    pub async fn start_sign_in(&self, redirect_uri: &str) -> Result<flow::Started, AuthError> {
        self.start_sign_in_for(redirect_uri, None).await
    }

    /// [`Identity::start_sign_in`] for a user connecting their own account: the parked flow
    /// remembers the URL elicitation it answers, whose outcome its callback records
    /// ([`crate::connect`]).
    pub async fn start_sign_in_for(
        &self,
        redirect_uri: &str,
        elicitation_id: Option<&str>,
    ) -> Result<flow::Started, AuthError> {
        let challenge = discovery::probe(&self.fetcher, &self.cfg.server_url)
            .await?
            .ok_or_else(|| {
                AuthError::Config(format!(
                    "{} answers without asking for a token: there is nothing to sign in to",
                    self.cfg.server_url
                ))
            })?;
        let d = discovery::discover(&self.fetcher, &self.cfg.server_url, &challenge).await?;
        let scopes = self.scopes_for(&d, &[]).await?;
        let mut settings = self.cfg.client.clone();
        settings.redirect_uri = redirect_uri.to_string();
        let client = client::identify(&self.fetcher, &self.vault, &settings, &d.server).await?;
        let mut started = flow::start(&d, client, redirect_uri, &self.cfg.grant_key, &scopes)?;
        started.pending.elicitation_id = elicitation_id.map(str::to_string);
        flow::park(&self.vault, &started.pending).await?;
        Ok(started)
    }

    /// A sign-in finished (by a callback, here or in another process): take its grant.
    pub async fn signed_in(&self) -> Result<bool, AuthError> {
        self.step_ups.store(0, Ordering::Relaxed);
        let held = self.reload().await?;
        if held {
            self.clear_wanted().await?;
        }
        Ok(held)
    }

    /// The scopes of a new sign-in: configured, else discovered; plus those a step-up asked for.
    pub async fn scopes_for(
        &self,
        d: &Discovered,
        more: &[String],
    ) -> Result<Vec<String>, AuthError> {
        let mut scopes = if self.cfg.scopes.is_empty() {
            d.scopes.clone()
        } else {
            let mut s = self.cfg.scopes.clone();
            discovery::offline_access(&mut s, &d.server);
            s
        };
        let wanted: Vec<String> = self
            .vault
            .get(WANTED, &self.cfg.grant_key)
            .await?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        for s in wanted.iter().chain(more) {
            if !scopes.contains(s) {
                scopes.push(s.clone());
            }
        }
        Ok(scopes)
    }

    /// After a sign-in stored a grant: the step-up wish is met.
    pub async fn clear_wanted(&self) -> Result<(), AuthError> {
        self.vault.delete(WANTED, &self.cfg.grant_key).await?;
        Ok(())
    }

    /// The fetcher (for discovery by the CLI's login).
    pub fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// The vault.
    pub fn vault(&self) -> &Vault {
        &self.vault
    }
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("grant_key", &self.cfg.grant_key)
            .field("status", &*self.status.lock())
            .finish_non_exhaustive()
    }
}
