//! The pieces both HTTP faces (legacy and 2026-07-28) build responses from: the MCP header
//! names, JSON replies and JSON-RPC errors with their status, SSE response headers, and reading
//! a header as text.

use axum::http::header::{AsHeaderName, HeaderName};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sluice_core::{Message, RpcError};
use std::time::Duration;

/// `Mcp-Session-Id` (a `HeaderName`, not text: a lookup by text parses the name every time).
pub(crate) const SESSION: HeaderName = HeaderName::from_static(sluice_core::headers::SESSION_ID);
/// `MCP-Protocol-Version`.
pub(crate) const PROTOCOL: HeaderName =
    HeaderName::from_static(sluice_core::headers::PROTOCOL_VERSION);
/// How long an SSE response stays silent before a keep-alive comment.
pub(crate) const KEEPALIVE: Duration = Duration::from_secs(15);

/// A JSON-RPC error as the whole response, with this status.
pub(crate) fn json_error(status: StatusCode, error: RpcError, id: Option<&Value>) -> Response {
    let body = sluice_core::exact::to_string(&error.to_response(id));
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// A header's value, when it is present and visible ASCII.
pub(crate) fn header_str(headers: &HeaderMap, name: impl AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A message as a 200 JSON response.
pub(crate) fn json_reply(reply: Message) -> Response {
    json_text(reply.to_json())
}

/// A message already serialised, as a 200 JSON response.
pub(crate) fn json_text(body: String) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// Mark a response as an SSE stream (`text/event-stream`, not cached).
pub(crate) fn sse_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
