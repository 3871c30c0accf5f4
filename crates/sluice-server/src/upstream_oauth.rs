//! The gateway's side of signing in to its upstreams: the vault and public URL every OAuth
//! upstream shares, the callback an authorization server sends a person back to, and the
//! client ID metadata document, both on the MCP listener under the public URL.

use crate::state::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_config::Config;
use sluice_oauth::{flow, Fetcher};
use sluice_upstream::identity::CLIENT_METADATA_PATH;
use sluice_upstream::OAuthContext;
use sluice_vault::{Keyring, Vault};
use std::sync::Arc;

/// The vault a configuration names: Redis with `cluster` (every replica shares the grants),
/// else the file. Err: it cannot be opened (the reason, for the log).
pub fn vault_of(config: &Config) -> Result<Option<Vault>, String> {
    let Some(v) = &config.settings.vault else {
        return Ok(None);
    };
    let keys = Keyring::new(v.keys.clone()).map_err(|e| format!("vault: {e}"))?;
    let vault = match &config.settings.cluster {
        Some(c) => Vault::redis(&c.redis, keys),
        None => Vault::open_file(&v.path, keys),
    }
    .map_err(|e| format!("vault: {e}"))?;
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
        slots
            .iter()
            .filter_map(|s| s.identity())
            .find(|i| i.config().grant_key == p.grant_key)
            .and_then(|i| i.config().signing_key.clone())
    };
    match flow::complete(&ctx.vault, &ctx.fetcher, query.unwrap_or(""), key_for).await {
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

/// A small HTML page with `title` and `text` (escaped).
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>{t}</title><body style=\"font-family:sans-serif;margin:3em\"><h1>{t}</h1><p>{x}</p></body>",
        t = esc(title),
        x = esc(text)
    );
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}
