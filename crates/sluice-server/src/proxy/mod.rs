//! THE driver of client messages. Each exchange is one [`call::Call`], built once when the
//! message arrives (the request's target resolved, what it names decoded, its facts, trace,
//! span and operation started), which owns the phases and ends in one `finish`:
//!
//! ```text
//! Call ─▶ access ─▶ request hooks (head → tail) ─▶ dispatch ─▶ response hooks (tail → head) ─▶ finish
//!                                                   │ local answer · one upstream (forward.rs)
//!                                                   │ gateway tool (features/) · fan-out · task
//! ```
//!
//! The strategies in this file differ only in what they dispatch: a client request, a
//! 2026-07-28 request (its session start first), `initialize`, a client's notification or
//! reply; [`client_out::to_client`] (a message toward the client), the task results
//! ([`tasks`]) and the list pages answered from the cache ([`lists`]) end through the same
//! `finish`.
//!
//! A request hook that changes what the message targets gets it resolved once more; the
//! funnel's `run_tool` is a rewrite into the real `tools/call`, which runs every phase again,
//! nested in the meta-call's. Client notifications and replies run the request hooks and go on
//! to their upstream. What upstreams start comes back through [`inbound`].

mod ask;
pub(crate) mod call;
pub(crate) mod client_out;
mod consent;
pub(crate) mod forward;
pub(crate) mod hooks;
pub(crate) mod inbound;
pub(crate) mod lists;
pub(crate) mod route;
mod skills;
pub(crate) mod tasks;

use crate::access;
use crate::channel::{Outcome, Sink};
#[cfg(test)]
use crate::control;
use crate::features::{connections, funnel, management, search};
use crate::gateway_tools::GatewayTool;
use crate::session::Session;
use crate::state::{Snapshot, State};
use call::{Call, End};
use hooks::Facts;
use route::Target;
use serde_json::{json, Value};
use sluice_core::{Kind, Message, ParseError, RpcError};
use sluice_hooks::{Phase, RequestOutcome};
use std::sync::Arc;

/// Parse a message a client sent, as the listeners do: kept as its text
/// ([`Message::parse`]; the builtins read and change `params`' members, each parsed alone),
/// unless hooks shown payloads will read it whole anyway ([`Message::parse_tree`]; reading
/// its text first would only add to the parse).
pub(crate) fn parse_client(snap: &Snapshot, bytes: &[u8]) -> Result<Message, ParseError> {
    if snap.chain.shows_payloads() {
        Message::parse_tree(bytes)
    } else {
        Message::parse(bytes)
    }
}

/// A client request of an initialised session (or a modern client's request): every phase, on
/// the one snapshot the transport loaded for it, carried by one [`Call`].
pub(crate) async fn client_request(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    msg: Message,
    sink: &Sink,
) -> Outcome {
    // A place under `max_inflight_per_principal`, held until the request is answered.
    let _place = match inflight_place(st, snap, session) {
        Ok(place) => place,
        Err(max) => return refuse_inflight(st, snap, session, sink, msg, max),
    };
    // The session's own upstream sessions (if any) are open, and their lists are its view.
    if msg.method() != Some("ping") {
        crate::views::prepare(snap, session).await;
    }
    let catalog = crate::views::catalog_for(snap, session);
    let mut call = Call::request(st, snap, session, sink, &catalog, &msg);
    // Access: a target the caller may not use is answered like one that does not exist.
    if let Err(refused) = call.access() {
        let access::Refused { error, reason } = *refused;
        tracing::info!(session = %session.id, "{reason}");
        let reply = Message::error(msg.id().cloned().unwrap_or(Value::Null), &error);
        call.finish(End::Reply {
            reply: &reply,
            refused: Some(reason),
        });
        return Outcome::Reply(reply);
    }
    if !call.watched() {
        // Nothing hooks or watches it: the dispatch alone (there is nothing to record).
        let target = call.take_target();
        return dispatch(&call, target, msg).await;
    }
    // Boxed: a request nothing hooks or watches is only as large as its dispatch.
    Box::pin(hooked(call, msg)).await
}

/// The request's place among its principal's requests in flight (None: no cap, or no
/// principal); `Err(max)` past the cap.
fn inflight_place(
    st: &State,
    snap: &Snapshot,
    session: &Session,
) -> Result<Option<crate::overload::Inflight>, u64> {
    let Some(max) = snap.settings().max_inflight_per_principal else {
        return Ok(None);
    };
    let Some(key) = session.principal_key() else {
        return Ok(None);
    };
    match st.rt.overload().begin_request(key, max) {
        Some(place) => Ok(Some(place)),
        None => Err(max),
    }
}

/// How long a request refused past `max_inflight_per_principal` is told to wait.
const INFLIGHT_RETRY_AFTER_MS: u64 = 500;

/// Answer a request past `max_inflight_per_principal`: -32029 with `data.retryAfterMs`, the
/// shape of the `rate-limit` builtin's refusal; audited as refused.
#[cold]
fn refuse_inflight(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    sink: &Sink,
    msg: Message,
    max: u64,
) -> Outcome {
    let reason = format!(
        "Too many requests in flight for this caller ({max}, max_inflight_per_principal). Retry in {INFLIGHT_RETRY_AFTER_MS} ms."
    );
    let error = RpcError::new(
        sluice_core::codes::RATE_LIMITED,
        "Too many requests in flight",
    )
    .with_data(json!({
        "reason": reason,
        "limit": "max_inflight_per_principal",
        "max": max,
        "retryAfterMs": INFLIGHT_RETRY_AFTER_MS,
    }));
    tracing::info!(session = %session.id, "{reason}");
    let catalog = crate::views::catalog_for(snap, session);
    let call = Call::request(st, snap, session, sink, &catalog, &msg);
    let reply = Message::error(msg.id().cloned().unwrap_or(Value::Null), &error);
    call.finish(End::Reply {
        reply: &reply,
        refused: Some(reason),
    });
    Outcome::Reply(reply)
}

/// A watched request past access: the request hooks, the dispatch, the response hooks, the
/// finish.
async fn hooked(mut call: Call<'_>, msg: Message) -> Outcome {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    // What the request named, to route it again if a hook changed that. Only a hook shown
    // the message whole (command, process, http, Civic) can send it back naming another
    // tool; the builtins change `arguments` and `_meta` alone.
    let before = call.snap.chain.shows_payloads().then(|| owned_key(&msg));
    let (outcome, depth, request_copy) = call.request_hooks_keeping(msg).await;
    // A hook asked: a person decides, through the client.
    let outcome = match outcome {
        RequestOutcome::Ask(m, asks) => {
            let facts = call.facts().expect("a hooked call is watched");
            match Box::pin(ask::ask(
                call.st,
                call.session,
                call.sink(),
                facts,
                &m,
                &asks,
            ))
            .await
            {
                Ok(()) => RequestOutcome::Forward(m),
                Err(r) => RequestOutcome::Refuse(r),
            }
        }
        o => o,
    };
    let mut refused = None;
    let reply = match outcome {
        RequestOutcome::Forward(m) => {
            if before.as_ref().is_some_and(|b| owned_key(&m) != *b) {
                call.resolve_again(&m);
            }
            // Under the request's span and operation (its upstream call is a child). The
            // future is made in the await that runs it: a local would be kept twice.
            let target = call.take_target();
            match call.scoped(dispatch(&call, target, m)).await {
                Outcome::Reply(r) => r,
                Outcome::Cancelled(id) => {
                    call.finish(End::Cancelled);
                    return Outcome::Cancelled(id);
                }
            }
        }
        RequestOutcome::Answer(m) => m,
        RequestOutcome::Refuse(r) => {
            refused = Some(r.reason.clone());
            r.to_error(Phase::Request, id.clone())
        }
        RequestOutcome::Ask(..) => unreachable!("asks are decided above"),
    };
    // Response hooks (only those the request reached).
    let reply = match call
        .response_hooks(reply, request_copy.as_ref(), depth)
        .await
    {
        Ok(r) => r,
        Err(r) => {
            refused = Some(r.reason.clone());
            r.to_error(Phase::Response, id)
        }
    };
    // A tool call that created a task: its audit line names it.
    if call.facts().is_some_and(|f| f.method == "tools/call") {
        if let Some(task) = tasks::created_id(&reply) {
            call.set_task(Some(task.to_string()));
        }
    }
    call.finish(End::Reply {
        reply: &reply,
        refused,
    });
    Outcome::Reply(reply)
}

/// A 2026-07-28 request. Such a client has no session, so each request is a session of its
/// own (the session the driver runs it on): when there are hooks on the session events, the
/// SessionStart hooks are shown an `initialize` made of the request's `_meta` (protocol
/// version, capabilities, client info) before its request hooks — a refusal refuses the
/// request —, and the Stop and SessionEnd hooks fire after its reply.
pub(crate) async fn modern_request(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    msg: Message,
    sink: &Sink,
) -> Outcome {
    if !snap.chain.has_session_hooks() {
        let outcome = client_request(st, snap, session, msg, sink).await;
        // The request's session ended: its transcript goes (unless kept).
        snap.chain.drop_transcript(&session.id);
        return outcome;
    }
    let init = Message::request(
        json!(0),
        "initialize",
        Some(json!({
            "protocolVersion": session.init.protocol_version,
            "capabilities": *session.init.capabilities,
            "clientInfo": *session.init.client_info,
        })),
    );
    let mut start = Call::plain(st, snap, session, Facts::plain("initialize", None));
    let outcome = match start.session_start(init).await {
        Some(r) => {
            let reply = r.to_error(Phase::Request, msg.id().cloned().unwrap_or(Value::Null));
            start.finish(End::Reply {
                reply: &reply,
                refused: Some(r.reason),
            });
            Outcome::Reply(reply)
        }
        None => {
            start.finish(End::Passed);
            client_request(st, snap, session, msg, sink).await
        }
    };
    let chain = snap.chain.clone();
    let sid = session.id.clone();
    tokio::spawn(async move {
        chain
            .stop_era(&sid, "modern", sluice_hooks::EndReason::RequestDone)
            .await
    });
    outcome
}

/// The client side of `session`'s requests, for OpenTelemetry's MCP conventions.
fn peer(session: &Session) -> sluice_telemetry::Peer<'_> {
    sluice_telemetry::Peer {
        session_id: (!session.is_modern()).then_some(session.id.as_str()),
        protocol_version: &session.init.protocol_version,
        net: match session.http() {
            Some(_) => sluice_telemetry::Net::Http,
            None => sluice_telemetry::Net::Stdio,
        },
    }
}

/// What a request names, owned (to tell whether a hook changed its target).
fn owned_key(msg: &Message) -> (Option<String>, Option<Value>) {
    let (method, named) = route::key(msg);
    (method.map(str::to_string), named.cloned())
}

fn reply_of(id: Value, r: Result<Value, RpcError>) -> Outcome {
    Outcome::Reply(match r {
        Ok(result) => Message::response(id, result),
        Err(e) => Message::error(id, &e),
    })
}

/// The dispatch phase: do what the call's target says — answer locally, call one upstream
/// (directly, with input rounds, as a task, or handed to the replica that runs the session's
/// own process), run a gateway tool, or fan out. Every branch but a plain upstream call is
/// boxed: this future is part of every request's, so it is kept as small as that call needs.
async fn dispatch(call: &Call<'_>, target: Target<'_>, mut msg: Message) -> Outcome {
    let (st, snap, session, sink) = (call.st, call.snap, call.session, call.sink());
    let id = msg.id().cloned().unwrap_or(Value::Null);
    match target {
        Target::Local(r) => reply_of(id, r),
        Target::Upstream(u) => {
            // A per-user upstream: the caller's own account must be connected first.
            if let Some(users) = u.slot.per_user() {
                let what = match msg
                    .param_str("name")
                    .filter(|_| msg.method() == Some("tools/call"))
                {
                    Some(tool) => format!("The tool {tool}"),
                    None => "This request".to_string(),
                };
                if let Err(e) = Box::pin(consent::ensure(call, users, &what)).await {
                    return reply_of(id, Err(e));
                }
            }
            // A task-augmented call (or one a modern client may get a task for).
            let task_tool = (msg.method() == Some("tools/call")
                && tasks::involved(session, u.slot, &msg))
            .then(|| msg.param_str("name").unwrap_or("").to_string());
            if let Some(name) = &u.name {
                route::rename(&mut msg, name);
            }
            if let Some(skill) = &u.skill {
                skills::to_upstream(&mut msg, skill);
            }
            if let Some(tool) = task_tool {
                return Box::pin(tasks::call_tool(st, session, u.slot, tool, msg, sink)).await;
            }
            // In a cluster, a session's own process may run on another replica.
            if let Some(reply) = st
                .rt
                .scale()
                .hand_isolated(session, u.slot, &msg, sink)
                .await
            {
                return Outcome::Reply(reply);
            }
            // The method, for showing a skill request's result (the message goes upstream).
            let msg_method = u
                .skill
                .as_ref()
                .and_then(|_| msg.method().map(str::to_string));
            let outcome = match &u.subscription {
                // A 2026-07-28 upstream has no resources/subscribe: Sluice watches the URI on a
                // listen stream of its own and answers the client itself.
                Some(sub) if sub.local => {
                    if sub.on {
                        u.slot.watch_resource(&sub.uri);
                    }
                    Outcome::Reply(Message::response(id, json!({})))
                }
                // Only a 2026-07-28 upstream asks for input rounds.
                _ if u.rounds && u.slot.is_modern() => {
                    Box::pin(forward::call_with_rounds(st, session, u.slot, msg, sink)).await
                }
                _ => forward::call(st, session, u.slot, msg, sink).await,
            };
            let outcome = match &u.skill {
                Some(skill) => {
                    let method = msg_method.as_deref().unwrap_or("");
                    Box::pin(skills::from_upstream(u.slot, skill, method, outcome)).await
                }
                None => outcome,
            };
            if let (Some(sub), Outcome::Reply(r)) = (&u.subscription, &outcome) {
                if r.kind() == Kind::Response {
                    Box::pin(session.set_subscribed(&sub.uri, sub.on)).await;
                }
            }
            outcome
        }
        Target::Gateway(GatewayTool::Manage(op)) => {
            let args = msg
                .params()
                .and_then(|p| p.get("arguments"))
                .cloned()
                .unwrap_or(json!({}));
            reply_of(id, Box::pin(management::call(st, op, &args)).await)
        }
        Target::Gateway(GatewayTool::Connections) => {
            let principal = session.principal_key();
            let r = match Box::pin(connections::answer(snap, principal, &msg)).await {
                connections::Answer::Reply(r) => r,
                // Asked as a call to one of its tools would be; then the caller's own state.
                connections::Answer::Connect(users) => {
                    match Box::pin(consent::ensure(call, &users, "This gateway")).await {
                        Ok(()) => connections::connected(&users, principal.unwrap_or("")).await,
                        Err(e) => Err(e),
                    }
                }
            };
            reply_of(id, r)
        }
        Target::Gateway(GatewayTool::SearchTools) => {
            // The caller's own view, its access rules applied to the ranking.
            let catalog = crate::views::catalog_for(snap, session);
            let principal = session.principal();
            reply_of(
                id,
                search::answer(&catalog, &snap.policy, principal.as_deref(), &msg),
            )
        }
        Target::Gateway(tool) => {
            let principal = session.principal();
            // The funnel lists and runs what this client sees (its own view, views.rs).
            let catalog = crate::views::catalog_for(snap, session);
            match funnel::answer(&catalog, &snap.policy, principal.as_deref(), tool, &msg) {
                funnel::Answer::Reply(r) => reply_of(id, r),
                // The real call: resolved, checked and hooked like a direct one.
                funnel::Answer::Run(inner) => {
                    Box::pin(client_request(st, snap, session, inner, sink)).await
                }
            }
        }
        Target::Task => Box::pin(tasks::methods::dispatch(st, snap, session, msg, sink)).await,
        Target::SetLevel(level) => {
            Box::pin(session.set_log_level(level)).await;
            forward::set_level(snap, session, &msg).await;
            reply_of(id, Ok(json!({})))
        }
    }
}

/// A client notification or a client's reply to an upstream request: request hooks (a refusal
/// drops it, logged and audited), then on.
pub(crate) async fn client_message(st: &Arc<State>, session: &Arc<Session>, msg: Message) {
    let snap = st.snapshot_for(session);
    let msg = if snap.chain.is_empty() {
        msg
    } else {
        let method = match msg.kind() {
            Kind::Notification => msg.method().unwrap_or(""),
            _ => "(reply)",
        };
        // A reply to an upstream's request: the upstream that asked (an ElicitationResult
        // hook's `mcp_server_name`) and the request it answers.
        let asked = (msg.kind() != Kind::Notification)
            .then(|| {
                let id = msg.id()?.as_str()?;
                let pending = session.routes.server_requests.lock();
                let p = pending.get(id)?;
                let label = p.conn.label().to_string();
                Some((
                    label.split('#').next().unwrap_or("").to_string(),
                    p.request.clone(),
                ))
            })
            .flatten();
        let (asked_by, answers) = match asked {
            Some((up, req)) => (Some(up), req),
            None => (None, None),
        };
        let is_reply = msg.kind() != Kind::Notification;
        let reply_id = msg.id().cloned();
        let mut facts = Facts::plain(method, asked_by.as_deref());
        facts.answers = answers;
        let mut call = Call::plain(st, &snap, session, facts);
        let method = method.to_string();
        match call.request_hooks(msg).await.0 {
            RequestOutcome::Forward(m) => {
                call.finish(End::Passed);
                m
            }
            RequestOutcome::Ask(m, _) => {
                tracing::info!(session = %session.id, %method, "a hook asked about a notification or reply; there is no call to allow, so it goes on");
                call.finish(End::Passed);
                m
            }
            RequestOutcome::Answer(_) => {
                tracing::warn!(session = %session.id, %method, "a hook answered a notification or reply; nothing to answer, dropped");
                call.finish(End::Passed);
                return;
            }
            RequestOutcome::Refuse(r) => {
                tracing::info!(session = %session.id, %method, reason = %r.reason, "message dropped by a hook");
                // A refused reply: the upstream that asked hears why (-32031, as a refused
                // message toward it), instead of waiting for an answer that never comes.
                if let (true, Some(id)) = (is_reply, reply_id) {
                    client_out::relay_client_reply(session, r.to_error(Phase::Response, id));
                }
                call.finish(End::Dropped(r.reason));
                return;
            }
        }
    };
    match msg.kind() {
        Kind::Notification => notification(st, &snap, session, msg),
        _ => client_out::relay_client_reply(session, msg),
    }
}

/// A notification from a client.
fn notification(st: &Arc<State>, snap: &Snapshot, session: &Arc<Session>, msg: Message) {
    match msg.method().unwrap_or("") {
        "notifications/initialized" => {}
        "notifications/cancelled" => {
            if let Some(id) = msg.params().and_then(|p| p.get("requestId")) {
                forward::cancel(st, session, id, msg.params().and_then(|p| p.get("reason")));
            }
        }
        "notifications/roots/list_changed" => {
            // Tell every upstream connection this client's calls go through.
            for slot in snap.slots.iter() {
                let conn = if slot.per_session() {
                    slot.session_connection(&session.id)
                } else {
                    slot.control()
                };
                if let Some(c) = conn {
                    let _ = c.notify("notifications/roots/list_changed", None);
                }
            }
        }
        other => {
            tracing::debug!(session = %session.id, method = other, "notification not forwarded")
        }
    }
}

/// `initialize`: the SessionStart and Request hooks, then the response hooks on the result.
/// `Err` carries the error reply (no session is created then).
pub(crate) async fn initialize(
    st: &Arc<State>,
    session: &Arc<Session>,
    msg: Message,
    version: &str,
) -> Result<Message, Message> {
    let snap = st.snapshot_for(session);
    // The session begins on this catalog: changes up to it are nothing to announce.
    session
        .live
        .catalog_seen
        .store(snap.catalog.version, std::sync::atomic::Ordering::Release);
    let mut call = Call::plain(st, &snap, session, Facts::plain("initialize", None)).measured(&msg);
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let result = || initialize_result(&snap, version);
    let (reply, refused) = if snap.chain.is_empty() {
        (Message::response(id, result()), None)
    } else {
        let request_copy = msg.clone();
        let (outcome, depth) = call.request_hooks(msg).await;
        let (reply, refused) = match outcome {
            RequestOutcome::Forward(_) | RequestOutcome::Ask(..) => {
                (Message::response(id.clone(), result()), None)
            }
            RequestOutcome::Answer(m) => (m, None),
            RequestOutcome::Refuse(r) => (r.to_error(Phase::Request, id.clone()), Some(r.reason)),
        };
        let reply = call
            .response_hooks(reply, Some(&request_copy), depth)
            .await
            .unwrap_or_else(|r| r.to_error(Phase::Response, id));
        (reply, refused)
    };
    if reply.kind() == Kind::Error {
        // Whatever made it an error (a refusal, a hook's answer) refused the session.
        let reason = refused
            .or_else(|| reply.error_obj().map(|e| e.to_string()))
            .unwrap_or_default();
        call.finish(End::Reply {
            reply: &reply,
            refused: Some(reason),
        });
        return Err(reply);
    }
    call.finish(End::Reply {
        reply: &reply,
        refused: None,
    });
    Ok(reply)
}

/// The `initialize` result this gateway answers with. A single transparent upstream that is up
/// lends its serverInfo, capabilities and instructions (so `--passthrough` is invisible);
/// otherwise Sluice describes itself.
pub(crate) fn initialize_result(snap: &Snapshot, version: &str) -> Value {
    if let [slot] = &*snap.slots {
        if slot.spec.transparent {
            if let Some(init) = slot.state.lock().init.clone() {
                let mut r = init;
                if let Some(o) = r.as_object_mut() {
                    o.insert("protocolVersion".into(), json!(version));
                    if let Some(c) = o.get_mut("capabilities") {
                        tasks::fit_capabilities(c, false);
                    }
                }
                return r;
            }
        }
    }
    let mut capabilities = json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "logging": {},
        "completions": {},
    });
    // Tasks only when an upstream that is up can run them.
    let caps: Vec<Value> = snap.slots.iter().filter_map(|s| s.capabilities()).collect();
    if let Some((key, value)) = tasks::capability(&caps, false) {
        capabilities[key] = value;
    }
    // Skills only when an upstream that is up declares them.
    let skills = &snap.catalog.skills;
    if skills.any() {
        let settings = match skills.any_directory_read() {
            true => json!({"directoryRead": true}),
            false => json!({}),
        };
        capabilities["extensions"] = json!({ sluice_skills::EXTENSION: settings });
    }
    json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": server_name(snap), "title": "Sluice MCP gateway", "version": env!("CARGO_PKG_VERSION")},
        "instructions": instructions(snap),
    })
}

/// The `serverInfo.name` the gateway answers with: `sluice`, or the endpoint's own.
pub(crate) fn server_name(snap: &Snapshot) -> &str {
    snap.endpoint
        .as_ref()
        .and_then(|e| e.server_name.as_deref())
        .unwrap_or("sluice")
}

/// The gateway's own `instructions` (an endpoint's own, when it has them): how its tools are named, then each upstream's.
fn instructions(snap: &Snapshot) -> String {
    if let Some(own) = snap.endpoint.as_ref().and_then(|e| e.instructions.as_ref()) {
        return own.clone();
    }
    let mut parts = vec!["Sluice gateway. Tools are named <upstream>_<tool>.".to_string()];
    for slot in snap.slots.iter() {
        if let Some(i) = slot
            .state
            .lock()
            .init
            .as_ref()
            .and_then(|i| i.get("instructions"))
            .and_then(Value::as_str)
        {
            parts.push(format!("[{}] {i}", slot.spec.id));
        }
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests;
