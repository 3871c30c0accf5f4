//! Tasks through the gateway, in both eras and across them. A task-augmented `tools/call`
//! goes to the tool's upstream like any call (the request hooks ran on it); the task it creates
//! is recorded under an id the gateway mints ([`crate::tasks`]) and handed to the client in the
//! client's era: `{task: {…}}` for a 2025-11-25 client, the flat `resultType: "task"` result for
//! a 2026-07-28 one. `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update` and `tasks/list`
//! reach the upstream that owns the task, for the client that created it only; the final result,
//! however it is collected, passes the response hooks of the call that created it (`mask`, `pii`,
//! `size-cap`, PostToolUse, …) and is audited with the task id.
//!
//! Across eras: a 2026-07-28 upstream's task is polled with `tasks/get` for a legacy client's
//! blocking `tasks/result`, and its input requests are asked of the client as the elicitation /
//! sampling requests it knows (answered upstream with `tasks/update`); a 2025-11-25 upstream's
//! task shows a modern client the result inlined on `tasks/get` (read with `tasks/result`). One
//! pairing cannot work and is refused: `tasks/update` on a task of a 2025-11-25 upstream (which
//! takes input only on the `tasks/result` stream) answers -32602 "Task … runs on a 2025-11-25
//! upstream; tasks/update cannot reach it".

use super::forward;
use super::hooks::Facts;
use crate::channel::{Outcome, Sink};
use crate::session::Session;
use crate::state::{Snapshot, State};
use crate::tasks::TaskRoute;
use serde_json::{json, Map, Value};
use sluice_core::version::meta;
use sluice_core::{codes, Message, RpcError};
use sluice_hooks::Trace;
use sluice_telemetry::Call;
use sluice_upstream::Slot;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The 2026-07-28 extension's id.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The `_meta` key of a message related to a task (2025-11-25).
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The ttl asked of a 2025-11-25 upstream for a modern client's task.
const DEFAULT_TTL_MS: u64 = 300_000;
/// How long a legacy client's `tasks/result` polls a modern upstream's task at most.
const MAX_WAIT: Duration = Duration::from_secs(3600);
/// How many input rounds a polled task may ask for.
const MAX_INPUT_ROUNDS: usize = 16;

fn declares_extension(caps: &Value) -> bool {
    caps.get("extensions")
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(|v| !v.is_null())
}

/// Does the upstream run `tools/call` as 2025-11-25 tasks?
fn legacy_tasks(caps: &Value) -> bool {
    caps.pointer("/tasks/requests/tools/call").is_some()
}

/// The capabilities the gateway declares for tasks, from what its upstreams can run: the
/// 2025-11-25 `tasks` for legacy clients, the extension for modern ones. `None`: no upstream
/// runs tasks.
pub fn capability(caps: &[Value], modern_client: bool) -> Option<(&'static str, Value)> {
    let any = caps
        .iter()
        .any(|c| legacy_tasks(c) || declares_extension(c));
    match (any, modern_client) {
        (false, _) => None,
        (true, false) => Some((
            "tasks",
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        )),
        (true, true) => Some(("extensions", json!({EXTENSION: {}}))),
    }
}

/// Does any upstream of the snapshot that is up run tasks? (Without one the gateway has no
/// `tasks/*` methods: -32601, as before.)
pub fn runs_tasks(snap: &Snapshot) -> bool {
    let caps: Vec<Value> = snap.slots.iter().filter_map(|s| s.capabilities()).collect();
    capability(&caps, false).is_some()
}

/// Fit an upstream's capabilities for a client of the other era (a transparent upstream's
/// capabilities are shown as they are, but tasks are declared the client's way).
pub fn fit_capabilities(caps: &mut Value, modern_client: bool) {
    let Some(c) = caps.as_object_mut() else {
        return;
    };
    let runs = c
        .get("tasks")
        .is_some_and(|t| legacy_tasks(&json!({"tasks": t})))
        || declares_extension(&Value::Object(c.clone()));
    if modern_client {
        c.remove("tasks");
        if runs {
            let ext = c.entry("extensions").or_insert_with(|| json!({}));
            ext[EXTENSION] = json!({});
        }
    } else {
        let empty = c
            .get_mut("extensions")
            .and_then(Value::as_object_mut)
            .map(|e| {
                e.remove(EXTENSION);
                e.is_empty()
            });
        if empty == Some(true) {
            c.remove("extensions");
        }
        if runs {
            c.insert(
                "tasks".into(),
                json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
            );
        }
    }
}

/// Does this `tools/call` involve a task: a legacy client asking for one, or a modern client
/// that can take one?
pub fn involved(session: &Session, msg: &Message) -> bool {
    if session.is_modern() {
        declares_extension(&session.init.capabilities)
    } else {
        msg.params().is_some_and(|p| p.get("task").is_some())
    }
}

/// The gateway task id a reply created, for the audit line.
pub fn created_id(reply: &Message) -> Option<&str> {
    let r = reply.result()?;
    r.pointer("/task/taskId")
        .or_else(|| (r.get("resultType") == Some(&json!("task"))).then(|| r.get("taskId"))?)
        .and_then(Value::as_str)
        .filter(|id| id.starts_with("sluice-task-"))
}

/// How the upstream declares `tool` (its own name) may run: `optional`, `required`, …
fn tool_support(slot: &Slot, tool: &str) -> Option<String> {
    let st = slot.state.lock();
    st.lists.as_ref()?.tools.iter().find_map(|t| {
        (t.get("name").and_then(Value::as_str) == Some(tool)).then(|| {
            t.pointer("/execution/taskSupport")?
                .as_str()
                .map(str::to_string)
        })?
    })
}

/// A task-augmented `tools/call` (`msg` renamed for the upstream; `tool` is the client's name).
pub async fn call_tool(
    st: &State,
    session: &Arc<Session>,
    slot: &Arc<Slot>,
    tool: String,
    mut msg: Message,
    sink: &Sink,
) -> Outcome {
    let args = msg
        .params()
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or(json!({}));
    let caps = slot.capabilities().unwrap_or_default();
    let upstream_modern = slot.is_modern();
    let upstream_name = msg.param_str("name").unwrap_or("").to_string();
    let runs = if upstream_modern {
        declares_extension(&caps)
    } else {
        legacy_tasks(&caps)
    };
    if runs {
        let params = msg.params_mut();
        match (session.is_modern(), upstream_modern) {
            // A modern client on a legacy upstream: ask for a task where the tool can be one.
            (true, false) => {
                let support = tool_support(slot, &upstream_name);
                if matches!(support.as_deref(), Some("optional" | "required")) {
                    params.insert("task".into(), json!({"ttl": DEFAULT_TTL_MS}));
                }
            }
            // A legacy client on a modern upstream: the upstream decides; tell it this client
            // takes tasks (its own capabilities plus the extension).
            (false, true) => {
                params.remove("task");
                let m = params.entry("_meta").or_insert_with(|| json!({}));
                m[meta::CLIENT_CAPABILITIES] = with_extension(session);
            }
            _ => {}
        }
    }
    let outcome = forward::call_with_rounds(st, session, slot, msg, sink).await;
    let Outcome::Reply(mut reply) = outcome else {
        return outcome;
    };
    if runs {
        adopt(st, session, slot, &tool, args, &mut reply);
    }
    Outcome::Reply(reply)
}

/// The client's capabilities plus the extension: what a legacy client's task requests tell a
/// 2026-07-28 upstream (the gateway takes the task on the client's behalf).
fn with_extension(session: &Session) -> Value {
    let mut caps = session.init.capabilities.clone();
    if let Some(c) = caps.as_object_mut() {
        let ext = c.entry("extensions").or_insert_with(|| json!({}));
        ext[EXTENSION] = json!({});
    }
    caps
}

/// A reply that created a task upstream: record it and show it in the client's era.
fn adopt(
    st: &State,
    session: &Session,
    slot: &Arc<Slot>,
    tool: &str,
    args: Value,
    reply: &mut Message,
) {
    let Some(r) = reply.result_mut().and_then(Value::as_object_mut) else {
        return;
    };
    let upstream_task = match r.get("task").and_then(Value::as_object) {
        Some(t) => t.clone(),
        None if r.contains_key("taskId") && r.contains_key("status") => r.clone(),
        None => return,
    };
    let Some(upstream_id) = upstream_task.get("taskId").and_then(Value::as_str) else {
        return;
    };
    let ttl = upstream_task
        .get("ttl")
        .or_else(|| upstream_task.get("ttlMs"))
        .and_then(Value::as_u64);
    let route = st.rt.tasks.insert(
        session,
        slot,
        upstream_id,
        slot.is_modern(),
        tool,
        args,
        ttl,
    );
    let meta = r.remove("_meta");
    let mut shown = if session.is_modern() {
        let mut t = modern_task(&upstream_task, &route.id, false);
        t.insert("resultType".into(), json!("task"));
        t
    } else {
        let mut m = Map::new();
        m.insert(
            "task".into(),
            Value::Object(legacy_task(&upstream_task, &route.id)),
        );
        m
    };
    if let Some(Value::Object(m)) = meta {
        let m: Map<String, Value> = m
            .into_iter()
            .filter(|(k, _)| k != RELATED_TASK && k != meta::SERVER_INFO)
            .collect();
        if !m.is_empty() {
            shown.insert("_meta".into(), Value::Object(m));
        }
    }
    *r = shown;
}

/// A task as a 2025-11-25 `Task` under the gateway's id.
fn legacy_task(t: &Map<String, Value>, id: &str) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("taskId".into(), json!(id));
    for (legacy, modern) in [
        ("status", "status"),
        ("statusMessage", "statusMessage"),
        ("createdAt", "createdAt"),
        ("lastUpdatedAt", "lastUpdatedAt"),
        ("ttl", "ttlMs"),
        ("pollInterval", "pollIntervalMs"),
    ] {
        if let Some(v) = t.get(legacy).or_else(|| t.get(modern)) {
            out.insert(legacy.into(), v.clone());
        }
    }
    out
}

/// A task as the 2026-07-28 flat envelope under the gateway's id; with `detailed`, what
/// `tasks/get` inlines (result, error, input requests) as the upstream gave them.
fn modern_task(t: &Map<String, Value>, id: &str, detailed: bool) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("taskId".into(), json!(id));
    for (modern, legacy) in [
        ("status", "status"),
        ("statusMessage", "statusMessage"),
        ("createdAt", "createdAt"),
        ("lastUpdatedAt", "lastUpdatedAt"),
        ("ttlMs", "ttl"),
        ("pollIntervalMs", "pollInterval"),
    ] {
        if let Some(v) = t.get(modern).or_else(|| t.get(legacy)) {
            out.insert(modern.into(), v.clone());
        }
    }
    if detailed {
        for k in ["result", "error", "inputRequests"] {
            if let Some(v) = t.get(k) {
                out.insert(k.into(), v.clone());
            }
        }
    }
    out
}

/// The error for a task id this client cannot reach (unknown, expired, or another client's).
fn unknown(id: &str) -> RpcError {
    RpcError::invalid_params(format!("Task not found: {id}")).with_data(json!({"taskId": id}))
}

fn reply_of(id: Value, r: Result<Value, RpcError>) -> Outcome {
    Outcome::Reply(match r {
        Ok(v) => Message::response(id, v),
        Err(e) => Message::error(id, &e),
    })
}

/// One request to the task's upstream: its result, or its error.
async fn upstream(
    st: &State,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    method: &str,
    mut params: Map<String, Value>,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    params.insert("taskId".into(), json!(route.upstream_id));
    if route.upstream_modern && !session.is_modern() {
        let mut m = Map::new();
        m.insert(meta::CLIENT_CAPABILITIES.into(), with_extension(session));
        params.insert("_meta".into(), Value::Object(m));
    }
    let msg = Message::request(id, method, Some(Value::Object(params)));
    match forward::call(st, session, &route.slot, msg, sink).await {
        Outcome::Reply(r) => Ok(match (r.result(), r.error_obj()) {
            (Some(v), _) => Ok(v.clone()),
            (None, Some(e)) => Err(RpcError {
                code: e
                    .get("code")
                    .and_then(Value::as_i64)
                    .unwrap_or(codes::INTERNAL_ERROR),
                message: e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                data: e.get("data").cloned(),
            }),
            _ => Err(RpcError::internal("an empty reply")),
        }),
        cancelled => Err(cancelled),
    }
}

/// `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update`, `tasks/list` of a client.
pub async fn dispatch(
    st: &State,
    snap: &Snapshot,
    session: &Arc<Session>,
    msg: Message,
    sink: &Sink,
) -> Outcome {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let modern = session.is_modern();
    if !runs_tasks(snap) {
        return reply_of(id, Err(RpcError::method_not_found(&method)));
    }
    if modern && !declares_extension(&session.init.capabilities) {
        let e = RpcError::new(
            codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!("Missing required client capability: extensions[\"{EXTENSION}\"]"),
        )
        .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}));
        return reply_of(id, Err(e));
    }
    let removed = if modern {
        matches!(method.as_str(), "tasks/result" | "tasks/list")
    } else {
        method == "tasks/update"
    };
    if removed {
        return reply_of(id, Err(RpcError::method_not_found(&method)));
    }
    if method == "tasks/list" {
        return list(st, snap, session, id, &msg, sink).await;
    }
    let Some(task_id) = msg.param_str("taskId") else {
        return reply_of(
            id,
            Err(RpcError::invalid_params(format!(
                "{method} needs params.taskId"
            ))),
        );
    };
    let Some(route) = st.rt.tasks.get(task_id, session) else {
        return reply_of(id, Err(unknown(task_id)));
    };
    let mut params = msg
        .params()
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    params.remove("_meta");
    let r = match method.as_str() {
        "tasks/get" => get(st, snap, session, &route, id.clone(), sink).await,
        "tasks/result" => collect(st, snap, session, &route, id.clone(), sink).await,
        "tasks/cancel" => cancel(st, session, &route, id.clone(), sink).await,
        _ if !route.upstream_modern => Ok(Err(RpcError::invalid_params(format!(
            "Task {} runs on a 2025-11-25 upstream; tasks/update cannot reach it",
            route.id
        ))
        .with_data(json!({"taskId": route.id, "upstream": route.slot.spec.id})))),
        _ => upstream(
            st,
            session,
            &route,
            id.clone(),
            "tasks/update",
            params,
            sink,
        )
        .await
        .map(|r| r.map(|_| json!({}))),
    };
    match r {
        Ok(r) => reply_of(id, r),
        Err(cancelled) => cancelled,
    }
}

/// `tasks/get` in the client's era (a modern client gets the final result inlined, guarded).
async fn get(
    st: &State,
    snap: &Snapshot,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let got = match upstream(
        st,
        session,
        route,
        id.clone(),
        "tasks/get",
        Map::new(),
        sink,
    )
    .await?
    {
        Ok(Value::Object(t)) => t,
        Ok(_) => return Ok(Err(RpcError::internal("tasks/get: not an object"))),
        Err(e) => return Ok(Err(e)),
    };
    if !session.is_modern() {
        return Ok(Ok(Value::Object(legacy_task(&got, &route.id))));
    }
    let mut shown = modern_task(&got, &route.id, true);
    let status = got.get("status").and_then(Value::as_str);
    if !route.upstream_modern && matches!(status, Some("completed" | "failed")) {
        // A 2025-11-25 upstream keeps the result behind tasks/result.
        match upstream(
            st,
            session,
            route,
            id.clone(),
            "tasks/result",
            Map::new(),
            sink,
        )
        .await?
        {
            Ok(mut r) => {
                strip_related(&mut r);
                shown.insert("result".into(), r);
            }
            Err(e) => {
                shown.insert("error".into(), e.to_value());
            }
        }
    }
    if let Some(result) = shown.remove("result") {
        match guard(st, snap, session, route, "tasks/get", result).await {
            Ok(r) => {
                shown.insert("result".into(), r);
            }
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(Value::Object(shown)))
}

fn strip_related(result: &mut Value) {
    if let Some(o) = result.as_object_mut() {
        let empty = o.get_mut("_meta").and_then(Value::as_object_mut).map(|m| {
            m.remove(RELATED_TASK);
            m.is_empty()
        });
        if empty == Some(true) {
            o.remove("_meta");
        }
    }
}

/// A legacy client's `tasks/result`: the final result (blocking), guarded.
async fn collect(
    st: &State,
    snap: &Snapshot,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let outcome = if route.upstream_modern {
        poll(st, session, route, id.clone(), sink).await?
    } else {
        upstream(
            st,
            session,
            route,
            id.clone(),
            "tasks/result",
            Map::new(),
            sink,
        )
        .await?
    };
    let mut result = match outcome {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    strip_related(&mut result);
    Ok(guard(st, snap, session, route, "tasks/result", result)
        .await
        .map(|mut r| {
            if let Some(o) = r.as_object_mut() {
                let m = o.entry("_meta").or_insert_with(|| json!({}));
                m[RELATED_TASK] = json!({"taskId": route.id});
            }
            r
        }))
}

/// Follow a 2026-07-28 upstream's task to its end for a legacy client: poll `tasks/get`, ask
/// the client what the task asks for, and give back its result or error.
async fn poll(
    st: &State,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let started = Instant::now();
    let mut rounds = 0;
    while started.elapsed() < MAX_WAIT {
        let t = match upstream(
            st,
            session,
            route,
            id.clone(),
            "tasks/get",
            Map::new(),
            sink,
        )
        .await?
        {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        match t.get("status").and_then(Value::as_str) {
            Some("completed") => return Ok(Ok(t.get("result").cloned().unwrap_or(json!({})))),
            Some("failed") => {
                let e = t.get("error");
                return Ok(Err(RpcError {
                    code: e
                        .and_then(|e| e.get("code"))
                        .and_then(Value::as_i64)
                        .unwrap_or(codes::INTERNAL_ERROR),
                    message: e
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or("the task failed")
                        .to_string(),
                    data: e.and_then(|e| e.get("data")).cloned(),
                }));
            }
            Some("cancelled") => {
                return Ok(Err(RpcError::invalid_params(format!(
                    "Task {} was cancelled",
                    route.id
                ))))
            }
            Some("input_required") if rounds < MAX_INPUT_ROUNDS => {
                rounds += 1;
                let mut answers = Map::new();
                for (key, request) in t
                    .get("inputRequests")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
                    let params = request.get("params").cloned();
                    match super::inbound::ask_client(
                        st,
                        session,
                        sink,
                        method,
                        params,
                        &route.slot.spec.id,
                    )
                    .await
                    {
                        Ok(a) => {
                            answers.insert(key.clone(), a);
                        }
                        Err(e) => return Ok(Err(e)),
                    }
                }
                let mut p = Map::new();
                p.insert("inputResponses".into(), Value::Object(answers));
                if let Err(e) =
                    upstream(st, session, route, id.clone(), "tasks/update", p, sink).await?
                {
                    return Ok(Err(e));
                }
                continue;
            }
            _ => {}
        }
        let wait = t
            .get("pollIntervalMs")
            .and_then(Value::as_u64)
            .unwrap_or(500)
            .clamp(50, 2000);
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }
    Ok(Err(RpcError::new(
        codes::REQUEST_TIMEOUT,
        format!(
            "Task {} did not end within {} s",
            route.id,
            MAX_WAIT.as_secs()
        ),
    )))
}

/// `tasks/cancel` in the client's era: a legacy client gets the task back, a modern one the
/// empty ack (also for a task that had ended, as the extension says).
async fn cancel(
    st: &State,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let r = upstream(
        st,
        session,
        route,
        id.clone(),
        "tasks/cancel",
        Map::new(),
        sink,
    )
    .await?;
    if session.is_modern() {
        return Ok(match r {
            Ok(_) => Ok(json!({})),
            // A 2025-11-25 upstream refuses to cancel an ended task: the extension acks it.
            Err(e) if !route.upstream_modern && e.code == codes::INVALID_PARAMS => Ok(json!({})),
            Err(e) => Err(e),
        });
    }
    match r {
        Ok(Value::Object(t)) if !route.upstream_modern => {
            Ok(Ok(Value::Object(legacy_task(&t, &route.id))))
        }
        Ok(_) => match upstream(st, session, route, id, "tasks/get", Map::new(), sink).await? {
            Ok(Value::Object(t)) => Ok(Ok(Value::Object(legacy_task(&t, &route.id)))),
            Ok(_) => Ok(Err(RpcError::internal("tasks/get: not an object"))),
            Err(e) => Ok(Err(e)),
        },
        Err(e) => Ok(Err(e)),
    }
}

/// `tasks/list` (legacy): this client's tasks on every upstream, as each upstream sees them now
/// (one page: the gateway mints no cursor).
async fn list(
    st: &State,
    snap: &Snapshot,
    session: &Arc<Session>,
    id: Value,
    msg: &Message,
    sink: &Sink,
) -> Outcome {
    if let Some(c) = msg.param_str("cursor") {
        return reply_of(
            id,
            Err(RpcError::invalid_params(format!("Invalid cursor: {c:?}"))),
        );
    }
    let mut tasks = Vec::new();
    for (n, route) in st.rt.tasks.of(session).iter().enumerate() {
        let aux = json!(format!("sluice-tasks-list-{n}"));
        match get(st, snap, session, route, aux, sink).await {
            Ok(Ok(t)) => tasks.push(t),
            Ok(Err(e)) => {
                tracing::debug!(task = %route.id, "tasks/list: the upstream no longer has it: {}", e.message)
            }
            Err(cancelled) => return cancelled,
        }
    }
    reply_of(id, Ok(json!({"tasks": tasks})))
}

/// A task's final result as the client will see it: the response phase of the call that
/// created it (response controls first, then PostToolUse and the other response hooks), and
/// the audit line with the task id and the outcome.
async fn guard(
    st: &State,
    snap: &Snapshot,
    session: &Session,
    route: &TaskRoute,
    method: &str,
    result: Value,
) -> Result<Value, RpcError> {
    let started = Instant::now();
    let call = Message::request(
        json!(0),
        "tools/call",
        Some(json!({"name": route.tool, "arguments": route.arguments})),
    );
    let facts = Facts::of_request(snap, &call, Some(&route.slot.spec.id));
    let mut trace = Trace::default();
    let reply = if snap.chain.is_empty() {
        Ok(Message::response(json!(0), result))
    } else {
        let cx = facts.ctx(session);
        snap.chain
            .response(
                &cx,
                Message::response(json!(0), result),
                Some(&call),
                usize::MAX,
                &mut trace,
            )
            .await
    };
    let (outcome, error, r) = match reply {
        Ok(m) => match (m.result().cloned(), m.error_obj()) {
            (Some(v), _) => {
                let failed = v.get("isError") == Some(&json!(true));
                (if failed { "error" } else { "ok" }, None, Ok(v))
            }
            (None, e) => {
                let msg = e
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                ("error", Some(msg.clone()), Err(RpcError::internal(msg)))
            }
        },
        Err(refusal) => {
            let reason = refusal.reason.clone();
            let e = refusal.to_error(sluice_hooks::Phase::Response, json!(0));
            let code = e.error_code().unwrap_or(codes::RESPONSE_REJECTED);
            (
                "refused",
                Some(reason.clone()),
                Err(RpcError::new(code, reason)),
            )
        }
    };
    st.record_task(
        snap,
        session,
        Call {
            method,
            tool: Some(&route.tool),
            upstream: Some(&route.slot.spec.id),
            started,
            outcome,
            error,
            trace: &trace,
        },
        Some(&route.id),
    );
    r
}

/// `notifications/tasks/status` from an upstream: to the client that created the task, under
/// the gateway's id. `None` when no client's task is meant (dropped).
pub fn status_for_client(
    st: &State,
    slot: &Slot,
    msg: &Message,
) -> Option<(Arc<Session>, Message)> {
    let params = msg.params()?.as_object()?;
    let upstream_id = params.get("taskId")?.as_str()?;
    let route = st.rt.tasks.by_upstream(slot, upstream_id)?;
    let session = st.rt.sessions.get(&route.session)?;
    let shown = legacy_task(params, &route.id);
    Some((
        session,
        Message::notification("notifications/tasks/status", Some(Value::Object(shown))),
    ))
}

/// A message an upstream sends about one of its tasks (`_meta` related-task): the gateway's
/// task id in place of the upstream's.
pub fn map_related(st: &State, slot: &Slot, msg: &mut Message) {
    let upstream_id = msg
        .params()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(RELATED_TASK))
        .and_then(|r| r.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(upstream_id) = upstream_id else {
        return;
    };
    if let Some(route) = st.rt.tasks.by_upstream(slot, &upstream_id) {
        if let Some(m) = msg.params_mut().get_mut("_meta") {
            m[RELATED_TASK] = json!({"taskId": route.id});
        }
    }
}
