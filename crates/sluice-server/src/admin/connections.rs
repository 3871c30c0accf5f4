//! The admin API's connections: each per-user upstream's connected principals (when their
//! access token expires, its scopes, whether it refreshes; never a token), and ending one
//! principal's connection (its grant forgotten and revoked at the authorization server, RFC
//! 7009, and its upstream connection closed; the audit line comes from the revoke's event).

use super::reply::{body_json, err, str_field, tri, S};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use sluice_oauth::{Revoked, Status};
use std::sync::Arc;

/// The `/api/connections` routes.
pub(super) fn routes() -> Router<Arc<super::Admin>> {
    Router::new()
        .route("/api/connections", get(connections))
        .route("/api/connections/revoke", post(revoke))
}

/// One principal's connection, for the page: never a token ([`Status`] holds none).
fn principal_json(principal: &str, status: &Status) -> Value {
    match status {
        Status::Connected {
            expires_at,
            scopes,
            refreshable,
        } => json!({
            "principal": principal, "expires_at": expires_at, "scopes": scopes,
            "refreshable": refreshable,
        }),
        _ => json!({"principal": principal}),
    }
}

/// `GET /api/connections`: `{"upstreams": [{"upstream", "principals": [{"principal",
/// "expires_at", "scopes", "refreshable"}], "error"?}]}`, one row per per-user upstream.
async fn connections(State(admin): S) -> Response {
    let snapshot = admin.st.snapshot();
    let mut rows = Vec::new();
    for slot in snapshot.slots.iter() {
        let Some(users) = slot.per_user() else {
            continue;
        };
        let row = match users.principals().await {
            Ok(listed) => {
                let principals: Vec<Value> =
                    listed.iter().map(|(p, s)| principal_json(p, s)).collect();
                json!({"upstream": slot.spec.id, "enabled": slot.spec.enabled, "principals": principals})
            }
            Err(e) => json!({
                "upstream": slot.spec.id, "enabled": slot.spec.enabled, "principals": [],
                "error": format!("the vault could not be read: {e}"),
            }),
        };
        rows.push(row);
    }
    Json(json!({"upstreams": rows})).into_response()
}

/// `POST /api/connections/revoke` `{"upstream", "principal"}`: end that principal's
/// connection. 404: no such per-user upstream, or the principal holds no grant for it; 502:
/// forgotten, but the authorization server refused the revocation.
async fn revoke(State(admin): S, body: Bytes) -> Response {
    let b = tri!(body_json(&body));
    let upstream = tri!(str_field(&b, "upstream"));
    let principal = tri!(str_field(&b, "principal"));
    let Some(slot) = admin.st.snapshot().slot(upstream).cloned() else {
        return err(
            StatusCode::NOT_FOUND,
            format!("no upstream has the id {upstream:?}"),
        );
    };
    let Some(users) = slot.per_user().cloned() else {
        return err(
            StatusCode::NOT_FOUND,
            format!("upstream {upstream:?} does not connect its users' own accounts (oauth.mode is not per_user)"),
        );
    };
    let outcome = users.revoke(principal).await;
    // Whatever the authorization server said, the grant is forgotten: the connection that
    // carried it closes, and the principal's next call asks again.
    slot.close_user(principal).await;
    match outcome {
        Ok(Some(how)) => Json(json!({"ok": true, "result": {
            "upstream": upstream, "principal": principal,
            "revoked_at_server": how == Revoked::AtServer,
        }}))
        .into_response(),
        Ok(None) => err(
            StatusCode::NOT_FOUND,
            format!("{principal:?} holds no connection to {upstream:?}"),
        ),
        Err(e) => err(
            StatusCode::BAD_GATEWAY,
            format!("the connection of {principal:?} to {upstream:?} was forgotten, but revoking it at the authorization server failed: {e}"),
        ),
    }
}
