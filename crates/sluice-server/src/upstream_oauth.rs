//! The gateway's side of signing in to its upstreams: the vault and public URL every OAuth
//! upstream shares, the callback an authorization server sends a person back to, the client ID
//! metadata document, and the pages they share, all on the MCP listener under the public URL
//! (a user's connect link is `connect_page.rs`).

use crate::state::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_config::Config;
use sluice_oauth::{flow, Fetcher};
use sluice_upstream::identity::{parse_user_grant_key, CLIENT_METADATA_PATH};
use sluice_upstream::{OAuthContext, PerUser};
use sluice_vault::{Keyring, Vault};
use std::sync::Arc;

/// Why the vault a configuration names cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum VaultOpenError {
    /// Its keys are not usable.
    #[error("vault: {0}")]
    Keys(#[from] sluice_vault::KeyError),
    /// The file or Redis could not be opened.
    #[error("vault: {0}")]
    Open(#[from] sluice_vault::VaultError),
}

/// The vault a configuration names: Redis with `cluster` (every replica shares the grants),
/// else the file.
pub fn vault_of(config: &Config) -> Result<Option<Vault>, VaultOpenError> {
    let Some(v) = &config.settings.vault else {
        return Ok(None);
    };
    let keys = Keyring::new(v.keys.clone())?;
    let vault = match &config.settings.cluster {
        Some(c) => Vault::redis(&c.redis, keys),
        None => Vault::open_file(&v.path, keys),
    }?;
    Ok(Some(vault))
}

/// What OAuth upstreams share (None: no vault configured, or it does not open — logged).
pub(crate) fn context(config: &Config) -> Option<Arc<OAuthContext>> {
    let vault = match vault_of(config) {
        Ok(v) => v?,
        Err(e) => {
            tracing::error!("{e}; upstreams with oauth stay down");
            return None;
        }
    };
    Some(Arc::new(OAuthContext {
        vault,
        fetcher: Fetcher::new(config.settings.oauth_http_hosts.clone()),
        public_url: config.public_url(),
        home_hint: Some(config.home.display().to_string()),
    }))
}

/// `GET /oauth/callback?code=…&state=…`: finish the sign-in parked under `state`, hand the
/// grant to its upstream and start it; a page says how it went (never a token or code).
pub(crate) async fn callback(st: &Arc<State>, query: Option<&str>) -> Response {
    let Some(ctx) = st.rt.slot_env().oauth.clone() else {
        return page(
            StatusCode::NOT_FOUND,
            "Sign-in",
            "No upstream of this gateway signs in with OAuth.",
        );
    };
    let snapshot = st.snapshot();
    let slots = snapshot.slots.clone();
    let key_for = |p: &flow::Pending| {
        if let Some((upstream, _)) = parse_user_grant_key(&p.grant_key) {
            return per_user(&slots, &ctx, upstream).and_then(|users| users.signing_key().cloned());
        }
        slots
            .iter()
            .filter_map(|s| s.identity())
            .find(|i| i.config().grant_key == p.grant_key)
            .and_then(|i| i.config().signing_key.clone())
    };
    match flow::complete(&ctx.vault, &ctx.fetcher, query.unwrap_or(""), key_for).await {
        Ok((pending, _grant)) if parse_user_grant_key(&pending.grant_key).is_some() => {
            let (upstream, principal) =
                parse_user_grant_key(&pending.grant_key).unwrap_or_default();
            tracing::info!(%upstream, %principal, "a user connected their account");
            if let Some(slot) = snapshot.slots.iter().find(|s| s.spec.id == upstream) {
                // The user's identity takes the new grant now (one that asked for more scopes
                // is met, and its old token is not used again).
                if let Some(users) = slot.per_user() {
                    if let Err(e) = users.identity(principal).signed_in().await {
                        tracing::warn!(%upstream, %principal, "reading a user's new grant failed: {e}");
                    }
                }
                // A per-user upstream with no shared login lists its tools with a connected
                // user's grant: the first one to connect brings it up.
                if !slot.is_up() {
                    slot.retry_now();
                }
            }
            page(
                StatusCode::OK,
                "Connected",
                &format!(
                    "Your account is connected to {upstream}. You can close this window and go back to your client."
                ),
            )
        }
        Ok((pending, _grant)) => {
            let mut name = pending.grant_key.clone();
            for slot in snapshot.slots.iter() {
                let Some(identity) = slot.identity() else {
                    continue;
                };
                if identity.config().grant_key != pending.grant_key {
                    continue;
                }
                name = slot.spec.id.clone();
                if let Err(e) = identity.signed_in().await {
                    tracing::warn!(upstream = %slot.spec.id, "reading the new grant failed: {e}");
                }
                slot.retry_now();
                if slot.is_up() {
                    slot.restart().await;
                }
            }
            tracing::info!(upstream = %name, "signed in");
            page(
                StatusCode::OK,
                "Connected",
                &format!("Sluice is connected to {name}. You can close this window."),
            )
        }
        Err(e) => {
            tracing::warn!("a sign-in callback was refused: {e}");
            page(StatusCode::BAD_REQUEST, "Sign-in failed", &e.to_string())
        }
    }
}

/// Write every user connection event (connect, declined, failed, revoke, refresh failure) as an
/// audit line: its method is the event (`oauth.connect`, …), with the principal, the upstream,
/// the outcome and the reason; never a token. A revoke made here is told to the other replicas
/// of a cluster (each forgets the grant it holds in memory and closes that connection). Runs
/// until the gateway shuts down.
pub(crate) async fn audit_connections(st: Arc<State>) {
    use sluice_oauth::events::{self, ConnectionEventKind as Kind};
    let mut rx = events::subscribe();
    let shutdown = st.rt.shutdown().clone();
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = rx.recv() => e,
        };
        let event = match event {
            Ok(e) => e,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!("{n} user connection events were not audited (too many at once)");
                continue;
            }
            Err(_) => return,
        };
        if event.kind == Kind::Revoked {
            st.rt
                .scale()
                .user_revoked(&event.upstream, &event.principal);
        }
        let outcome = match event.kind {
            Kind::Connected | Kind::Revoked => "ok",
            Kind::Declined => "refused",
            Kind::Failed | Kind::RefreshFailed => "error",
        };
        let line = sluice_telemetry::Exchange::new(
            sluice_telemetry::Caller {
                session: "",
                client: None,
                principal: Some(&event.principal),
            },
            sluice_telemetry::Ended {
                method: event.kind.name(),
                tool: None,
                upstream: Some(&event.upstream),
                started: std::time::Instant::now(),
                outcome,
                error: event.detail.clone(),
                trace: &sluice_hooks::Trace::default(),
            },
        );
        st.snapshot().audit.write(&line);
    }
}

/// The per-user identities of the upstream `id`, when it is one of `slots` and connects per user.
pub(crate) fn per_user(
    slots: &[Arc<sluice_upstream::Slot>],
    ctx: &OAuthContext,
    id: &str,
) -> Option<PerUser> {
    let slot = slots.iter().find(|s| s.spec.id == id)?;
    match PerUser::new(&slot.spec, ctx) {
        Ok(users) => users,
        Err(e) => {
            tracing::warn!(upstream = %id, "its per-user identity cannot be made: {e}");
            None
        }
    }
}

/// `GET /oauth/client-metadata.json`: this gateway's client ID metadata document.
pub(crate) fn client_metadata(st: &Arc<State>) -> Response {
    let Some(ctx) = st.rt.slot_env().oauth.clone() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let spec = sluice_config::UpstreamSpec::http("", "", sluice_config::Transport::Http);
    let settings = ctx.client_settings(&spec);
    let url = format!("{}{CLIENT_METADATA_PATH}", ctx.public_url);
    let doc = sluice_oauth::client::metadata(&settings, Some(&url), "none");
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        doc.to_string(),
    )
        .into_response()
}

pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A small HTML page with `title` and `text` (escaped).
pub(crate) fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>{t}</title><body style=\"font-family:sans-serif;margin:3em\"><h1>{t}</h1><p>{x}</p></body>",
        t = esc(title),
        x = esc(text)
    );
    html(status, body)
}

/// An HTML answer: never cached, never framed (a confirmation button must not be clicked
/// through another site's frame), and no referrer (a connect link's URL is a secret).
pub(crate) fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
                ),
            ),
        ],
        body,
    )
        .into_response()
}
