//! The 2026-07-28 era over HTTP: one POST per request, no session. Admits the request
//! (`modern::admit`: 400, or 404 for a method modern clients may not call), answers with JSON
//! when the first thing a round emits is its reply (or an `input_required` result), else with an
//! SSE stream of everything it emits; `subscriptions/listen` is an SSE stream until the client
//! closes it. A closed response stream cancels the call.

use crate::channel::is_reply;
use crate::http_parts::{header_str, json_error, json_reply, sse_headers, KEEPALIVE};
use crate::modern::rounds::{start, Rounds};
use crate::modern::{self, hooked, listen, Admitted, HeaderSource};
use crate::state::State;
use crate::stream;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sluice_core::{codes, Kind, Message, Principal, RpcError};
use std::sync::Arc;
use tokio::sync::mpsc;

impl HeaderSource for HeaderMap {
    fn header(&self, name: &str) -> Option<Option<&str>> {
        // The two every request is asked for, by name (a lookup by text parses the name).
        let value = match name {
            sluice_core::headers::SESSION_ID => self.get(crate::http_parts::SESSION),
            sluice_core::headers::PROTOCOL_VERSION => self.get(crate::http_parts::PROTOCOL),
            _ => self.get(name),
        };
        value.map(|v| v.to_str().ok())
    }
}

/// Serve one modern request (the caller detected the era and authenticated the caller).
pub(crate) async fn post(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    headers: &HeaderMap,
    msg: Message,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
) -> Response {
    match msg.kind() {
        Kind::Request => {}
        Kind::Notification => return StatusCode::ACCEPTED.into_response(),
        Kind::Response | Kind::Error => {
            return json_error(
                StatusCode::BAD_REQUEST,
                RpcError::new(
                    codes::INVALID_REQUEST,
                    "modern clients send no responses: answer input requests by retrying the request with inputResponses",
                ),
                None,
            )
        }
    }
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let requested = match modern::admit(&st, &msg, Some(headers)) {
        Ok(Admitted::Discover(reply)) => {
            // An endpoint's own instructions and serverInfo name.
            let own = endpoint.and_then(|e| modern::discover_on(&st, e, id.clone()));
            let authorization = header_str(headers, axum::http::header::AUTHORIZATION);
            let reply = own.unwrap_or(reply);
            let reply = hooked::discover(&st, msg, authorization, principal, endpoint, reply).await;
            return json_reply(reply);
        }
        Ok(Admitted::Listen) => {
            let authorization = header_str(headers, axum::http::header::AUTHORIZATION);
            let msg = match hooked::listen(&st, msg, authorization, principal, endpoint).await {
                Ok(msg) => msg,
                Err(reply) => return json_reply(reply),
            };
            let (ack, rx) = listen::subscribe(&st, id, &msg, endpoint);
            let body = Body::from_stream(stream::live(rx, Some(ack), KEEPALIVE));
            return sse_headers(body.into_response());
        }
        Ok(Admitted::Call { requested }) => requested,
        Err(refusal) => {
            let status = if refusal.unknown_method {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::BAD_REQUEST
            };
            return json_error(status, refusal.error, Some(&id));
        }
    };
    let authorization = header_str(headers, axum::http::header::AUTHORIZATION);
    // A retry whose call waits on another replica of the cluster: that replica continues it.
    let handed = st
        .rt
        .scale()
        .hand_retry(
            &st,
            &rounds,
            &msg,
            principal.as_deref(),
            authorization,
            endpoint,
        )
        .await;
    if let Some(rx) = handed {
        return respond(rx).await;
    }
    let session =
        modern::ephemeral_session_on(&st, authorization, &msg, &requested, principal, endpoint);
    let (out, out_rx) = mpsc::unbounded_channel::<Message>();
    tokio::spawn(start(st, rounds, session, msg, out));
    respond(out_rx).await
}

/// Answer over HTTP with what a round emits: JSON when its first message is the reply (or an
/// `input_required` result), else an SSE stream of everything it emits. Dropping the response
/// (the client closed it) closes the channel, which cancels the round's call.
async fn respond(mut out_rx: mpsc::UnboundedReceiver<Message>) -> Response {
    match out_rx.recv().await {
        None => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            RpcError::internal("the call ended without a reply"),
            None,
        ),
        Some(m)
            if m.kind() == Kind::Error
                && m.error_code() == Some(codes::MISSING_REQUIRED_CLIENT_CAPABILITY) =>
        {
            let mut r = json_reply(m);
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r
        }
        Some(m) if is_reply(&m) => json_reply(m),
        Some(m) => {
            let body = Body::from_stream(stream::live(out_rx, Some(m), KEEPALIVE));
            sse_headers(body.into_response())
        }
    }
}
