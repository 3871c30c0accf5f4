//! The pipeline driver: every message a client sends runs the request hooks before the router,
//! every message a client receives runs the response hooks, and every exchange is audited once.
//!
//! ```text
//! client ─▶ request hooks (head → tail) ─▶ router ─▶ upstream
//! client ◀─ response hooks (tail → head, only those the request reached) ◀─ response controls ◀─┘
//! ```

use crate::catalog::Catalog;
use crate::gateway::{Gateway, Sink};
use crate::router::{handle_notification, handle_request, Outcome};
use crate::session::Session;
use crate::telemetry::RequestSpan;
use serde_json::Value;
use sluice_core::{Kind, Message};
use sluice_hooks::{Ctx, Phase, Refusal, RequestOutcome, Trace};
use std::sync::Arc;
use std::time::Instant;

/// -32030 (request phase) or -32031 (response phase) for `id`; the reason reaches the client
/// only when it is meant for the agent. A refusal with an error of its own (the `validate`
/// builtin's -32602) answers with that error.
pub fn refusal_error(phase: Phase, id: Value, refusal: &Refusal) -> Message {
    refusal.to_error(phase, id)
}

/// The facts hooks select on, for a message from or to `session`.
struct Facts {
    method: String,
    tool_name: Option<String>,
    upstream: Option<String>,
    /// The catalog, kept when a hook wants the tool's definition (`validate`).
    catalog: Option<Arc<Catalog>>,
}

fn facts_of(gw: &Gateway, msg: &Message) -> Facts {
    let method = msg.method().unwrap_or("").to_string();
    let (tool_name, upstream, catalog) = if method == "tools/call" {
        let name = msg.param_str("name").map(str::to_string);
        let catalog = gw.catalog();
        let upstream = name
            .as_deref()
            .and_then(|n| catalog.tool(n))
            .and_then(|r| catalog.slots.get(r.slot))
            .map(|s| s.spec.id.clone());
        let keep = gw.chain().wants_tool_definitions().then_some(catalog);
        (name, upstream, keep)
    } else {
        (None, None, None)
    };
    Facts {
        method,
        tool_name,
        upstream,
        catalog,
    }
}

fn ctx<'a>(session: &'a Session, f: &'a Facts) -> Ctx<'a> {
    Ctx {
        session_id: &session.id,
        method: &f.method,
        tool_name: f.tool_name.as_deref(),
        upstream: f.upstream.as_deref(),
        era: session.era(),
        tool: f
            .tool_name
            .as_deref()
            .and_then(|n| f.catalog.as_ref()?.tool_definition(n)),
        principal: session.principal(),
    }
}

/// A client request: request hooks, the router (unless a hook answered or refused), response
/// hooks, audit.
pub async fn client_request(
    gw: &Arc<Gateway>,
    session: &Arc<Session>,
    msg: Message,
    sink: &Sink,
) -> Outcome {
    let policy = gw.policy();
    if !policy.is_open() {
        if let Err(refused) = crate::access::check(&policy, session, &msg) {
            let crate::access::Refused { error, reason } = *refused;
            let facts = facts_of(gw, &msg);
            tracing::info!(session = %session.id, "{reason}");
            gw.record(
                session,
                &facts.method,
                facts.tool_name.as_deref(),
                facts.upstream.as_deref(),
                Instant::now(),
                "refused",
                Some(reason),
                &Trace::default(),
            );
            return Outcome::Reply(Message::error(
                msg.id().cloned().unwrap_or(Value::Null),
                &error,
            ));
        }
    }
    let chain = gw.chain();
    let tel = gw.telemetry();
    if chain.is_empty() && !gw.observed() && tel.is_none() {
        return handle_request(gw, session, msg, sink).await;
    }
    let started = Instant::now();
    let facts = facts_of(gw, &msg);
    let cx = ctx(session, &facts);
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let span = tel.map(|t| t.start_request(&msg, &session.id, facts.upstream.as_deref()));
    let mut trace = Trace::default();
    let request_copy = chain
        .selects(Phase::Response, &cx, usize::MAX)
        .then(|| msg.clone());
    let (outcome, depth) = chain.request(&cx, msg, &mut trace).await;
    let mut refused_in = None;
    let reply = match outcome {
        RequestOutcome::Forward(m) => match route(gw, session, m, sink, span.as_ref()).await {
            Outcome::Reply(r) => r,
            Outcome::Cancelled(id) => {
                if let Some(s) = span {
                    s.finish("cancelled", None, &trace);
                }
                gw.record(
                    session,
                    &facts.method,
                    facts.tool_name.as_deref(),
                    facts.upstream.as_deref(),
                    started,
                    "cancelled",
                    None,
                    &trace,
                );
                return Outcome::Cancelled(id);
            }
        },
        RequestOutcome::Answer(m) => m,
        RequestOutcome::Refuse(r) => {
            refused_in = Some(r.reason.clone());
            refusal_error(Phase::Request, id.clone(), &r)
        }
    };
    let reply = match chain
        .response(&cx, reply, request_copy.as_ref(), depth, &mut trace)
        .await
    {
        Ok(r) => r,
        Err(r) => {
            refused_in = Some(r.reason.clone());
            refusal_error(Phase::Response, id, &r)
        }
    };
    let outcome = match (&refused_in, reply.kind()) {
        (Some(_), _) => "refused",
        (None, Kind::Error) => "error",
        _ => "ok",
    };
    if facts.method == "tools/call" || refused_in.is_some() {
        let error = reply
            .error_obj()
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string);
        gw.record(
            session,
            &facts.method,
            facts.tool_name.as_deref(),
            facts.upstream.as_deref(),
            started,
            outcome,
            refused_in.or(error),
            &trace,
        );
    }
    if let Some(s) = span {
        s.finish(outcome, Some(&reply), &trace);
    }
    Outcome::Reply(reply)
}

/// The router, under the request's span when tracing (its upstream call becomes a child).
async fn route(
    gw: &Arc<Gateway>,
    session: &Arc<Session>,
    msg: Message,
    sink: &Sink,
    span: Option<&RequestSpan>,
) -> Outcome {
    match span {
        Some(s) => s.scope(handle_request(gw, session, msg, sink)).await,
        None => handle_request(gw, session, msg, sink).await,
    }
}

/// A client notification or a client's reply to an upstream request: request hooks (a refusal
/// drops it, logged and audited), then on.
pub async fn client_message(gw: &Arc<Gateway>, session: &Arc<Session>, msg: Message) {
    let chain = gw.chain();
    let msg = if chain.is_empty() {
        msg
    } else {
        let facts = facts_of(gw, &msg);
        let facts = Facts {
            method: match msg.kind() {
                Kind::Notification => facts.method,
                _ => "(reply)".to_string(),
            },
            ..facts
        };
        let cx = ctx(session, &facts);
        let mut trace = Trace::default();
        let started = Instant::now();
        match chain.request(&cx, msg, &mut trace).await.0 {
            RequestOutcome::Forward(m) => m,
            RequestOutcome::Answer(_) => {
                tracing::warn!(session = %session.id, method = %facts.method, "a hook answered a notification or reply; nothing to answer, dropped");
                return;
            }
            RequestOutcome::Refuse(r) => {
                tracing::info!(session = %session.id, method = %facts.method, reason = %r.reason, "message dropped by a hook");
                gw.record(
                    session,
                    &facts.method,
                    None,
                    None,
                    started,
                    "refused",
                    Some(r.reason),
                    &trace,
                );
                return;
            }
        }
    };
    match msg.kind() {
        Kind::Notification => handle_notification(gw, session, msg),
        _ => gw.relay_client_reply(session, msg),
    }
}

/// A message toward the client that answers none of its requests (upstream requests and
/// notifications, gateway notifications): response hooks. None = refused (dropped, logged;
/// an upstream request is answered with -32031 by the caller).
pub async fn to_client(
    gw: &Gateway,
    session: &Session,
    msg: Message,
    upstream: Option<&str>,
) -> Result<Message, Refusal> {
    let chain = gw.chain();
    if chain.is_empty() {
        return Ok(msg);
    }
    let facts = Facts {
        method: msg.method().unwrap_or("").to_string(),
        tool_name: None,
        upstream: upstream.map(str::to_string),
        catalog: None,
    };
    let cx = ctx(session, &facts);
    let mut trace = Trace::default();
    let started = Instant::now();
    let r = chain.response(&cx, msg, None, usize::MAX, &mut trace).await;
    if let Err(refusal) = &r {
        tracing::info!(session = %session.id, method = %facts.method, reason = %refusal.reason, "message to the client refused by a hook");
        gw.record(
            session,
            &facts.method,
            None,
            upstream,
            started,
            "refused",
            Some(refusal.reason.clone()),
            &trace,
        );
    }
    r
}

/// `initialize`: the SessionStart and Request hooks, then the response hooks on the result.
/// `Err` carries the error reply (no session is created then).
pub async fn initialize(
    gw: &Arc<Gateway>,
    session: &Arc<Session>,
    msg: Message,
    result: impl FnOnce() -> Value,
) -> Result<Message, Message> {
    let Some(tel) = gw.telemetry() else {
        return initialize_hooks(gw, session, msg, result, &mut Trace::default()).await;
    };
    let span = tel.start_request(&msg, &session.id, None);
    let mut trace = Trace::default();
    let r = initialize_hooks(gw, session, msg, result, &mut trace).await;
    match &r {
        Ok(reply) => span.finish("ok", Some(reply), &trace),
        Err(reply) => span.finish("refused", Some(reply), &trace),
    }
    r
}

async fn initialize_hooks(
    gw: &Arc<Gateway>,
    session: &Arc<Session>,
    msg: Message,
    result: impl FnOnce() -> Value,
    trace: &mut Trace,
) -> Result<Message, Message> {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let chain = gw.chain();
    if chain.is_empty() {
        return Ok(Message::response(id, result()));
    }
    let facts = Facts {
        method: "initialize".into(),
        tool_name: None,
        upstream: None,
        catalog: None,
    };
    let cx = ctx(session, &facts);
    let started = Instant::now();
    let request_copy = msg.clone();
    let (outcome, depth) = chain.request(&cx, msg, trace).await;
    let (reply, refused) = match outcome {
        RequestOutcome::Forward(_) => (Message::response(id.clone(), result()), None),
        RequestOutcome::Answer(m) => (m, None),
        RequestOutcome::Refuse(r) => (
            refusal_error(Phase::Request, id.clone(), &r),
            Some(r.reason),
        ),
    };
    let reply = chain
        .response(&cx, reply, Some(&request_copy), depth, trace)
        .await
        .unwrap_or_else(|r| refusal_error(Phase::Response, id, &r));
    if reply.kind() == Kind::Error {
        let reason = refused.or_else(|| reply.error_obj().map(|e| e.to_string()));
        gw.record(
            session,
            "initialize",
            None,
            None,
            started,
            "refused",
            reason,
            trace,
        );
        return Err(reply);
    }
    Ok(reply)
}
