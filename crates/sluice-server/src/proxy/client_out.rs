//! Messages toward a client: delivered through the response hooks (on the call's stream when
//! there is one), the gateway's own questions to the client ([`ask_client`]), and the client's
//! replies relayed back to whoever asked ([`relay_client_reply`]).

use super::call::{Call, End};
use super::hooks::Facts;
use crate::channel::{send_msg, Sink};
use crate::session::Session;
use crate::state::State;
use serde_json::{json, Value};
use sluice_core::{codes, Kind, Message, RpcError};
use sluice_hooks::Refusal;
use std::sync::Arc;
use std::time::Duration;

/// Send a message toward a client through the response hooks: on the call's own stream when
/// there is one (else the session's), false when a hook refused it.
pub(crate) async fn deliver(
    st: &Arc<State>,
    session: &Arc<Session>,
    sink: Option<&Sink>,
    msg: Message,
    upstream: &str,
) -> bool {
    try_deliver(st, session, sink, msg, upstream).await.is_ok()
}

/// [`deliver`], with the hook's refusal when one refused the message.
pub(crate) async fn try_deliver(
    st: &Arc<State>,
    session: &Arc<Session>,
    sink: Option<&Sink>,
    msg: Message,
    upstream: &str,
) -> Result<(), Refusal> {
    let was_request = msg.kind() == Kind::Request;
    let msg = to_client(st, session, msg, Some(upstream)).await?;
    if was_request && matches!(msg.kind(), Kind::Response | Kind::Error) {
        // A hook answered for the client (an Elicitation hook's accept, decline or cancel, a
        // Civic hook's `respond`): the answer goes back to whoever asked, and the client is
        // not asked.
        relay_client_reply(session, msg);
        return Ok(());
    }
    match sink {
        Some(sink) => {
            if let Err(msg) = send_msg(sink, msg) {
                session.send_unrelated(msg);
            }
        }
        None => session.send_unrelated(msg),
    }
    Ok(())
}

/// The client capability a server-to-client request needs (sampling, elicitation, roots).
pub(crate) fn client_capability_for(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Ask the client something on the gateway's own behalf (a 2026-07-28 upstream's input
/// request, for a legacy client): the request goes to it like an upstream's would (on the
/// call's stream, through the response hooks), and its reply comes back here.
pub(crate) async fn ask_client(
    st: &Arc<State>,
    session: &Arc<Session>,
    sink: &Sink,
    method: &str,
    params: Option<Value>,
    upstream: &str,
) -> Result<Value, RpcError> {
    let Some(cap) = client_capability_for(method) else {
        return Err(RpcError::internal(format!(
            "Upstream '{upstream}' asked for input with {method}, which clients do not answer"
        )));
    };
    if !session.has_capability(cap) {
        return Err(RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!("Upstream '{upstream}' needs {method}, but the client did not declare the {cap} capability"),
        ));
    }
    let client_id = session.mint_request_id();
    let (tx, rx) = tokio::sync::oneshot::channel();
    session.routes.asked.lock().insert(client_id.clone(), tx);
    let msg = Message::request(json!(client_id.clone()), method, params);
    if !deliver(st, session, Some(sink), msg, upstream).await {
        session.routes.asked.lock().remove(&client_id);
        return Err(RpcError::new(codes::RESPONSE_REJECTED, "Response rejected"));
    }
    let wait = Duration::from_millis(st.snapshot().settings().request_timeout_ms);
    let reply = match tokio::time::timeout(wait, rx).await {
        Ok(Ok(reply)) => reply,
        _ => {
            session.routes.asked.lock().remove(&client_id);
            return Err(RpcError::new(
                codes::REQUEST_TIMEOUT,
                format!(
                    "The client did not answer {method} within {} ms",
                    wait.as_millis()
                ),
            ));
        }
    };
    match (reply.result(), reply.error_obj()) {
        (Some(r), _) => Ok(r.clone()),
        (None, Some(e)) => Err(RpcError::new(
            e.get("code")
                .and_then(Value::as_i64)
                .unwrap_or(codes::INTERNAL_ERROR),
            e.get("message")
                .and_then(Value::as_str)
                .unwrap_or("the client refused")
                .to_string(),
        )),
        _ => Err(RpcError::internal(
            "the client answered with neither a result nor an error",
        )),
    }
}

/// Relay the client's reply to an upstream request back to the upstream, with the upstream's
/// own id (or to the gateway's own question, [`ask_client`]).
pub(crate) fn relay_client_reply(session: &Session, mut msg: Message) {
    let Some(id) = msg.id().and_then(Value::as_str).map(str::to_string) else {
        tracing::warn!(session = %session.id, "reply with an id Sluice never sent: {}", msg.to_json());
        return;
    };
    if let Some(waiter) = session.routes.asked.lock().remove(&id) {
        let _ = waiter.send(msg);
        return;
    }
    let Some(pending) = session.routes.server_requests.lock().remove(&id) else {
        tracing::warn!(session = %session.id, id, "reply to no pending request");
        return;
    };
    msg.set_id(pending.upstream_id);
    if let Err(e) = pending.conn.send(&msg) {
        tracing::warn!(session = %session.id, "relaying a reply upstream failed: {e}");
    }
}

/// A message toward the client that answers none of its requests: the response hooks. `Err`
/// = refused (logged and audited; an upstream request is answered with -32031 by the caller).
pub(crate) async fn to_client(
    st: &Arc<State>,
    session: &Arc<Session>,
    msg: Message,
    upstream: Option<&str>,
) -> Result<Message, Refusal> {
    let snap = st.snapshot_for(session);
    if snap.chain.is_empty() {
        return Ok(msg);
    }
    let facts = Facts::plain(msg.method().unwrap_or(""), upstream);
    let mut call = Call::plain(st, &snap, session, facts);
    let r = call.response_hooks(msg, None, usize::MAX).await;
    match &r {
        Err(refusal) => {
            tracing::info!(session = %session.id, method = %call.facts().map_or("", |f| f.method.as_str()), reason = %refusal.reason, "message to the client refused by a hook");
            call.finish(End::Dropped(refusal.reason.clone()));
        }
        Ok(_) => call.finish(End::Passed),
    }
    r
}
