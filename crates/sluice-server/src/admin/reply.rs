//! How the admin API answers: a JSON error, a body read as a JSON object, a required field,
//! the tree management writes to, and a management operation applied through the one apply path.

use super::Admin;
use crate::control::{self, Applier};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use sluice_config::manage::ManageError;
use std::sync::Arc;

pub(super) type S = State<Arc<Admin>>;

/// An error answer, boxed (a `Response` is large).
pub(super) type Fail = Box<Response>;

pub(super) fn err(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(json!({"error": msg.into()}))).into_response()
}

pub(super) fn fail(status: StatusCode, msg: impl Into<String>) -> Fail {
    Box::new(err(status, msg))
}

pub(super) fn body_json(body: &Bytes) -> Result<Map<String, Value>, Fail> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(fail(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        )),
        Err(e) => Err(fail(
            StatusCode::BAD_REQUEST,
            format!("the body is not JSON: {e}"),
        )),
    }
}

pub(super) fn str_field<'a>(m: &'a Map<String, Value>, k: &str) -> Result<&'a str, Fail> {
    m.get(k).and_then(Value::as_str).ok_or_else(|| {
        fail(
            StatusCode::BAD_REQUEST,
            format!("{k:?} (a string) is required"),
        )
    })
}

/// The home folder management writes to, or 409 when the gateway serves no `--home` tree.
pub(super) fn home(admin: &Admin) -> Result<std::path::PathBuf, Fail> {
    if admin.opts.editable {
        Ok(admin.st.snapshot().config.home.clone())
    } else {
        Err(fail(
            StatusCode::CONFLICT,
            "this gateway serves no configuration tree (start it with --home DIR to manage it)",
        ))
    }
}

/// Answer a management operation: after a good write, apply it now (the reload watcher would
/// within half a second) so the answer means "live".
pub(super) async fn done(admin: &Admin, r: Result<Value, ManageError>) -> Response {
    match r {
        Ok(v) => match control::apply_tree(&admin.st, Applier::Admin).await {
            Ok(_) => Json(json!({"ok": true, "result": v})).into_response(),
            // Written, but the tree as it now stands on disk cannot be applied (for example an
            // earlier edit turned authentication off on an exposed listener): nothing of it is
            // live, and the running configuration is kept.
            Err(errors) => (
                StatusCode::CONFLICT,
                Json(json!({
                    "error": "the change was written, but the tree cannot be applied; the running configuration is kept",
                    "errors": errors_json(&errors),
                })),
            )
                .into_response(),
        },
        Err(ManageError::Invalid(errors)) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({
                "error": "the change was not written; the tree would be invalid",
                "errors": errors_json(&errors),
            })),
        )
            .into_response(),
        Err(ManageError::Bad(m)) => err(StatusCode::BAD_REQUEST, m),
        Err(ManageError::Io(e)) => err(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

pub(super) fn errors_json(errors: &sluice_config::ConfigErrors) -> Vec<Value> {
    errors
        .0
        .iter()
        .map(|e| json!({"file": e.file, "field": e.field, "message": e.message, "text": e.to_string()}))
        .collect()
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(r) => return *r,
        }
    };
}

pub(super) use tri;
