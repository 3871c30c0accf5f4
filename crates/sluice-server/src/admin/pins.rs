//! The admin API of pins: what awaits review (each changed or new definition with its diff),
//! approving it, and the pin state of a tool row.

use super::reply::{body_json, done, home, tri, S};
use super::Admin;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use sluice_config::pins::{Kind, PinFile, Selector};
use std::sync::Arc;

/// The `/api/pins` routes.
pub(crate) fn routes() -> Router<Arc<Admin>> {
    Router::new()
        .route("/api/pins", get(pending))
        .route("/api/pins/approve", post(approve))
}

/// `GET /api/pins`: every definition awaiting review, with its diff.
async fn pending(State(admin): S) -> Response {
    let home = admin.st.snapshot().config.home.clone();
    let pins = PinFile::load(&home).unwrap_or_default();
    let rows: Vec<Value> = pins
        .pending()
        .iter()
        .map(|p| {
            json!({
                "upstream": p.upstream, "kind": p.kind.noun(), "name": p.key,
                "state": p.verdict().name(), "selector": p.selector(),
                "approved": p.approved.map(|a| a.digest.as_str()), "seen": p.seen.digest,
                "diff": p.diff(),
            })
        })
        .collect();
    Json(json!({"pending": rows})).into_response()
}

/// `POST /api/pins/approve`: `{"which": "UPSTREAM[/NAME]"}` or `{"all": true}`; applied at once
/// (the file written, the tree applied: clients are told the lists changed).
async fn approve(State(admin): S, body: Bytes) -> Response {
    let home = tri!(home(&admin));
    let b = tri!(body_json(&body));
    let which = match (b.get("all"), b.get("which").and_then(Value::as_str)) {
        (Some(Value::Bool(true)), _) => Selector::All,
        (_, Some(w)) if !w.is_empty() => Selector::parse(w),
        _ => {
            return super::reply::err(
                axum::http::StatusCode::BAD_REQUEST,
                "give \"which\": \"UPSTREAM[/NAME]\" or \"all\": true",
            )
        }
    };
    let r = sluice_config::manage::pins_approve(&home, &which).map(|done| json!(done));
    done(&admin, r).await
}

/// The pin state of an upstream tool's row: `pin` (`pinned`, `changed`, `new`, or null when
/// not pinned), and for a pending one the `diff` and the `review` selector.
pub(super) fn row_state(pins: &PinFile, upstream: &str, tool: &str) -> Value {
    let Some(pin) = pins.get(upstream, Kind::Tool, tool) else {
        return json!({"pin": null});
    };
    let pending = pins
        .pending()
        .into_iter()
        .find(|p| p.kind == Kind::Tool && p.upstream == upstream && p.key == tool);
    match pending {
        Some(p) => json!({"pin": p.verdict().name(), "diff": p.diff(), "review": p.selector()}),
        None if pin.approved.is_some() => json!({"pin": "pinned"}),
        None => json!({"pin": null}),
    }
}
