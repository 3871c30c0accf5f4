//! The admin API's upstreams: their rows (health, tools, and each OAuth upstream's sign-in
//! state), adding, changing and restarting them, and starting an upstream's sign-in.

use super::reply::{body_json, done, err, home, str_field, tri, S};
use super::Admin;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use sluice_config::manage;
use sluice_config::{OAuthMode, Transport};
use sluice_upstream::Status;
use std::sync::Arc;

fn status_json(s: &Status) -> (&'static str, Option<String>) {
    match s {
        Status::Disabled => ("disabled", None),
        Status::Starting => ("starting", None),
        Status::Up => ("up", None),
        Status::Down(r) => ("down", Some(r.clone())),
    }
}

/// An OAuth upstream's sign-in state for the page: how it signs in, whether a grant is held,
/// when its access token expires, its scopes, and why a person must act. Never a token, secret
/// or code: [`sluice_oauth::Status`] holds none.
fn oauth_json(slot: &sluice_upstream::Slot, mode: OAuthMode, down: Option<&str>) -> Value {
    let mode = mode.name();
    let status = match slot.identity() {
        Some(identity) => identity.status(),
        // The identity could not be made (no vault, an unreadable key file): the slot is down
        // and says why.
        None => sluice_oauth::Status::Failed(
            down.unwrap_or("the upstream's OAuth identity could not be made")
                .to_string(),
        ),
    };
    let (state, expires_at, scopes, refreshable, reason) = match status {
        sluice_oauth::Status::Unknown => ("unknown", None, Vec::new(), false, None),
        sluice_oauth::Status::Connected {
            expires_at,
            scopes,
            refreshable,
        } => ("connected", expires_at, scopes, refreshable, None),
        sluice_oauth::Status::NeedsLogin(why) => {
            ("needs_login", None, Vec::new(), false, Some(why))
        }
        sluice_oauth::Status::Failed(why) => ("failed", None, Vec::new(), false, Some(why)),
    };
    json!({
        "mode": mode, "state": state, "expires_at": expires_at, "scopes": scopes,
        "refreshable": refreshable, "reason": reason,
    })
}

pub(super) fn upstream_rows(admin: &Admin, with_stderr: bool) -> Vec<Value> {
    // Every configured upstream has a row from the start (the snapshot's slots); the catalog,
    // built once they have listed, only counts their tools.
    let snapshot = admin.st.snapshot();
    let catalog = snapshot.catalog.clone();
    snapshot
        .slots
        .iter()
        .map(|slot| {
            let (status, reason) = status_json(&slot.status());
            let st = slot.state.lock();
            let tools = catalog
                .slots
                .iter()
                .position(|s| Arc::ptr_eq(s, slot))
                .map(|i| {
                    catalog
                        .tools()
                        .iter()
                        .filter_map(|t| t["name"].as_str())
                        .filter(|n| catalog.tool(n).is_some_and(|r| r.slot() == Some(i)))
                        .count()
                })
                .unwrap_or(0);
            let spec = &slot.spec;
            let target = match spec.transport {
                Transport::Stdio => std::iter::once(spec.command.as_str())
                    .chain(spec.args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                Transport::Http | Transport::Sse => spec.url.clone(),
                Transport::Local => "tools/tools.register.json".into(),
            };
            let mut row = json!({
                "id": spec.id,
                "transport": format!("{:?}", spec.transport).to_lowercase(),
                "target": target,
                "enabled": spec.enabled,
                "expose_all": spec.expose_all,
                "description": spec.description,
                "status": status,
                "reason": reason,
                "restarts": st.restarts,
                "tools": tools,
                "server": st.init.as_ref().and_then(|i| i.get("serverInfo")).cloned(),
            });
            if let Some(o) = &spec.oauth {
                row["oauth"] = oauth_json(slot, o.mode, reason.as_deref());
            }
            if with_stderr {
                row["stderr"] = json!(slot.stderr.lines());
            }
            row
        })
        .collect()
}

pub(super) async fn upstreams(State(admin): S) -> Response {
    Json(json!({"upstreams": upstream_rows(&admin, true), "editable": admin.opts.editable}))
        .into_response()
}

pub(super) async fn upstreams_add(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let r = manage::upstream_add(&home, Value::Object(b)).map(|_| Value::Null);
    done(&admin, r).await
}

pub(super) async fn upstreams_set(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let Some(fields) = b.get("fields").and_then(Value::as_object) else {
        return err(
            StatusCode::BAD_REQUEST,
            "\"fields\" (an object) is required",
        );
    };
    if fields.contains_key("id") {
        return err(
            StatusCode::BAD_REQUEST,
            "an upstream's id cannot be changed",
        );
    }
    let r = manage::upstream_set(&home, id, fields.clone()).map(|_| json!(id));
    done(&admin, r).await
}

pub(super) async fn upstreams_restart(State(admin): S, body: Bytes) -> Response {
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let slot = admin.st.snapshot().slot(id).cloned();
    match slot {
        None => err(
            StatusCode::NOT_FOUND,
            format!("no upstream has the id {id:?}"),
        ),
        Some(s) if s.restart().await => Json(json!({"ok": true, "result": id})).into_response(),
        Some(_) => err(
            StatusCode::CONFLICT,
            format!("upstream {id:?} is not running (it restarts by itself when it fails)"),
        ),
    }
}

/// Start a person's sign-in to an upstream with `"oauth": {"mode": "shared"}`: `{"id"}` →
/// `{"ok": true, "result": {"url"}}`, the authorization URL for the admin's browser (no secret
/// in it: `state` and the PKCE challenge). The authorization server sends the browser back to
/// the MCP listener's `/oauth/callback`, which stores the grant and starts the upstream.
pub(super) async fn upstreams_connect(State(admin): S, body: Bytes) -> Response {
    let b = tri!(body_json(&body));
    let id = tri!(str_field(&b, "id"));
    let Some(slot) = admin.st.snapshot().slot(id).cloned() else {
        return err(
            StatusCode::NOT_FOUND,
            format!("no upstream has the id {id:?}"),
        );
    };
    match slot.spec.oauth.as_ref().map(|o| o.mode) {
        None => {
            return err(
                StatusCode::CONFLICT,
                format!("upstream {id:?} does not sign in with OAuth (its entry has no \"oauth\")"),
            )
        }
        Some(OAuthMode::ClientCredentials) => {
            return err(
                StatusCode::CONFLICT,
                format!(
                    "upstream {id:?} signs in with client credentials: it gets its tokens by itself, no person signs in"
                ),
            )
        }
        Some(OAuthMode::Exchange) => {
            return err(
                StatusCode::CONFLICT,
                format!(
                    "upstream {id:?} exchanges each user's own token (RFC 8693): no person signs in"
                ),
            )
        }
        Some(OAuthMode::Enterprise) => {
            return err(
                StatusCode::CONFLICT,
                format!(
                    "upstream {id:?} signs in with its identity assertion (enterprise-managed authorization): no person signs in"
                ),
            )
        }
        Some(OAuthMode::Shared | OAuthMode::PerUser) => {}
    }
    let (Some(identity), Some(ctx)) = (slot.identity(), admin.st.rt.slot_env().oauth.as_ref())
    else {
        let why = match slot.status() {
            Status::Down(r) => r,
            _ => "its OAuth identity could not be made".into(),
        };
        return err(
            StatusCode::CONFLICT,
            format!("upstream {id:?} cannot sign in: {why}"),
        );
    };
    match identity.start_sign_in(&ctx.redirect_uri()).await {
        // The page opens it: only a web address (an authorization server's metadata names the
        // endpoint, and discovery does not check its scheme).
        Ok(started) if !is_web_url(&started.url) => err(
            StatusCode::BAD_GATEWAY,
            format!("signing in to upstream {id:?} could not start: the authorization endpoint is not an http(s) URL"),
        ),
        Ok(started) => Json(json!({"ok": true, "result": {"url": started.url}})).into_response(),
        Err(e) => err(
            StatusCode::BAD_GATEWAY,
            format!("signing in to upstream {id:?} could not start: {e}"),
        ),
    }
}

/// Is `url` an `http://` or `https://` address (what a browser may be sent to)?
fn is_web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_web_addresses_are_opened() {
        assert!(super::is_web_url(
            "https://as.example.com/authorize?state=x"
        ));
        assert!(super::is_web_url("HTTP://localhost:3001/authorize"));
        assert!(!super::is_web_url("javascript:alert(1)"));
        assert!(!super::is_web_url("data:text/html,hi"));
        assert!(!super::is_web_url("http:/x"));
        assert!(!super::is_web_url(""));
    }
}
