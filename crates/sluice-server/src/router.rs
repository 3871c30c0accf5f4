//! The router: what the gateway does with each message a client sends — answer it here
//! (ping, lists), forward it to the one upstream that owns its target (tools/call, prompts/get,
//! resources/read, …), fan it out (logging/setLevel), or relay a reply upstream.

use crate::catalog::{Catalog, ListKind};
use crate::gateway::{CallRoute, Gateway, Sink};
use crate::session::{id_key, InflightCall, Session};
use crate::upstreams::{Slot, Status};
use serde_json::{json, Value};
use sluice_core::{codes, Kind, Message, RpcError};
use sluice_upstream::{ExtraHeaders, UpstreamError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What became of a client request.
pub enum Outcome {
    /// Send this reply.
    Reply(Message),
    /// The client cancelled it: send nothing (stdio) or a cancellation error (HTTP).
    Cancelled(Value),
}

impl Outcome {
    /// The reply to send on a transport that must answer every request.
    pub fn into_reply(self) -> Message {
        match self {
            Outcome::Reply(m) => m,
            Outcome::Cancelled(id) => Message::error(
                id,
                &RpcError::new(codes::INTERNAL_ERROR, "Request cancelled by the client"),
            ),
        }
    }
}

/// Handle a request from an initialised session.
pub async fn handle_request(
    gw: &Arc<Gateway>,
    session: &Arc<Session>,
    msg: Message,
    sink: &Sink,
) -> Outcome {
    // One snapshot of the catalog (and the slots its routes index) for the whole request.
    let catalog = gw.catalog();
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let done = |r: Result<Value, RpcError>| match r {
        Ok(result) => Outcome::Reply(Message::response(id.clone(), result)),
        Err(e) => Outcome::Reply(Message::error(id.clone(), &e)),
    };
    let page_size = gw.settings().page_size as usize;
    let cursor = msg.param_str("cursor").map(str::to_string);
    // Access rules are looked up only for a list (not on every call).
    let list = |kind: ListKind| {
        let policy = gw.policy();
        if policy.is_open() {
            return catalog.page_of(kind, cursor.as_deref(), page_size, None);
        }
        let principal = session.principal();
        let filter =
            |item: &Value| crate::access::visible(&policy, principal.as_deref(), kind, item);
        catalog.page_of(kind, cursor.as_deref(), page_size, Some(&filter))
    };
    match method.as_str() {
        "ping" => done(Ok(json!({}))),
        "initialize" => done(Err(RpcError::invalid_request(
            "the session is already initialised",
        ))),
        "tools/list" => done(list(ListKind::Tools)),
        "prompts/list" => done(list(ListKind::Prompts)),
        "resources/list" => done(list(ListKind::Resources)),
        "resources/templates/list" => done(list(ListKind::Templates)),
        "tools/call" => {
            let Some(name) = msg.param_str("name").map(str::to_string) else {
                return done(Err(RpcError::invalid_params(
                    "tools/call needs params.name",
                )));
            };
            let Some(route) = catalog.tool(&name).cloned() else {
                if let Some(slot) = catalog.down_owner(&name) {
                    return done(Err(catalog.slots[slot].unavailable()));
                }
                return done(Err(RpcError::invalid_params(format!(
                    "Unknown tool: {name}"
                ))));
            };
            if route.slot == usize::MAX {
                return crate::funnel::call(gw, session, msg, sink).await;
            }
            let mut msg = msg;
            msg.params_mut().insert("name".into(), json!(route.name));
            forward_rounds(gw, session, &catalog.slots[route.slot].clone(), msg, sink).await
        }
        "prompts/get" => {
            let Some(name) = msg.param_str("name").map(str::to_string) else {
                return done(Err(RpcError::invalid_params(
                    "prompts/get needs params.name",
                )));
            };
            let Some(route) = catalog.prompt(&name).cloned() else {
                return done(Err(RpcError::invalid_params(format!(
                    "Unknown prompt: {name}"
                ))));
            };
            let mut msg = msg;
            msg.params_mut().insert("name".into(), json!(route.name));
            forward_rounds(gw, session, &catalog.slots[route.slot].clone(), msg, sink).await
        }
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            let Some(uri) = msg.param_str("uri").map(str::to_string) else {
                return done(Err(RpcError::invalid_params(format!(
                    "{method} needs params.uri"
                ))));
            };
            let Some(slot) = resource_slot(&catalog, &uri) else {
                return done(Err(RpcError::new(
                    codes::INVALID_PARAMS,
                    format!("Resource not found: {uri}"),
                )
                .with_data(json!({"uri": uri}))));
            };
            // A 2026-07-28 upstream has no resources/subscribe: Sluice subscribes on a listen
            // stream of its own and answers the client itself.
            let outcome = if method != "resources/read" && slot.is_modern() {
                if method == "resources/subscribe" {
                    slot.watch_resource(&uri);
                }
                Outcome::Reply(Message::response(id.clone(), json!({})))
            } else {
                forward_rounds(gw, session, &slot, msg, sink).await
            };
            if let Outcome::Reply(r) = &outcome {
                if r.kind() == Kind::Response {
                    if method == "resources/subscribe" {
                        session.subscriptions.lock().insert(uri);
                    } else if method == "resources/unsubscribe" {
                        session.subscriptions.lock().remove(&uri);
                    }
                }
            }
            outcome
        }
        "completion/complete" => {
            let reference = msg
                .params()
                .and_then(|p| p.get("ref"))
                .cloned()
                .unwrap_or(Value::Null);
            match reference.get("type").and_then(Value::as_str) {
                Some("ref/prompt") => {
                    let name = reference.get("name").and_then(Value::as_str).unwrap_or("");
                    let Some(route) = catalog.prompt(name).cloned() else {
                        return done(Err(RpcError::invalid_params(format!(
                            "Unknown prompt: {name}"
                        ))));
                    };
                    let mut msg = msg;
                    if let Some(r) = msg
                        .params_mut()
                        .get_mut("ref")
                        .and_then(Value::as_object_mut)
                    {
                        r.insert("name".into(), json!(route.name));
                    }
                    forward(gw, session, &catalog.slots[route.slot].clone(), msg, sink).await
                }
                Some("ref/resource") => {
                    let uri = reference.get("uri").and_then(Value::as_str).unwrap_or("");
                    match resource_slot(&catalog, uri) {
                        Some(slot) => forward(gw, session, &slot, msg, sink).await,
                        None => done(Err(RpcError::invalid_params(format!(
                            "Resource not found: {uri}"
                        )))),
                    }
                }
                _ => done(Err(RpcError::invalid_params(
                    "completion/complete needs params.ref of type ref/prompt or ref/resource",
                ))),
            }
        }
        "logging/setLevel" => {
            if msg.param_str("level").is_none() {
                return done(Err(RpcError::invalid_params(
                    "logging/setLevel needs params.level",
                )));
            }
            *session.log_level.lock() = msg.param_str("level").map(str::to_string);
            fan_out_set_level(gw, session, &msg).await;
            done(Ok(json!({})))
        }
        _ => done(Err(RpcError::method_not_found(&method))),
    }
}

/// The slot serving a resource URI; with a single upstream offering resources, that one.
pub(crate) fn resource_slot(catalog: &Catalog, uri: &str) -> Option<Arc<Slot>> {
    if let Some(s) = catalog.resource(uri) {
        return Some(catalog.slots[s].clone());
    }
    let with_resources: Vec<&Arc<Slot>> = catalog
        .slots
        .iter()
        .filter(|s| {
            s.capabilities()
                .is_some_and(|c| c.get("resources").is_some())
        })
        .collect();
    match with_resources.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// Send `logging/setLevel` to every connected upstream that has the logging capability.
async fn fan_out_set_level(gw: &Arc<Gateway>, session: &Arc<Session>, msg: &Message) {
    let params = msg.params().cloned();
    let slots = gw.slots();
    let mut calls = Vec::new();
    for slot in slots.iter() {
        let has_logging = slot
            .capabilities()
            .is_some_and(|c| c.get("logging").is_some());
        // A 2026-07-28 upstream takes the level per request (`_meta` logLevel).
        if slot.status() != Status::Up || !has_logging || slot.is_modern() {
            continue;
        }
        let params = params.clone();
        calls.push(async move {
            if let Ok(conn) = slot.connection_for(gw, session).await {
                if let Err(e) = conn
                    .call("logging/setLevel", params, slot.timeout(gw))
                    .await
                {
                    tracing::warn!(upstream = %slot.spec.id, "logging/setLevel failed: {e}");
                }
            }
        });
    }
    futures_util::future::join_all(calls).await;
}

/// Forward a request to one upstream with a fresh id (and a fresh progress token), wait for the
/// reply, and give it back under the client's id.
pub async fn forward(
    gw: &Arc<Gateway>,
    session: &Arc<Session>,
    slot: &Arc<Slot>,
    mut msg: Message,
    sink: &Sink,
) -> Outcome {
    let client_id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let conn = match slot.connection_for(gw, session).await {
        Ok(c) => c,
        Err(e) => return Outcome::Reply(Message::error(client_id, &e)),
    };
    let up_id = conn.next_id();
    msg.set_id(json!(up_id));
    // Gateway-internal metadata never goes upstream.
    if msg.params().and_then(|p| p.get("_meta")).is_some() {
        let params = msg.params_mut();
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove(sluice_hooks::builtin::explain::EXPLAIN_REASON_META);
            if meta.is_empty() {
                params.remove("_meta");
            }
        }
    }
    // Tracing: a child span of the request's, its context passed upstream.
    let span = crate::telemetry::UpstreamSpan::start(gw);
    let mut headers = ExtraHeaders::default();
    if let Some(s) = &span {
        s.propagate(&slot.spec, &mut msg, &mut headers);
    }
    if conn.is_modern() {
        modern_upstream_request(slot, session, &mut msg, &mut headers);
    }
    // The client's token goes upstream only when the upstream asks for it.
    if slot.spec.forward_authorization {
        if let Some(auth) = session.authorization() {
            headers.push("authorization", auth.to_string());
        }
    }
    let upstream_tool = span
        .as_ref()
        .and_then(|_| msg.param_str("name"))
        .filter(|_| method == "tools/call")
        .map(str::to_string);
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
    gw.track_call(
        &conn,
        up_id,
        CallRoute {
            session: session.clone(),
            progress_token,
            sink: sink.clone(),
        },
    );
    let cancelled = Arc::new(AtomicBool::new(false));
    let key = id_key(&client_id);
    session.inflight.lock().insert(
        key.clone(),
        InflightCall {
            conn: conn.clone(),
            upstream_id: up_id,
            cancelled: cancelled.clone(),
        },
    );
    // Forget the call however this ends (a reply, or the caller dropping the future when its
    // client went away).
    struct Untrack<'a> {
        gw: &'a Gateway,
        session: &'a Session,
        conn: &'a sluice_upstream::Connection,
        up_id: u64,
        key: String,
    }
    impl Drop for Untrack<'_> {
        fn drop(&mut self) {
            self.session.inflight.lock().remove(&self.key);
            self.gw.untrack_call(self.conn, self.up_id);
        }
    }
    let untrack = Untrack {
        gw,
        session,
        conn: &conn,
        up_id,
        key,
    };
    let result = conn
        .call_with_headers(up_id, msg, slot.timeout(gw), &headers)
        .await;
    drop(untrack);
    if let Some(s) = span {
        s.finish(
            &slot.spec,
            &method,
            up_id,
            upstream_tool.as_deref(),
            &result,
        );
    }
    if cancelled.load(Ordering::SeqCst) {
        return Outcome::Cancelled(client_id);
    }
    let reply = match result {
        Ok(mut reply) => {
            reply.set_id(client_id);
            reply
        }
        Err(UpstreamError::Timeout(ms)) => Message::error(
            client_id,
            &RpcError::new(
                codes::REQUEST_TIMEOUT,
                format!("Upstream '{}' did not answer {method} within {ms} ms; the request was cancelled upstream", slot.spec.id),
            )
            .with_data(json!({"upstream": slot.spec.id, "timeoutMs": ms})),
        ),
        Err(e) => Message::error(
            client_id,
            &RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("Upstream '{}' failed during {method}: {e}", slot.spec.id),
            )
            .with_data(json!({"upstream": slot.spec.id})),
        ),
    };
    Outcome::Reply(reply)
}

/// How many `input_required` rounds Sluice runs for a legacy client before giving up.
const MAX_INPUT_ROUNDS: usize = 16;

/// [`forward`], and when a 2026-07-28 upstream answers a legacy client with `input_required`:
/// ask the client each input request (as the legacy server-to-client request it knows), then
/// retry the request with the answers and the upstream's `requestState`. A modern client gets
/// the `input_required` result itself (its retry comes back through here, stateless).
pub async fn forward_rounds(
    gw: &Arc<Gateway>,
    session: &Arc<Session>,
    slot: &Arc<Slot>,
    mut msg: Message,
    sink: &Sink,
) -> Outcome {
    let client_id = msg.id().cloned().unwrap_or(Value::Null);
    for _ in 0..MAX_INPUT_ROUNDS {
        let outcome = forward(gw, session, slot, msg.clone(), sink).await;
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
            // A complete result of a 2026-07-28 upstream, in the shape of a legacy one, so
            // hooks see one model whichever era the upstream speaks (a modern client gets the
            // marks back from `modern::decorate`; a legacy client never sees them).
            let Outcome::Reply(mut reply) = outcome else {
                unreachable!("matched above")
            };
            let legacy_client = !session.is_modern();
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
            return Outcome::Reply(reply);
        }
        let result = reply.result().cloned().unwrap_or_default();
        let responses = match ask_for_input(gw, session, sink, &result, &slot.spec.id).await {
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

/// Ask a legacy client every input request of an `input_required` result, one by one; the
/// answers keyed as the requests were.
async fn ask_for_input(
    gw: &Arc<Gateway>,
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
        let answer = gw
            .ask_client(session, sink, method, params, upstream)
            .await?;
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
    headers: &mut ExtraHeaders,
) {
    let caps = session.client_capabilities.clone();
    // A legacy client hears log messages unless it lowered the level (the handshake era's
    // default); a modern client's own `logLevel` (or none) travels as it sent it.
    let level = (!session.is_modern()).then(|| {
        session
            .log_level
            .lock()
            .clone()
            .unwrap_or_else(|| "debug".into())
    });
    let params = msg.params_mut();
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert(sluice_core::version::meta::CLIENT_CAPABILITIES.into(), caps);
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
    let args = msg
        .params()
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut wanted = Vec::new();
    crate::modern::header_params(&schema, &args, &mut wanted);
    for (name, value) in wanted {
        let text = match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        headers.push(
            format!("mcp-param-{name}"),
            sluice_upstream::header_value(&text),
        );
    }
}

/// Handle a notification from an initialised session.
pub fn handle_notification(gw: &Arc<Gateway>, session: &Arc<Session>, msg: Message) {
    match msg.method().unwrap_or("") {
        "notifications/initialized" => {}
        "notifications/cancelled" => {
            if let Some(id) = msg.params().and_then(|p| p.get("requestId")) {
                gw.cancel_client_request(session, id, msg.params().and_then(|p| p.get("reason")));
            }
        }
        "notifications/roots/list_changed" => {
            // Tell every upstream connection this client's calls go through.
            let gw = gw.clone();
            let session = session.clone();
            tokio::spawn(async move {
                let own: Vec<_> = session.conns.lock().await.values().cloned().collect();
                for c in own {
                    let _ = c.notify("notifications/roots/list_changed", None);
                }
                let slots = gw.slots();
                for slot in slots.iter() {
                    if !slot.per_session() {
                        if let Some(c) = slot.state.lock().control.clone() {
                            let _ = c.notify("notifications/roots/list_changed", None);
                        }
                    }
                }
            });
        }
        other => {
            tracing::debug!(session = %session.id, method = other, "notification not forwarded")
        }
    }
}
