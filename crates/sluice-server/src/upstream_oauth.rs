//! The gateway's side of signing in to its upstreams: the vault and public URL every OAuth
//! upstream shares, the callback an authorization server sends a person back to, the client ID
//! metadata document, and the page of a user's connect link (per-user upstreams), all on the
//! MCP listener under the public URL.

use crate::state::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_config::Config;
use sluice_oauth::{connect, flow, Fetcher};
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
/// the outcome and the reason; never a token. Runs until the gateway shuts down.
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
fn per_user(slots: &[Arc<sluice_upstream::Slot>], ctx: &OAuthContext, id: &str) -> Option<PerUser> {
    let slot = slots.iter().find(|s| s.spec.id == id)?;
    match PerUser::new(&slot.spec, ctx) {
        Ok(users) => users,
        Err(e) => {
            tracing::warn!(upstream = %id, "its per-user identity cannot be made: {e}");
            None
        }
    }
}

/// The cookie that holds a connect page's CSRF token (the form posts it back too).
const CSRF_COOKIE: &str = "sluice_connect";

/// `GET|POST /oauth/connect/<id>`: a user's connect link. GET shows whom and what it connects
/// and asks for an explicit confirmation (a form posted back here with a CSRF token that its
/// cookie holds as well); POST, with both tokens matching the ticket's, uses the ticket (once)
/// and sends the browser to the authorization server (303). An unknown, used or expired link:
/// 410, and nothing is stored. Neither page shows the link's id or a token but the form's own.
pub(crate) async fn connect_link(
    st: &Arc<State>,
    id: &str,
    req: axum::extract::Request,
) -> Response {
    let Some(ctx) = st.rt.slot_env().oauth.clone() else {
        return page(
            StatusCode::NOT_FOUND,
            "Connect",
            "No upstream of this gateway signs in with OAuth.",
        );
    };
    let gone = || {
        page(
            StatusCode::GONE,
            "Link expired",
            "This link was used already, or it expired (a link is good for 10 minutes, once). Call the tool again from your client to get a new one.",
        )
    };
    let unreadable = |e: sluice_oauth::AuthError| {
        tracing::warn!("reading a connect link failed: {e}");
        page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Connect",
            "The gateway's vault cannot be read; try again.",
        )
    };
    let pass = match connect::peek(&ctx.vault, id).await {
        Ok(Some(p)) => p,
        Ok(None) => return gone(),
        Err(e) => return unreadable(e),
    };
    let secure = ctx.public_url.starts_with("https://");
    match *req.method() {
        axum::http::Method::GET => confirm_page(&pass, secure),
        axum::http::Method::POST => {
            let cookie = cookie_value(req.headers(), CSRF_COOKIE).unwrap_or_default();
            let body = axum::body::to_bytes(req.into_body(), 4096)
                .await
                .unwrap_or_default();
            // The token is base64url: a browser posts it as it is, never percent-encoded.
            let posted = String::from_utf8_lossy(&body)
                .split('&')
                .find_map(|kv| kv.strip_prefix("csrf=").map(str::to_string))
                .unwrap_or_default();
            if !connect::same_secret(&cookie, &pass.csrf)
                || !connect::same_secret(&posted, &pass.csrf)
            {
                tracing::warn!(upstream = %pass.upstream, principal = %pass.principal, "a connect confirmation without this page's CSRF token was refused");
                return page(
                    StatusCode::FORBIDDEN,
                    "Not confirmed",
                    "This confirmation did not come from the page of the link. Open the link again and confirm there.",
                );
            }
            let pass = match connect::take(&ctx.vault, id).await {
                Ok(Some(p)) => p,
                Ok(None) => return gone(),
                Err(e) => return unreadable(e),
            };
            start_connect(st, &ctx, &pass).await
        }
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("GET, POST"))],
        )
            .into_response(),
    }
}

/// The ticket is used: start the principal's sign-in and send the browser to it.
async fn start_connect(st: &Arc<State>, ctx: &OAuthContext, pass: &connect::Pass) -> Response {
    let slots = st.snapshot().slots.clone();
    let started = match per_user(&slots, ctx, &pass.upstream) {
        Some(users) => users
            .identity(&pass.principal)
            .start_sign_in_for(&ctx.redirect_uri(), Some(&pass.elicitation_id))
            .await
            .map_err(|e| e.to_string()),
        None => Err(format!(
            "{} no longer connects its users' own accounts",
            pass.upstream
        )),
    };
    match started {
        Ok(s) => {
            tracing::info!(upstream = %pass.upstream, principal = %pass.principal, "a user confirmed a connect link");
            (
                StatusCode::SEE_OTHER,
                [
                    (
                        header::LOCATION,
                        HeaderValue::from_str(&s.url).unwrap_or(HeaderValue::from_static("/")),
                    ),
                    (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                    (
                        header::REFERRER_POLICY,
                        HeaderValue::from_static("no-referrer"),
                    ),
                ],
            )
                .into_response()
        }
        Err(why) => {
            tracing::warn!(upstream = %pass.upstream, principal = %pass.principal, "starting a user's sign-in failed: {why}");
            let failed = connect::Outcome::Failed(why.clone());
            if let Err(e) = connect::record(&ctx.vault, &pass.elicitation_id, &failed).await {
                tracing::warn!("recording a connect outcome failed: {e}");
            }
            page(StatusCode::BAD_GATEWAY, "Connecting failed", &why)
        }
    }
}

/// The confirmation page of a connect link, with its CSRF cookie.
fn confirm_page(pass: &connect::Pass, secure: bool) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>Connect {u}</title><body style=\"font-family:sans-serif;margin:3em;max-width:40em\"><h1>Connect your account to {u}</h1>\
<p>Sluice will connect <b>{u}</b> for <b>{p}</b>: your calls to {u} through this gateway will then act as the account you sign in with next.</p>\
<p>Continue only if you are {p} and you opened this link yourself, from your own client. If someone sent you this link, close this window.</p>\
<form method=post><input type=hidden name=csrf value=\"{c}\"><button type=submit>Connect {u}</button></form></body>",
        u = esc(&pass.upstream),
        p = esc(&pass.principal),
        c = esc(&pass.csrf),
    );
    let cookie = format!(
        "{CSRF_COOKIE}={}; Path={}; Max-Age={}; HttpOnly; SameSite=Strict{}",
        pass.csrf,
        connect::CONNECT_PATH,
        connect::TICKET_TTL.as_secs(),
        if secure { "; Secure" } else { "" }
    );
    let mut r = html(StatusCode::OK, body);
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// The value of the cookie `name` in `headers`.
fn cookie_value(headers: &axum::http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
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

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A small HTML page with `title` and `text` (escaped).
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>{t}</title><body style=\"font-family:sans-serif;margin:3em\"><h1>{t}</h1><p>{x}</p></body>",
        t = esc(title),
        x = esc(text)
    );
    html(status, body)
}

/// An HTML answer: never cached, never framed (a confirmation button must not be clicked
/// through another site's frame), and no referrer (a connect link's URL is a secret).
fn html(status: StatusCode, body: String) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_confirmation_page_names_whom_and_what_and_holds_only_its_form_token() {
        let pass = connect::Pass {
            principal: "alice <admin>".into(),
            upstream: "crm".into(),
            elicitation_id: "el-1".into(),
            csrf: "csrf-token-value".into(),
        };
        let r = confirm_page(&pass, true);
        assert_eq!(r.status(), StatusCode::OK);
        let h = r.headers();
        let cookie = h[header::SET_COOKIE].to_str().unwrap();
        assert_eq!(
            cookie,
            "sluice_connect=csrf-token-value; Path=/oauth/connect; Max-Age=600; HttpOnly; SameSite=Strict; Secure"
        );
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
        let plain = confirm_page(&pass, false);
        assert!(!plain.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Secure"));
    }

    #[tokio::test]
    async fn the_page_escapes_names_and_posts_back_to_itself() {
        let pass = connect::Pass {
            principal: "alice <admin>".into(),
            upstream: "crm".into(),
            elicitation_id: "el-1".into(),
            csrf: "csrf-token-value".into(),
        };
        let body = axum::body::to_bytes(confirm_page(&pass, false).into_body(), 1 << 16)
            .await
            .unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(text.contains("alice &lt;admin&gt;"), "{text}");
        assert!(!text.contains("<admin>"));
        assert!(text.contains("Connect your account to crm"));
        // No action: the form posts to the link itself, whose id the page never shows.
        assert!(text.contains("<form method=post>"), "{text}");
        assert!(!text.contains("el-1"));
    }

    #[test]
    fn the_csrf_cookie_is_found_among_others() {
        let mut h = axum::http::HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; sluice_connect=xyz"),
        );
        h.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie_value(&h, CSRF_COOKIE).as_deref(), Some("xyz"));
        assert_eq!(cookie_value(&h, "c"), None);
    }
}
