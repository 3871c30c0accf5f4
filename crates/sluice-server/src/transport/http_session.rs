//! Finding a client's session on the Streamable HTTP face (2025-11-25) by its `Mcp-Session-Id`:
//! here, or in a cluster on any replica; the HTTP errors when it is missing, unknown or the
//! cluster store does not answer. Used by POST, GET and DELETE (`http.rs`, `http_get.rs`).

use crate::http_parts::{header_str, json_error, SESSION};
use crate::replicas::Miss;
use crate::session::Session;
use crate::state::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use sluice_core::{Principal, RpcError};
use std::sync::Arc;

/// The session named by `Mcp-Session-Id`: 400 when missing, 404 when unknown, ended, or
/// started by another principal (indistinguishable from unknown, so ids cannot be probed). In a
/// cluster any replica finds it (a forged, tampered or foreign-key id is 404 alike); 503 when
/// the store does not answer and the session is not served here. A session belongs to the
/// endpoint it was initialised on (`endpoint`: the URL's, `None` for `/mcp`): on another URL it
/// is unknown too.
pub(super) async fn find_session(
    st: &Arc<State>,
    headers: &HeaderMap,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
) -> Result<Arc<Session>, Response> {
    let Some(id) = header_str(headers, SESSION) else {
        return Err(json_error(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_request("missing Mcp-Session-Id header (send initialize first)"),
            None,
        ));
    };
    let found = st.rt.scale().find(st, id, principal.as_ref()).await;
    match found {
        Ok(s) if s.init.endpoint.as_deref() != endpoint => Err(not_found()),
        Ok(s) => {
            s.touch();
            if principal.is_some() {
                s.set_principal(principal);
            }
            s.set_authorization(header_str(headers, header::AUTHORIZATION));
            Ok(s)
        }
        Err(Miss::NotFound) => Err(not_found()),
        Err(Miss::Unavailable(why)) => Err(store_unavailable(&why)),
    }
}

/// 404: no such session (here, or on this URL).
fn not_found() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        RpcError::new(
            -32001,
            "Session not found: it ended or never existed; initialize a new one",
        ),
        None,
    )
}

/// 503: the cluster store did not answer (-32000, naming it and why).
pub(super) fn store_unavailable(why: &str) -> Response {
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        RpcError::new(-32000, format!("Cluster store unavailable: {why}")),
        None,
    )
}
