//! The page of a user's connect link (per-user upstreams): who and what it connects, and the
//! binding of the link to its principal before the sign-in at the upstream starts. Where the
//! gateway's own authentication has an identity provider that can sign a browser in
//! (`browser_sign_in`), a JWT principal's link first signs the browser in there (OpenID
//! Connect) and goes on only when the ID token's `sub` is the principal's; otherwise the page
//! asks for an explicit confirmation, posted back with a CSRF token (the weaker binding: it
//! proves the click came from the link's page, not who clicked).

use crate::state::State;
use crate::upstream_oauth::{esc, html, page, per_user};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_config::BrowserSignIn;
use sluice_oauth::client::ClientCredentials;
use sluice_oauth::flow::Callback;
use sluice_oauth::{connect, signin};
use sluice_upstream::OAuthContext;
use std::sync::Arc;

/// The cookie that holds a connect page's CSRF token (the form posts it back too).
const CSRF_COOKIE: &str = "sluice_connect";

/// `GET|POST /oauth/connect/<id>`: a user's connect link. With browser sign-in (a JWT
/// principal and `browser_sign_in` configured), GET sends the browser to the identity provider
/// and [`signed_in`] goes on; else GET shows whom and what it connects and asks for an explicit
/// confirmation (a form posted back here with a CSRF token that its cookie holds as well), and
/// POST, with both tokens matching the ticket's, uses the ticket (once) and sends the browser to
/// the authorization server (303). An unknown, used or expired link: 410, and nothing is
/// stored. Neither page shows the link's id or a token but the form's own.
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
    let sign_in = browser_sign_in(st, &pass);
    match *req.method() {
        axum::http::Method::GET => match sign_in {
            Some(s) => start_sign_in(&ctx, &s, id, secure).await,
            None => confirm_page(&pass, secure),
        },
        axum::http::Method::POST if sign_in.is_some() => page(
            StatusCode::FORBIDDEN,
            "Sign in first",
            "This link connects an account only after you sign in as the person it was made for. Open the link again.",
        ),
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
            tracing::info!(upstream = %pass.upstream, principal = %pass.principal, "a user's sign-in at the upstream starts");
            redirect_to(&s.url, None)
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

/// The cookie that binds a browser sign-in to the browser that started it (its `state`).
const SIGN_IN_COOKIE: &str = "sluice_sign_in";

/// A browser sign-in: the gateway's client, at the issuer whose tokens the gateway accepts.
struct SignInAt {
    client: BrowserSignIn,
    issuer: String,
}

/// The browser sign-in a link of `pass` needs: `browser_sign_in` is configured and the link's
/// principal is a JWT's (`jwt:<sub>`), whose `sub` the identity provider can vouch for.
fn browser_sign_in(st: &Arc<State>, pass: &connect::Pass) -> Option<SignInAt> {
    let snap = st.snapshot();
    let oauth = snap.config.auth.oauth.as_ref()?;
    let client = oauth.browser_sign_in.clone()?;
    (pass.principal.starts_with("jwt:") && snap.auth.is_some()).then(|| SignInAt {
        client,
        issuer: oauth.issuer.clone(),
    })
}

/// Send the browser to the identity provider to sign in, for the link `ticket`; the sign-in
/// waits in the vault under its `state`, which the browser's cookie holds too.
async fn start_sign_in(ctx: &OAuthContext, at: &SignInAt, ticket: &str, secure: bool) -> Response {
    let s = &at.client;
    let failed = |e: sluice_oauth::AuthError| {
        tracing::warn!("starting a browser sign-in failed: {e}");
        page(
            StatusCode::BAD_GATEWAY,
            "Sign-in unavailable",
            &format!("Signing you in at the identity provider failed: {e}"),
        )
    };
    let provider = match signin::provider(&ctx.fetcher, &at.issuer).await {
        Ok(p) => p,
        Err(e) => return failed(e),
    };
    let client = ClientCredentials {
        issuer: provider.issuer.clone(),
        client_id: s.client_id.clone(),
        client_secret: s.client_secret.clone(),
        auth_method: if s.client_secret.is_some() {
            "client_secret_basic".into()
        } else {
            "none".into()
        },
    };
    let redirect = format!("{}{}", ctx.public_url, signin::SIGNED_IN_PATH);
    let started = match signin::start(&provider, client, &redirect, ticket, &s.scopes) {
        Ok(st) => st,
        Err(e) => return failed(e),
    };
    if let Err(e) = signin::park(&ctx.vault, &started.sign_in).await {
        return failed(e);
    }
    // SameSite=Lax: the provider sends the browser back with a top-level GET from its origin.
    let cookie = format!(
        "{SIGN_IN_COOKIE}={}; Path={}; Max-Age={}; HttpOnly; SameSite=Lax{}",
        started.sign_in.state,
        signin::SIGNED_IN_PATH,
        signin::SIGN_IN_TTL.as_secs(),
        if secure { "; Secure" } else { "" }
    );
    redirect_to(&started.url, Some(&cookie))
}

/// `GET /oauth/signed-in?code=…&state=…`: the identity provider sends the browser back. The
/// sign-in parked under `state` is taken (once; it must be this browser's, by its cookie), the
/// code exchanged for an ID token, which must verify (signature, `iss`, `aud`, `nonce`); when
/// its `sub` is the link's principal the link is used and the browser goes on to the upstream's
/// authorization server, else 403 and nothing is stored (the link stays for its own principal).
pub(crate) async fn signed_in(st: &Arc<State>, req: axum::extract::Request) -> Response {
    let Some(ctx) = st.rt.slot_env().oauth.clone() else {
        return page(
            StatusCode::NOT_FOUND,
            "Sign-in",
            "No upstream of this gateway signs in with OAuth.",
        );
    };
    let cb = Callback::from_query(req.uri().query().unwrap_or(""));
    let state = cb.state.clone().unwrap_or_default();
    let cookie = cookie_value(req.headers(), SIGN_IN_COOKIE).unwrap_or_default();
    if state.is_empty() || !connect::same_secret(&cookie, &state) {
        tracing::warn!("a browser sign-in came back to a browser that did not start it");
        return page(
            StatusCode::FORBIDDEN,
            "Not signed in",
            "This sign-in was not started in this browser. Open your connect link again.",
        );
    }
    let gone = || {
        page(
            StatusCode::GONE,
            "Link expired",
            "This sign-in was used already, or it expired. Call the tool again from your client to get a new link.",
        )
    };
    let sign_in = match signin::take(&ctx.vault, &state).await {
        Ok(Some(s)) => s,
        Ok(None) => return gone(),
        Err(e) => {
            tracing::warn!("reading a browser sign-in failed: {e}");
            return gone();
        }
    };
    let refused = |why: String| {
        tracing::warn!("a browser sign-in was refused: {why}");
        page(StatusCode::FORBIDDEN, "Not signed in", &why)
    };
    let id_token = match signin::finish(&ctx.fetcher, &sign_in, &cb).await {
        Ok(t) => t,
        Err(e) => return refused(format!("Signing in failed: {e}")),
    };
    let Some(auth) = st.snapshot().auth.clone() else {
        return refused("The gateway no longer authenticates its users.".into());
    };
    let sub = match auth
        .verify_id_token(&id_token, &sign_in.client.client_id, &sign_in.nonce)
        .await
    {
        Ok(sub) => sub,
        Err(d) => {
            return refused(format!(
                "The identity provider's answer does not verify: {}",
                d.description
            ))
        }
    };
    let pass = match connect::peek(&ctx.vault, &sign_in.ticket).await {
        Ok(Some(p)) => p,
        _ => return gone(),
    };
    if pass.principal != format!("jwt:{sub}") {
        tracing::warn!(upstream = %pass.upstream, principal = %pass.principal, signed_in_as = %sub, "a connect link was opened by someone else: refused, nothing stored");
        let who = pass.principal.trim_start_matches("jwt:");
        return page(
            StatusCode::FORBIDDEN,
            "Not your link",
            &format!(
                "You signed in as {sub}, and this link connects {} for {who}. Nothing was connected. If you want to connect your own account, call the tool from your own client.",
                pass.upstream
            ),
        );
    }
    let pass = match connect::take(&ctx.vault, &sign_in.ticket).await {
        Ok(Some(p)) => p,
        _ => return gone(),
    };
    tracing::info!(upstream = %pass.upstream, principal = %pass.principal, "a user signed in to use their connect link");
    start_connect(st, &ctx, &pass).await
}

/// 303 to `url`, never cached, with no referrer; with `cookie` set when given.
fn redirect_to(url: &str, cookie: Option<&str>) -> Response {
    let mut r = (
        StatusCode::SEE_OTHER,
        [
            (
                header::LOCATION,
                HeaderValue::from_str(url).unwrap_or(HeaderValue::from_static("/")),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
    )
        .into_response();
    if let Some(v) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
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
