//! One call to one upstream: a fresh id and progress token upstream, the call tracked so what
//! the upstream sends about it finds its way back, the timeout, the reply under the client's
//! id; the `input_required` rounds a 2026-07-28 upstream asks a legacy client for; the
//! `logging/setLevel` fan-out; and the client's cancellation of a call.

use crate::calls::CallRoute;
use crate::channel::{Outcome, Sink};
use crate::session::Session;
use crate::state::{Snapshot, State};
use serde_json::{json, Value};
use sluice_core::{codes, member, Message, RpcError};
use sluice_telemetry::{ClientOp, UpstreamSpan};
use sluice_upstream::{failure_reply, Answer, ExtraHeaders, Slot, Status, UpstreamError};
use std::sync::Arc;

/// How many `input_required` rounds Sluice runs for a legacy client before giving up.
const MAX_INPUT_ROUNDS: usize = 16;

/// Forward a request to one upstream with a fresh id (and a fresh progress token), wait for the
/// reply, and give it back under the client's id. In a cluster, a request that met the end of
/// the shared upstream session (HTTP 404: the upstream restarted; it ran nothing) goes once
/// more, over the upstream session opened again.
pub(crate) async fn call(
    st: &Arc<State>,
    session: &Arc<Session>,
    slot: &Arc<Slot>,
    msg: Message,
    sink: &Sink,
) -> Outcome {
    if !slot.shares_sessions() || session.is_modern() {
        return call_once(st, session, slot, msg, sink).await.0;
    }
    let again = msg.clone();
    match call_once(st, session, slot, msg, sink).await {
        (_, Some(e)) if goes_again(&e) => {
            tracing::info!(session = %session.id, upstream = %slot.spec.id, "the shared upstream session ended (HTTP 404): opening it again");
            call_once(st, session, slot, again, sink).await.0
        }
        (outcome, _) => outcome,
    }
}

/// The `Authorization` value of an exchange upstream's call: the caller's own bearer token
/// exchanged (RFC 8693) for one toward the upstream, cached per principal. Only a JWT the
/// identity provider issued is exchanged: a static token of Sluice's own is never sent there.
async fn exchanged(
    x: &sluice_oauth::Exchanger,
    session: &Session,
    upstream: &str,
) -> Result<Arc<hyper::header::HeaderValue>, RpcError> {
    let unavailable = |why: String| {
        RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            format!("Upstream '{upstream}' acts as each user through token exchange, and {why}"),
        )
        .with_data(json!({"upstream": upstream}))
    };
    let (Some(principal), Some(auth)) = (session.principal_key(), session.authorization()) else {
        return Err(unavailable(
            "this caller presented no token to exchange".into(),
        ));
    };
    if !principal.starts_with("jwt:") {
        return Err(unavailable(
            "this caller authenticated with a static token: only a token from the identity provider (a JWT) can be exchanged".into(),
        ));
    }
    let subject = auth.strip_prefix("Bearer ").unwrap_or(&auth);
    x.token_for(principal, subject)
        .await
        .map_err(|e| unavailable(format!("the exchange failed: {e}")))
}

/// Does a request that failed with `e` go once more over the shared upstream session opened
/// again? Only when the upstream ended that session ([`UpstreamError::SessionEnded`]: it
/// answered HTTP 404 to a request carrying the session's id, and ran nothing).
fn goes_again(e: &UpstreamError) -> bool {
    matches!(e, UpstreamError::SessionEnded)
}

/// One attempt of [`call`]: its outcome, and why the call failed when the upstream did not
/// answer it (the request failed on its way, the connection closed, no reply in time).
async fn call_once(
    st: &Arc<State>,
    session: &Arc<Session>,
    slot: &Arc<Slot>,
    mut msg: Message,
    sink: &Sink,
) -> (Outcome, Option<UpstreamError>) {
    let client_id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    // An exchange upstream: a token minted for this caller from its own (never the raw one);
    // the caller's own upstream connection is opened with it.
    let bearer = match slot.exchanger() {
        Some(x) => match exchanged(x, session, &slot.spec.id).await {
            Ok(b) => Some(b),
            Err(e) => return (Outcome::Reply(Message::error(client_id, &e)), None),
        },
        None => None,
    };
    let conn = match slot
        .connection_as(session.upstream_ref(), bearer.as_ref())
        .await
    {
        Ok(c) => c,
        Err(e) => return (Outcome::Reply(Message::error(client_id, &e)), None),
    };
    let up_id = conn.next_id();
    msg.set_id(json!(up_id));
    strip_internal_meta(&mut msg);
    // Tracing: a child span of the request's, its context passed upstream.
    let span = UpstreamSpan::start(st.rt.telemetry().as_ref());
    let mut headers = ExtraHeaders::default();
    if let Some(traceparent) = span
        .as_ref()
        .and_then(|s| s.propagate(&slot.spec, &mut msg))
    {
        headers.push("traceparent", traceparent);
    }
    if conn.is_modern() {
        modern_upstream_request(slot, session, &mut msg, &mut headers);
    }
    if let Some(b) = &bearer {
        headers.push("authorization", b.to_str().unwrap_or_default());
    }
    // The client's token goes upstream only when the upstream asks for it.
    if slot.spec.forward_authorization {
        if let Some(auth) = session.authorization() {
            headers.push("authorization", auth.to_string());
        }
    }
    let protocol_version = conn
        .init_result()
        .get("protocolVersion")
        .and_then(Value::as_str);
    // Measured only when something reads it (`/metrics`, a span).
    let client_op = ClientOp::wanted(span.is_some())
        .then(|| ClientOp::start(&slot.spec, &msg, protocol_version));
    let progress_token = match msg.progress_token().cloned() {
        Some(t) => {
            if let Some(meta) = msg
                .params_mut()
                .get_mut("_meta")
                .and_then(Value::as_object_mut)
            {
                meta.insert("progressToken".into(), json!(up_id));
            }
            Some(t)
        }
        None => None,
    };
    // Recorded in this thread's part of the call table; a cancellation takes it out.
    st.rt.calls().track(
        conn.serial(),
        up_id,
        CallRoute {
            session: session.clone(),
            progress_token,
            sink: sink.clone(),
            client_id: client_id.clone(),
            conn: conn.clone(),
        },
    );
    // Forget the call however this ends (a reply, or the caller dropping the future when its
    // client went away).
    struct Untrack<'a> {
        st: &'a State,
        serial: u64,
        up_id: u64,
    }
    impl Untrack<'_> {
        /// Forget the call; false if a cancellation took it out first.
        fn finish(self) -> bool {
            let this = std::mem::ManuallyDrop::new(self);
            this.st.rt.calls().untrack(this.serial, this.up_id)
        }
    }
    impl Drop for Untrack<'_> {
        fn drop(&mut self) {
            self.st.rt.calls().untrack(self.serial, self.up_id);
        }
    }
    let untrack = Untrack {
        st,
        serial: conn.serial(),
        up_id,
    };
    let result = conn.request(up_id, msg, slot.timeout(), &headers).await;
    // Gone from the table while its session lives: the client cancelled it.
    let cancelled = !untrack.finish() && !session.is_closed();
    // A request that failed on its way is answered with the JSON-RPC error naming why, as the
    // upstream's own error would be; why is kept beside it.
    let (result, failed) = match result {
        Ok(Answer::Reply(reply)) => (Ok(reply), None),
        Ok(Answer::Failed(e)) => (Ok(failure_reply(up_id, &e)), Some(e)),
        Err(e) => (Err(e), None),
    };
    let answer = result.as_ref().map_err(|e| {
        let kind = match e {
            UpstreamError::Timeout(_) => "timeout",
            _ => "_OTHER",
        };
        (kind, e as &dyn std::fmt::Display)
    });
    if let Some(op) = &client_op {
        if let Some(s) = span {
            s.finish(&slot.spec, op, answer);
        }
        op.finish(answer);
    }
    if cancelled {
        return (Outcome::Cancelled(client_id), None);
    }
    match result {
        Ok(mut reply) => {
            reply.set_id(client_id);
            (Outcome::Reply(reply), failed)
        }
        Err(e) => {
            let reply = unanswered(slot, &method, client_id, &e);
            (Outcome::Reply(reply), Some(e))
        }
    }
}

/// The error a client gets for a call the upstream did not answer: no reply in time (-32001,
/// cancelled upstream), or the connection closed (-32000), naming the upstream.
fn unanswered(slot: &Slot, method: &str, client_id: Value, e: &UpstreamError) -> Message {
    match e {
        UpstreamError::Timeout(ms) => Message::error(
            client_id,
            &RpcError::new(
                codes::REQUEST_TIMEOUT,
                format!("Upstream '{}' did not answer {method} within {ms} ms; the request was cancelled upstream", slot.spec.id),
            )
            .with_data(json!({"upstream": slot.spec.id, "timeoutMs": ms})),
        ),
        e => Message::error(
            client_id,
            &RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("Upstream '{}' failed during {method}: {e}", slot.spec.id),
            )
            .with_data(json!({"upstream": slot.spec.id})),
        ),
    }
}

/// [`call`], and when a 2026-07-28 upstream answers a legacy client with `input_required`:
/// ask the client each input request (as the legacy server-to-client request it knows), then
/// retry the request with the answers and the upstream's `requestState`. A modern client gets
/// the `input_required` result itself (its retry comes back through here, stateless).
pub(crate) async fn call_with_rounds(
    st: &Arc<State>,
    session: &Arc<Session>,
    slot: &Arc<Slot>,
    mut msg: Message,
    sink: &Sink,
) -> Outcome {
    let client_id = msg.id().cloned().unwrap_or(Value::Null);
    for _ in 0..MAX_INPUT_ROUNDS {
        let outcome = call(st, session, slot, msg.clone(), sink).await;
        let Outcome::Reply(reply) = &outcome else {
            return outcome;
        };
        let input_required = reply
            .result()
            .and_then(|r| r.get("resultType"))
            .and_then(Value::as_str)
            == Some("input_required");
        if !input_required || session.is_modern() {
            if !slot.is_modern() || input_required {
                return outcome;
            }
            let Outcome::Reply(reply) = outcome else {
                unreachable!("matched above")
            };
            return Outcome::Reply(legacy_shaped(reply, !session.is_modern()));
        }
        let result = reply.result().cloned().unwrap_or_default();
        let responses = match ask_for_input(st, session, sink, &result, &slot.spec.id).await {
            Ok(r) => r,
            Err(e) => return Outcome::Reply(Message::error(client_id, &e)),
        };
        let params = msg.params_mut();
        params.insert("inputResponses".into(), Value::Object(responses));
        match result.get("requestState") {
            Some(state) => {
                params.insert("requestState".into(), state.clone());
            }
            None => {
                params.remove("requestState");
            }
        }
    }
    Outcome::Reply(Message::error(
        client_id,
        &RpcError::internal(format!(
            "Upstream '{}' asked for input more than {MAX_INPUT_ROUNDS} times; the request was abandoned",
            slot.spec.id
        )),
    ))
}

/// Gateway-internal metadata never goes upstream: the explain hook's reason comes out of
/// `params._meta`, and a `_meta` left empty goes too.
fn strip_internal_meta(msg: &mut Message) {
    let key = sluice_hooks::builtin::explain::EXPLAIN_REASON_META;
    // Looked at first and changed only when it must be (a request kept as text then keeps a
    // client's `_meta` as sent); found by comparing keys, and a `_meta` that holds nothing but
    // the reason goes whole (one removal, not two).
    let Some(Value::Object(meta)) = msg.param("_meta") else {
        return;
    };
    let has_reason = member::get(meta, key).is_some();
    if meta.is_empty() || (has_reason && meta.len() == 1) {
        msg.remove_param("_meta");
    } else if has_reason {
        if let Some(meta) = msg.param_mut("_meta").and_then(Value::as_object_mut) {
            meta.shift_remove(key);
        }
    }
}

/// A complete result of a 2026-07-28 upstream, in the shape of a legacy one, so hooks see one
/// model whichever era the upstream speaks (a modern client gets the marks back from the modern
/// face's decoration; a legacy client never sees them).
fn legacy_shaped(mut reply: Message, legacy_client: bool) -> Message {
    if let Some(r) = reply.result_mut().and_then(Value::as_object_mut) {
        r.remove("resultType");
        if legacy_client {
            r.remove("ttlMs");
            r.remove("cacheScope");
        }
        let empty = r.get_mut("_meta").and_then(Value::as_object_mut).map(|m| {
            m.remove(sluice_core::version::meta::SERVER_INFO);
            m.is_empty()
        });
        if empty == Some(true) {
            r.remove("_meta");
        }
    }
    reply
}

/// Ask a legacy client every input request of an `input_required` result, one by one; the
/// answers keyed as the requests were.
async fn ask_for_input(
    st: &Arc<State>,
    session: &Arc<Session>,
    sink: &Sink,
    result: &Value,
    upstream: &str,
) -> Result<serde_json::Map<String, Value>, RpcError> {
    let mut responses = serde_json::Map::new();
    let Some(requests) = result.get("inputRequests").and_then(Value::as_object) else {
        return Ok(responses);
    };
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let params = request.get("params").cloned();
        let answer =
            super::client_out::ask_client(st, session, sink, method, params, upstream).await?;
        responses.insert(key.clone(), answer);
    }
    Ok(responses)
}

/// What a request to a 2026-07-28 upstream carries besides the envelope the connection adds:
/// the calling client's own capabilities, and the `Mcp-Param-*` headers its tool's
/// `x-mcp-header` parameters call for.
fn modern_upstream_request(
    slot: &Slot,
    session: &Session,
    msg: &mut Message,
    extra: &mut ExtraHeaders,
) {
    let caps = (*session.init.capabilities).clone();
    // A legacy client hears log messages unless it lowered the level (the handshake era's
    // default); a modern client's own `logLevel` (or none) travels as it sent it.
    let level = (!session.is_modern()).then(|| {
        session
            .live
            .log_level
            .lock()
            .clone()
            .unwrap_or_else(|| "debug".into())
    });
    let params = msg.params_mut();
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        // (A task-augmented call may carry the capabilities it needs: `proxy/tasks/`.)
        m.entry(sluice_core::version::meta::CLIENT_CAPABILITIES)
            .or_insert(caps);
        if let Some(level) = level {
            m.entry(sluice_core::version::meta::LOG_LEVEL)
                .or_insert_with(|| json!(level));
        }
    }
    if msg.method() != Some("tools/call") {
        return;
    }
    // The upstream's own definition (a `describe` hook may change what clients see).
    let name = msg.param_str("name").unwrap_or("").to_string();
    let Some(schema) = slot.state.lock().lists.as_ref().and_then(|l| {
        l.tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name.as_str()))
            .and_then(|t| t.get("inputSchema").cloned())
    }) else {
        return;
    };
    let args = msg.param("arguments").unwrap_or(&Value::Null);
    extra
        .0
        .extend(sluice_upstream::tool_headers::param_headers(&schema, args).0);
}

/// Send `logging/setLevel` to every connected upstream that has the logging capability.
pub(crate) async fn set_level(snap: &Snapshot, session: &Arc<Session>, msg: &Message) {
    let params = msg.params().cloned();
    let mut calls = Vec::new();
    for slot in snap.slots.iter() {
        let has_logging = slot
            .capabilities()
            .is_some_and(|c| c.get("logging").is_some());
        // A 2026-07-28 upstream takes the level per request (`_meta` logLevel).
        if slot.status() != Status::Up || !has_logging || slot.is_modern() {
            continue;
        }
        let params = params.clone();
        calls.push(async move {
            if let Ok(conn) = slot.connection_for(session.upstream_ref()).await {
                if let Err(e) = conn.call("logging/setLevel", params, slot.timeout()).await {
                    tracing::warn!(upstream = %slot.spec.id, "logging/setLevel failed: {e}");
                }
            }
        });
    }
    futures_util::future::join_all(calls).await;
}

/// The client cancelled one of its requests: tell the upstream (with its id) and stop waiting.
pub(crate) fn cancel(st: &State, session: &Session, client_id: &Value, reason: Option<&Value>) {
    let Some((upstream_id, call)) = st.rt.calls().take_by_client(session, client_id) else {
        return;
    };
    let mut params = json!({"requestId": upstream_id});
    if let Some(r) = reason {
        params["reason"] = r.clone();
    }
    let _ = call.conn.notify("notifications/cancelled", Some(params));
    // Its caller stops waiting, and finds the call gone from the table.
    call.conn.forget(upstream_id);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retry is decided on the error's variant: the end of the shared upstream session
    /// goes again, and nothing else does, whatever its text says.
    #[test]
    fn only_the_end_of_the_upstream_session_sends_a_call_again() {
        assert!(goes_again(&UpstreamError::SessionEnded));
        let not_again = [
            // The text of the end of a session, as a plain close reason.
            UpstreamError::Closed("the upstream ended the session (HTTP 404)".into()),
            // A 404 without a session (nothing was ended).
            UpstreamError::Status {
                status: 404,
                body: Some("(HTTP 404)".into()),
            },
            sluice_upstream::ProtocolError::ResumeStatus { status: 404 }.into(),
            UpstreamError::Closed("the process closed its stdout (exited)".into()),
            UpstreamError::Timeout(1000),
        ];
        for e in &not_again {
            assert!(!goes_again(e), "{e}");
        }
    }

    fn stripped(params: Value) -> Value {
        let mut msg = Message::request(json!(1), "tools/call", Some(params));
        strip_internal_meta(&mut msg);
        msg.params().cloned().unwrap_or(Value::Null)
    }

    #[test]
    fn the_reason_and_an_emptied_meta_never_go_upstream() {
        let reason = sluice_hooks::builtin::explain::EXPLAIN_REASON_META;
        // Only the reason: `_meta` goes whole.
        assert_eq!(
            stripped(json!({"name": "echo", "_meta": {reason: "why"}})),
            json!({"name": "echo"})
        );
        // The reason beside the client's own metadata: only the reason goes.
        assert_eq!(
            stripped(json!({"name": "echo", "_meta": {"progressToken": 7, reason: "why"}})),
            json!({"name": "echo", "_meta": {"progressToken": 7}})
        );
        // An empty `_meta` goes; one without the reason is left as it is.
        assert_eq!(
            stripped(json!({"name": "echo", "_meta": {}})),
            json!({"name": "echo"})
        );
        assert_eq!(
            stripped(json!({"name": "echo", "_meta": {"progressToken": 7}})),
            json!({"name": "echo", "_meta": {"progressToken": 7}})
        );
        // No `_meta`: nothing changes.
        assert_eq!(
            stripped(json!({"name": "echo", "arguments": {}})),
            json!({"name": "echo", "arguments": {}})
        );
    }

    #[test]
    fn a_call_kept_as_text_loses_the_reason_and_keeps_the_rest_as_sent() {
        let reason = sluice_hooks::builtin::explain::EXPLAIN_REASON_META;
        let text = |params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
        };
        let after = |params: &str, change: &dyn Fn(&mut Message)| {
            let mut msg = Message::parse(text(params).as_bytes()).unwrap();
            change(&mut msg);
            strip_internal_meta(&mut msg);
            msg.to_json()
        };
        let add_reason = |m: &mut Message| {
            m.set_param("_meta", json!({reason: "why"}));
        };
        let none = |_: &mut Message| {};
        // The `_meta` the explain hook added goes whole; the rest is the text as sent.
        let sent = r#"{"name":"echo","arguments":{"n":1.10}}"#;
        assert_eq!(after(sent, &add_reason), text(sent));
        // The client's `_meta`: only the reason goes (that member is written anew).
        let sent = r#"{"name":"echo","_meta":{"progressToken":7},"arguments":{"n":1.10}}"#;
        let with_reason = |m: &mut Message| {
            m.param_mut("_meta")
                .and_then(Value::as_object_mut)
                .unwrap()
                .insert(reason.into(), json!("why"));
        };
        assert_eq!(after(sent, &with_reason), text(sent));
        // Without the reason, a client's `_meta` is not touched (its text stays as sent); an
        // empty one goes.
        let sent = r#"{"name":"echo","_meta":{"progressToken":1.50}}"#;
        assert_eq!(after(sent, &none), text(sent));
        assert_eq!(
            after(r#"{"name":"echo","_meta":{ },"arguments":{}}"#, &none),
            text(r#"{"name":"echo","arguments":{}}"#)
        );
    }
}
